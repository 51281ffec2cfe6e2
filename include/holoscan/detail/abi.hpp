#pragma once
/**
 * @file
 * @brief HOLOSCAN_DLPACK_ABI: the ABI tag that gives every symbol of this library a mangled name
 *        of its own, while the source keeps Holoscan's names (holoscan::Tensor and the rest).
 *
 * Holoscan SDK's libholoscan_core.so.5 defines holoscan::Tensor, make_tensor_from_dlpack,
 * error_code_name and more under the same names. Without the tag, a process that loads both
 * would bind some calls to the wrong library without a word (an ODR violation). The tag goes on
 * every class (its members, vtable and type_info follow) and on every function whose signature
 * names no tagged type; a function returning one is tagged by the compiler. It must be on the
 * first declaration: declare Holoscan-style forward declarations (`namespace holoscan { class
 * Tensor; }`) only after including this library's headers. See docs/holoscan-5.0.md.
 */
#if defined(__GNUC__) || defined(__clang__)
#define HOLOSCAN_DLPACK_ABI [[gnu::abi_tag("holoscan_dlpack")]]
#else
#define HOLOSCAN_DLPACK_ABI
#endif
