# Finds PyTorch's C++ headers and libraries from the torch Python package (the wheel's layout),
# for the peer benchmarks only. Torch's own package config is not used: it insists on CUDA
# components (cuDNN, NVTX, ...) that a wheel install does not provide to CMake.
#
# HOLOSCAN_DLPACK_TORCH_DIR: the torch package folder (default: asked from python3).
# Defines the INTERFACE target holoscan_dlpack_torch when found.
set(HOLOSCAN_DLPACK_TORCH_DIR "" CACHE PATH "torch package folder (with include/ and lib/)")
if(NOT HOLOSCAN_DLPACK_TORCH_DIR)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND)
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c "import os, torch; print(os.path.dirname(torch.__file__))"
      OUTPUT_VARIABLE _hdl_torch_dir OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE _hdl_torch_status ERROR_QUIET)
    if(_hdl_torch_status EQUAL 0)
      set(HOLOSCAN_DLPACK_TORCH_DIR "${_hdl_torch_dir}")
    endif()
  endif()
endif()
if(NOT HOLOSCAN_DLPACK_TORCH_DIR OR NOT EXISTS "${HOLOSCAN_DLPACK_TORCH_DIR}/include/ATen/DLConvertor.h")
  message(STATUS "holoscan-dlpack: PyTorch not found, the peer benchmarks are not built")
  return()
endif()

# c10 and torch_cpu give the host rows (DLPack import and export); c10_cuda and torch_cuda add the
# GPU rows when present (HOLOSCAN_BENCH_TORCH_CUDA). The wheel's torch_cpu needs libcudart and
# libcupti at run time, which the CUDA toolkit provides.
set(_hdl_torch_libs)
foreach(_hdl_lib c10 torch_cpu)
  find_library(_hdl_torch_${_hdl_lib} ${_hdl_lib} PATHS "${HOLOSCAN_DLPACK_TORCH_DIR}/lib"
    NO_DEFAULT_PATH)
  if(NOT _hdl_torch_${_hdl_lib})
    message(STATUS "holoscan-dlpack: lib${_hdl_lib}.so missing in ${HOLOSCAN_DLPACK_TORCH_DIR}/lib")
    return()
  endif()
  list(APPEND _hdl_torch_libs "${_hdl_torch_${_hdl_lib}}")
endforeach()
set(_hdl_torch_cuda ON)
set(_hdl_torch_cuda_libs)
foreach(_hdl_lib c10_cuda torch_cuda torch)
  find_library(_hdl_torch_${_hdl_lib} ${_hdl_lib} PATHS "${HOLOSCAN_DLPACK_TORCH_DIR}/lib"
    NO_DEFAULT_PATH)
  if(_hdl_torch_${_hdl_lib})
    list(APPEND _hdl_torch_cuda_libs "${_hdl_torch_${_hdl_lib}}")
  else()
    set(_hdl_torch_cuda OFF)
  endif()
endforeach()
set(HOLOSCAN_DLPACK_TORCH_CUDA_ROWS "${_hdl_torch_cuda}" CACHE BOOL
  "Build the PyTorch benchmark rows that need torch's CUDA libraries")
# torch_cuda is needed although no symbol of it is referenced: loading it registers c10's CUDA
# hooks. Where the linker drops unreferenced libraries by default (--as-needed, as on Ubuntu),
# c10 falls back to stubs whose hasPrimaryContext throws "Should never been called", and every
# c10 event call aborts the benchmark.
if(HOLOSCAN_DLPACK_TORCH_CUDA_ROWS AND _hdl_torch_cuda)
  list(APPEND _hdl_torch_libs "-Wl,--push-state,--no-as-needed" ${_hdl_torch_cuda_libs}
    "-Wl,--pop-state")
endif()
# The binary must share torch's C++ runtime, the shared libstdc++. A toolchain that links
# libstdc++ statically by default (the H200 machine's compiler does) gives the process two copies,
# and torch's exit-time teardown then frees a locale from the other copy ("free(): invalid
# pointer"). Naming the shared library before the driver's own -lstdc++ resolves every C++ runtime
# symbol there.
list(APPEND _hdl_torch_libs "-l:libstdc++.so.6")

add_library(holoscan_dlpack_torch INTERFACE)
target_include_directories(holoscan_dlpack_torch SYSTEM INTERFACE
  "${HOLOSCAN_DLPACK_TORCH_DIR}/include"
  "${HOLOSCAN_DLPACK_TORCH_DIR}/include/torch/csrc/api/include")
target_link_libraries(holoscan_dlpack_torch INTERFACE ${_hdl_torch_libs})
if(HOLOSCAN_DLPACK_TORCH_CUDA_ROWS)
  target_compile_definitions(holoscan_dlpack_torch INTERFACE HOLOSCAN_BENCH_TORCH_CUDA=1)
endif()
# The wheel's libraries find their CUDA libraries (from other wheels) through their own RUNPATH
# at run time; the linker need not resolve them here.
target_link_options(holoscan_dlpack_torch INTERFACE "LINKER:--allow-shlib-undefined"
  "LINKER:-rpath,${HOLOSCAN_DLPACK_TORCH_DIR}/lib")
message(STATUS "holoscan-dlpack: PyTorch from ${HOLOSCAN_DLPACK_TORCH_DIR}: peer benchmarks built")
