// Validation of a TensorDescriptor's fields. The descriptor crossed a process boundary, so every
// field is checked, and all arithmetic on them is overflow-checked.
#include <cstdint>
#include <string>

#include "dlpack/dlpack_validate.hpp"
#include "holoscan/ipc/descriptor.hpp"
#include "ipc/ipc_error.hpp"
#include "ipc/wire/ipc_wire.hpp"

namespace holoscan::ipc {
namespace {

// Flag bits are part of the wire format, so they are DLPack 1.3's whatever header this build
// compiles against (and so are the type codes: see check_layout's last_code).
constexpr std::uint64_t kKnownFlags = 0x7;  // READ_ONLY, IS_COPIED, IS_SUBBYTE_TYPE_PADDED

constexpr const char* kWho = "ipc descriptor";

Error invalid(const std::string& what) { return detail::invalid_argument(kWho, what); }

// The shape, dtype and strides follow the layout rules of every tensor (dlpack_validate.hpp);
// what they address must lie in the allocation: an importer maps [offset, offset + span) of a
// foreign allocation and must never be talked into more.
expected<void, Error> check_layout(const TensorDescriptor& d) {
  const std::size_t ndim = d.shape.size();
  if (ndim > kMaxDescriptorDims) {
    return make_unexpected(invalid("ndim " + std::to_string(ndim) + " is outside [0, " +
                                   std::to_string(kMaxDescriptorDims) + "]"));
  }
  if (d.strides.size() != ndim) {
    return make_unexpected(invalid("strides has " + std::to_string(d.strides.size()) +
                                   " entries, shape has " + std::to_string(ndim)));
  }
  const auto rank = static_cast<std::int32_t>(ndim);
  holoscan::detail::LayoutFacts facts;
  if (holoscan::detail::check_layout(rank, d.shape.data(), d.strides.data(), d.dtype,
                                     d.dlpack_flags, holoscan::detail::kDLPack13LastDtypeCode,
                                     facts) != holoscan::detail::LayoutFault::kNone) {
    return make_unexpected(holoscan::detail::layout_error(facts, rank, d.shape.data(),
                                                          d.strides.data(), d.dtype, kWho));
  }
  if (facts.size == 0 && d.offset > d.allocation_bytes) {
    // No element is addressed, so strides are free; the offset still lies in the allocation.
    return make_unexpected(invalid("offset " + std::to_string(d.offset) +
                                   " is past allocation_bytes " +
                                   std::to_string(d.allocation_bytes)));
  }
  // The span's sides are <= INT64_MAX, and so is an offset within allocation_bytes: no overflow.
  const auto low = static_cast<std::uint64_t>(facts.span_low);
  const auto high = static_cast<std::uint64_t>(facts.span_high);
  if (facts.size > 0 &&
      (d.offset > d.allocation_bytes || d.offset < low || d.offset + high > d.allocation_bytes)) {
    return make_unexpected(invalid("offset " + std::to_string(d.offset) + " with shape and " +
                                   "strides addresses bytes outside the allocation's [0, " +
                                   std::to_string(d.allocation_bytes) + ")"));
  }
  return {};
}

}  // namespace

expected<void, Error> validate(const TensorDescriptor& d) {
  const auto kind = static_cast<std::uint32_t>(d.handle_kind);
  if (kind < static_cast<std::uint32_t>(MemoryHandleKind::kPosixFd) ||
      kind > static_cast<std::uint32_t>(MemoryHandleKind::kFake)) {
    return make_unexpected(invalid("handle_kind " + std::to_string(kind) +
                                   " is not kPosixFd (1), kCudaIpc (2) or kFake (3)"));
  }
  if (d.allocation_bytes == 0 || d.allocation_bytes > static_cast<std::uint64_t>(INT64_MAX)) {
    return make_unexpected(invalid("allocation_bytes " + std::to_string(d.allocation_bytes) +
                                   " is outside [1, INT64_MAX]"));
  }
  if (const auto fault =
          holoscan::detail::check_dtype(d.dtype, holoscan::detail::kDLPack13LastDtypeCode);
      fault != holoscan::detail::LayoutFault::kNone) {
    return make_unexpected(holoscan::detail::dtype_error(fault, d.dtype, kWho));
  }
  if ((d.dlpack_flags & ~kKnownFlags) != 0) {
    return make_unexpected(invalid("dlpack_flags " + detail::hex(d.dlpack_flags) +
                                   " has bits DLPack 1.3 does not define"));
  }
  if (auto layout = check_layout(d); !layout) {
    return layout;
  }
  if (!d.has_readiness_event && !detail::all_zero(d.readiness_event)) {
    return make_unexpected(
        invalid("readiness_event is not all zero while has_readiness_event is false"));
  }
  if (d.exporter_pid == 0 || d.exporter_pid > static_cast<std::uint32_t>(INT32_MAX)) {
    return make_unexpected(
        invalid("exporter_pid " + std::to_string(d.exporter_pid) + " is not a process id"));
  }
  return {};
}

}  // namespace holoscan::ipc
