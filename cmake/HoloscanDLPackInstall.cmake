# Installs the library, its headers and a version-checked package config (holoscan_dlpack).
include(CMakePackageConfigHelpers)

install(TARGETS holoscan_dlpack EXPORT holoscan_dlpack_targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/holoscan DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

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
