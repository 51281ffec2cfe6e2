# Enables the CUDA language for the GPU tests and the cross-process demo when nvcc is found:
# sets HOLOSCAN_DLPACK_HAVE_CUDA, and builds for the H200 (sm_90) unless told otherwise.
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)  # override with -DCMAKE_CUDA_ARCHITECTURES
  endif()
  enable_language(CUDA)
  set(HOLOSCAN_DLPACK_HAVE_CUDA ON)
else()
  set(HOLOSCAN_DLPACK_HAVE_CUDA OFF)
endif()
