# Installs the libraries, their headers and a version-checked package config (holoscan_dlpack):
# the core (holoscan::dlpack), the cross-process library (holoscan::dlpack_ipc, component "ipc")
# and the UCX library (holoscan::dlpack_ucx, component "ucx") when it was built.
include(CMakePackageConfigHelpers)

set(_hdl_installed holoscan_dlpack holoscan_dlpack_ipc)
set(_hdl_header_filter)
if(HOLOSCAN_DLPACK_HAVE_UCX)
  list(APPEND _hdl_installed holoscan_dlpack_ucx)
else()
  set(_hdl_header_filter PATTERN ucx EXCLUDE PATTERN ucx.hpp EXCLUDE)
endif()
install(TARGETS ${_hdl_installed} EXPORT holoscan_dlpack_targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/holoscan DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} ${_hdl_header_filter})
install(FILES ${PROJECT_BINARY_DIR}/include/holoscan/version.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/holoscan)

set(HOLOSCAN_DLPACK_CONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/holoscan_dlpack)
install(EXPORT holoscan_dlpack_targets NAMESPACE holoscan:: FILE holoscan_dlpack-targets.cmake
  DESTINATION ${HOLOSCAN_DLPACK_CONFIG_DIR})
export(EXPORT holoscan_dlpack_targets NAMESPACE holoscan::
  FILE ${CMAKE_CURRENT_BINARY_DIR}/holoscan_dlpack-targets.cmake)

configure_package_config_file(cmake/holoscan_dlpack-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/holoscan_dlpack-config.cmake
  INSTALL_DESTINATION ${HOLOSCAN_DLPACK_CONFIG_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/holoscan_dlpack-config-version.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/holoscan_dlpack-config.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/holoscan_dlpack-config-version.cmake
  DESTINATION ${HOLOSCAN_DLPACK_CONFIG_DIR})
