# Warning and sanitizer flags for the project's own targets (never forced on consumers).
function(holoscan_dlpack_project_flags target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${HOLOSCAN_DLPACK_WERROR}>>:-Werror>)
  if(HOLOSCAN_DLPACK_SANITIZE STREQUAL "address")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all>)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  elseif(HOLOSCAN_DLPACK_SANITIZE STREQUAL "thread")
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=thread -fno-omit-frame-pointer>)
    target_link_options(${target} PRIVATE -fsanitize=thread)
  elseif(NOT HOLOSCAN_DLPACK_SANITIZE STREQUAL "")
    message(FATAL_ERROR "HOLOSCAN_DLPACK_SANITIZE must be address, thread or empty")
  endif()
endfunction()
