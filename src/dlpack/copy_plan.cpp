#include "dlpack/copy_plan.hpp"

#include <string>

#include "dlpack/dlpack_validate.hpp"
#include "holoscan/dlpack_utils.hpp"

namespace holoscan::detail {
namespace {

// Whether `view`'s elements are compact and row-major (size-1 dimensions may have any stride).
bool compact(const DLTensor& view) noexcept {
  if (view.strides == nullptr) {
    return true;
  }
  std::int64_t expected_stride = 1;
  for (std::int32_t i = view.ndim; i-- > 0;) {
    if (view.shape[i] != 1 && view.strides[i] != expected_stride) {
      return false;
    }
    expected_stride *= view.shape[i];
  }
  return true;
}

}  // namespace

expected<CopyPlan, Error> CopyPlan::of(const DLTensor& view, std::uint64_t flags, const char* who) {
  CopyPlan plan;
  const std::int64_t size = element_count(view.ndim, view.shape);
  plan.bytes_ = payload_bytes(size, view.dtype, flags);
  if (size == 0) {
    return plan;
  }
  if (is_packed_sub_byte(view.dtype, flags)) {
    if (!compact(view)) {
      return make_unexpected(ErrorCode::kNotSupported,
                             std::string(who) +
                                 ": a non-contiguous tensor of packed sub-byte elements cannot be "
                                 "copied (its elements do not start on bytes)");
    }
    plan.first_ = CopyPiece{0, 0, static_cast<std::size_t>(plan.bytes_), 1, 0, 0};
    plan.first_.source_pitch = plan.first_.destination_pitch = plan.first_.width;
    return plan;
  }
  const auto item = static_cast<std::int64_t>(dlpack_dtype_item_size_bytes(view.dtype));
  std::vector<std::int64_t> strides(static_cast<std::size_t>(view.ndim));
  calc_strides(view, strides, /*to_num_elements=*/true);
  // Dimensions of more than one element, innermost last, with the compact destination's strides.
  std::vector<Dim> dims;
  std::int64_t destination_stride = item;
  for (std::int32_t i = view.ndim; i-- > 0;) {
    if (view.shape[i] != 1) {
      dims.insert(dims.begin(), Dim{view.shape[i], strides[i] * item, destination_stride});
      destination_stride *= view.shape[i];
    }
  }
  // The row: inner dimensions whose elements follow each other in the source.
  std::int64_t width = item;
  while (!dims.empty() && dims.back().source_stride == width) {
    width *= dims.back().extent;
    dims.pop_back();
  }
  // The rows: the next dimensions whose rows neither overlap nor go backwards.
  std::int64_t height = 1;
  std::int64_t pitch = width;
  if (!dims.empty() && dims.back().source_stride >= width) {
    pitch = dims.back().source_stride;
    height = dims.back().extent;
    dims.pop_back();
    // The next dimension continues the rows when its stride is where the row after the last
    // would start; that offset may pass 2^63 (rows far apart), and then nothing continues them.
    std::int64_t next_row = 0;
    while (!dims.empty() && !__builtin_mul_overflow(height, pitch, &next_row) &&
           dims.back().source_stride == next_row) {
      height *= dims.back().extent;
      dims.pop_back();
    }
  }
  plan.outer_ = std::move(dims);
  plan.first_ = CopyPiece{0,
                          0,
                          static_cast<std::size_t>(width),
                          static_cast<std::size_t>(height),
                          static_cast<std::size_t>(pitch),
                          static_cast<std::size_t>(width)};
  return plan;
}

bool CopyPlan::advance(std::vector<std::int64_t>& index, CopyPiece& piece) const noexcept {
  for (std::size_t d = outer_.size(); d-- > 0;) {
    const Dim& dim = outer_[d];
    if (++index[d] < dim.extent) {
      piece.source_offset += dim.source_stride;
      piece.destination_offset += dim.destination_stride;
      return true;
    }
    // Back to the start of this dimension; the next outer one moves on.
    piece.source_offset -= dim.source_stride * (dim.extent - 1);
    piece.destination_offset -= dim.destination_stride * (dim.extent - 1);
    index[d] = 0;
  }
  return false;
}

}  // namespace holoscan::detail
