#include "dlpack/copy_plan.hpp"

#include <cstddef>
#include <string>
#include <vector>

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

// The next dimension out when its rows neither overlap nor go backwards (the rows of a 2-D
// slice). Else the longest dimension that qualifies, wherever it is: a reversed, broadcast or
// overlapping inner dimension otherwise left every element a piece of its own (a copy of a
// flipped 1080p image was two million calls), where rows taken from an outer dimension make one
// piece per index of that inner dimension.
std::size_t CopyPlan::rows_dimension(const std::vector<Dim>& dims, std::int64_t width) noexcept {
  if (dims.empty()) {
    return kNoRows;
  }
  if (dims.back().source_stride >= width) {
    return dims.size() - 1;
  }
  std::size_t best = kNoRows;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].source_stride >= width && (best == kNoRows || dims[i].extent > dims[best].extent)) {
      best = i;
    }
  }
  return best;
}

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
  // The rows: a dimension whose rows neither overlap nor go backwards, and the dimensions out
  // from it that continue them.
  std::int64_t height = 1;
  std::int64_t pitch = width;
  std::int64_t destination_pitch = width;
  if (const std::size_t rows = rows_dimension(dims, width); rows != kNoRows) {
    height = dims[rows].extent;
    pitch = dims[rows].source_stride;
    destination_pitch = dims[rows].destination_stride;
    dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(rows));
    // The next dimension out continues the rows when its stride is where the row after the last
    // would start (in the compact copy it always is); that offset may pass 2^63 (rows far
    // apart), and then nothing continues them.
    std::int64_t next_row = 0;
    for (std::size_t outer = rows; outer > 0; --outer) {
      const Dim& next = dims[outer - 1];
      if (__builtin_mul_overflow(height, pitch, &next_row) || next.source_stride != next_row) {
        break;
      }
      height *= next.extent;
      dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(outer - 1));
    }
  }
  plan.outer_ = std::move(dims);
  plan.first_ = CopyPiece{0,
                          0,
                          static_cast<std::size_t>(width),
                          static_cast<std::size_t>(height),
                          static_cast<std::size_t>(pitch),
                          static_cast<std::size_t>(destination_pitch)};
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
