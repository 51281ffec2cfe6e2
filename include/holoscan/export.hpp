#pragma once
/**
 * @file
 * @brief HOLOSCAN_DLPACK_API, on every public class and function: exported from a shared build
 *        (everything else is hidden) under a mangled name of this library's own (the ABI tag).
 *
 * The libraries build with hidden visibility, so that a shared build exports its public API and
 * nothing of its internals. The ABI tag gives every symbol a mangled name of its own while the
 * source keeps Holoscan's names (holoscan::Tensor and the rest): Holoscan SDK's
 * libholoscan_core.so.5 defines holoscan::Tensor, make_tensor_from_dlpack, error_code_name and
 * more under the same names, and without the tag a process that loads both would bind some calls
 * to the wrong library without a word (an ODR violation). The tag goes on every class (its
 * members, vtable and type_info follow) and every function; it must be on the first declaration:
 * declare Holoscan-style forward declarations (`namespace holoscan { class Tensor; }`) only after
 * including this library's headers. See docs/holoscan-5.0.md.
 */
#if defined(__GNUC__) || defined(__clang__)
/** @brief The ABI tag alone: internal classes and functions, which stay hidden. */
#define HOLOSCAN_DLPACK_ABI [[gnu::abi_tag("holoscan_dlpack")]]
/** @brief Exported, with the ABI tag: the public API. */
#define HOLOSCAN_DLPACK_API [[gnu::visibility("default"), gnu::abi_tag("holoscan_dlpack")]]
#else
#define HOLOSCAN_DLPACK_ABI
#define HOLOSCAN_DLPACK_API
#endif
