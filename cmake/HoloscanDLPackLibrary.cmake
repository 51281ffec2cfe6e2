# The properties every library of the package shares: its exported name (holoscan::<name>), the
# version, position-independent code, and hidden symbols but for the public API
# (HOLOSCAN_DLPACK_API, <holoscan/export.hpp>). A shared build refuses undefined symbols, so that a
# library that uses another's hidden internals fails to link here rather than at a user's load.
function(holoscan_dlpack_library target export_name)
  set_target_properties(${target} PROPERTIES
    EXPORT_NAME ${export_name}
    POSITION_INDEPENDENT_CODE ON
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR})
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "SHARED_LIBRARY" AND NOT HOLOSCAN_DLPACK_SANITIZE)
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
  holoscan_dlpack_project_flags(${target})
endfunction()
