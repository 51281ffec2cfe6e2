# Finds NCCL for the two-GPU floor benchmark only: the header and libnccl from the system or from
# the nvidia-nccl Python wheel that PyTorch brings (NCCL ships no CMake package).
#
# HOLOSCAN_DLPACK_NCCL_DIR: a folder with include/nccl.h and lib/libnccl.so* (default: asked from
# python3's nvidia.nccl package, then the system paths).
# Defines the IMPORTED target holoscan_dlpack_nccl when found.
set(HOLOSCAN_DLPACK_NCCL_DIR "" CACHE PATH "NCCL folder (with include/nccl.h and lib/)")
set(_hdl_nccl_hints)
if(HOLOSCAN_DLPACK_NCCL_DIR)
  list(APPEND _hdl_nccl_hints "${HOLOSCAN_DLPACK_NCCL_DIR}")
else()
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND)
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c
              "import os, nvidia.nccl as n; print(os.path.dirname(n.__file__) if n.__file__ else list(n.__path__)[0])"
      OUTPUT_VARIABLE _hdl_nccl_py OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE _hdl_nccl_status ERROR_QUIET)
    if(_hdl_nccl_status EQUAL 0)
      list(APPEND _hdl_nccl_hints "${_hdl_nccl_py}")
    endif()
  endif()
endif()
find_path(HOLOSCAN_DLPACK_NCCL_INCLUDE nccl.h HINTS ${_hdl_nccl_hints} PATH_SUFFIXES include)
find_library(HOLOSCAN_DLPACK_NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR HINTS ${_hdl_nccl_hints}
  PATH_SUFFIXES lib lib64)
if(NOT HOLOSCAN_DLPACK_NCCL_INCLUDE OR NOT HOLOSCAN_DLPACK_NCCL_LIBRARY)
  message(STATUS "holoscan-dlpack: NCCL not found, the two-GPU NCCL floor is not built")
  return()
endif()
add_library(holoscan_dlpack_nccl UNKNOWN IMPORTED)
set_target_properties(holoscan_dlpack_nccl PROPERTIES
  IMPORTED_LOCATION "${HOLOSCAN_DLPACK_NCCL_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${HOLOSCAN_DLPACK_NCCL_INCLUDE}")
get_filename_component(_hdl_nccl_libdir "${HOLOSCAN_DLPACK_NCCL_LIBRARY}" DIRECTORY)
set_property(TARGET holoscan_dlpack_nccl PROPERTY INTERFACE_LINK_OPTIONS
  "LINKER:-rpath,${_hdl_nccl_libdir}")
message(STATUS "holoscan-dlpack: NCCL from ${HOLOSCAN_DLPACK_NCCL_LIBRARY}: two-GPU floor built")
