# Decides whether holoscan::dlpack_ucx is built. HOLOSCAN_DLPACK_WITH_UCX: AUTO builds it when UCX's
# CMake package is found (scripts/install-deps.sh unpacks the libucx-cu13 wheel into .deps/ucx,
# and the presets put .deps/ucx/libucx on CMAKE_PREFIX_PATH), ON requires it, OFF skips it.
# Sets HOLOSCAN_DLPACK_HAVE_UCX and, when built, HOLOSCAN_DLPACK_UCX_LIBDIR (where UCX's libraries
# are; its transport plugins are in ${HOLOSCAN_DLPACK_UCX_LIBDIR}/ucx).
# The Python package (SKBUILD) binds it as holoscan_dlpack.ucx when it is built.
set(HOLOSCAN_DLPACK_WITH_UCX AUTO CACHE STRING
  "Build holoscan::dlpack_ucx (tensors across hosts over UCX): AUTO, ON or OFF")
set_property(CACHE HOLOSCAN_DLPACK_WITH_UCX PROPERTY STRINGS AUTO ON OFF)

set(HOLOSCAN_DLPACK_HAVE_UCX OFF)
if(HOLOSCAN_DLPACK_WITH_UCX STREQUAL "ON")
  find_package(ucx CONFIG REQUIRED)
  set(HOLOSCAN_DLPACK_HAVE_UCX ON)
elseif(HOLOSCAN_DLPACK_WITH_UCX STREQUAL "AUTO")
  find_package(ucx CONFIG QUIET)
  set(HOLOSCAN_DLPACK_HAVE_UCX ${ucx_FOUND})
elseif(NOT HOLOSCAN_DLPACK_WITH_UCX STREQUAL "OFF")
  message(FATAL_ERROR "HOLOSCAN_DLPACK_WITH_UCX must be AUTO, ON or OFF")
endif()

if(HOLOSCAN_DLPACK_HAVE_UCX)
  get_target_property(_hdl_ucp_library ucx::ucp IMPORTED_LOCATION)
  get_filename_component(HOLOSCAN_DLPACK_UCX_LIBDIR "${_hdl_ucp_library}" DIRECTORY)
  message(STATUS "holoscan-dlpack: UCX ${ucx_VERSION} from ${HOLOSCAN_DLPACK_UCX_LIBDIR}: "
                 "building holoscan::dlpack_ucx")
else()
  message(STATUS "holoscan-dlpack: holoscan::dlpack_ucx not built (HOLOSCAN_DLPACK_WITH_UCX="
                 "${HOLOSCAN_DLPACK_WITH_UCX}; UCX's CMake package not found)")
endif()
