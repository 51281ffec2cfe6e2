# Finds the library's dependencies as installed packages; nothing is downloaded or vendored.
include(GNUInstallDirs)

find_package(Threads REQUIRED)
find_package(tl-expected CONFIG REQUIRED)
find_package(CUDAToolkit REQUIRED)

# Debian's dlpackConfigVersion.cmake reports 0.6 even in the 1.x packages, so the version is read
# from the header itself.
find_package(dlpack CONFIG REQUIRED)
get_target_property(_hdl_dlpack_dirs dlpack::dlpack INTERFACE_INCLUDE_DIRECTORIES)
find_file(HOLOSCAN_DLPACK_HEADER dlpack/dlpack.h PATHS ${_hdl_dlpack_dirs} NO_DEFAULT_PATH)
if(NOT HOLOSCAN_DLPACK_HEADER)
  message(FATAL_ERROR "dlpack/dlpack.h not found in ${_hdl_dlpack_dirs}")
endif()
file(STRINGS "${HOLOSCAN_DLPACK_HEADER}" _hdl_major REGEX "^#define DLPACK_MAJOR_VERSION ")
file(STRINGS "${HOLOSCAN_DLPACK_HEADER}" _hdl_minor REGEX "^#define DLPACK_MINOR_VERSION ")
string(REGEX REPLACE ".* ([0-9]+).*" "\\1" HOLOSCAN_DLPACK_DLPACK_MAJOR "${_hdl_major}")
string(REGEX REPLACE ".* ([0-9]+).*" "\\1" HOLOSCAN_DLPACK_DLPACK_MINOR "${_hdl_minor}")
if(NOT HOLOSCAN_DLPACK_DLPACK_MAJOR OR HOLOSCAN_DLPACK_DLPACK_MAJOR LESS 1)
  message(FATAL_ERROR
    "holoscan-dlpack needs DLPack >= 1.0, but ${HOLOSCAN_DLPACK_HEADER} is DLPack "
    "${HOLOSCAN_DLPACK_DLPACK_MAJOR}.${HOLOSCAN_DLPACK_DLPACK_MINOR}. Run scripts/install-deps.sh "
    "and put .deps/dlpack-1.3/usr (or dlpack-1.0) on CMAKE_PREFIX_PATH.")
endif()
message(STATUS "holoscan-dlpack: DLPack ${HOLOSCAN_DLPACK_DLPACK_MAJOR}.${HOLOSCAN_DLPACK_DLPACK_MINOR} from ${HOLOSCAN_DLPACK_HEADER}")

if(HOLOSCAN_DLPACK_STATIC_CUDART)
  set(HOLOSCAN_DLPACK_CUDART CUDA::cudart_static)
else()
  set(HOLOSCAN_DLPACK_CUDART CUDA::cudart)
endif()
