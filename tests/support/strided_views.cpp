#include "support/strided_views.hpp"

#include <gtest/gtest.h>

#include <utility>

namespace holoscan::test {
namespace {

// A heap-owned DLPack tensor over a caller's buffer; its deleter counts and frees the record.
struct ViewRecord {
  DLManagedTensorVersioned managed{};
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  std::shared_ptr<int> deleted;
};

}  // namespace

const std::vector<StridedCase>& strided_cases() {
  static const std::vector<StridedCase> cases = {
      {"Contiguous", {2, 3, 4}, {12, 4, 1}, 0},
      {"Transposed", {4, 3}, {1, 4}, 0},
      {"ReversedRows", {3, 4}, {-4, 1}, 8},
      {"ReversedColumns", {3, 4}, {4, -1}, 3},
      {"BroadcastRows", {3, 4}, {0, 1}, 0},
      {"BroadcastColumns", {3, 4}, {4, 0}, 0},
      {"PaddedRows", {3, 4}, {6, 1}, 1},
      {"PaddedRowsOfPlanes", {2, 3, 4}, {18, 6, 1}, 0},
      {"SlidingWindow", {3, 3}, {1, 1}, 0},
      {"EveryOtherElement", {3, 4}, {16, 2}, 1},
      {"SizeOneDimensionsWithOddStrides", {1, 4, 1}, {999, 1, -7}, 0},
      {"Empty", {0, 4}, {4, 1}, 0},
      {"Scalar", {}, {}, 5},
      {"FiveDimensionalPermutation", {2, 3, 2, 2, 3}, {3, 24, 1, 12, 6}, 0},
  };
  return cases;
}

std::vector<std::int32_t> numbered_buffer(std::size_t count) {
  std::vector<std::int32_t> buffer(count);
  for (std::size_t i = 0; i < count; ++i) {
    buffer[i] = static_cast<std::int32_t>(1000 + i);
  }
  return buffer;
}

std::vector<std::int32_t> gathered(const std::vector<std::int32_t>& buffer,
                                   const StridedCase& view) {
  std::int64_t count = 1;
  for (const std::int64_t extent : view.shape) {
    count *= extent;
  }
  std::vector<std::int32_t> values;
  std::vector<std::int64_t> index(view.shape.size(), 0);
  for (std::int64_t n = 0; n < count; ++n) {
    std::int64_t at = view.offset;
    for (std::size_t d = 0; d < index.size(); ++d) {
      at += index[d] * view.strides[d];
    }
    values.push_back(buffer.at(static_cast<std::size_t>(at)));
    for (std::size_t d = index.size(); d-- > 0;) {  // row-major odometer
      if (++index[d] < view.shape[d]) {
        break;
      }
      index[d] = 0;
    }
  }
  return values;
}

Tensor import_view(std::vector<std::int32_t>& buffer, const StridedCase& view,
                   std::shared_ptr<int> deleted) {
  auto* record = new ViewRecord();
  record->shape = view.shape;
  record->strides = view.strides;
  record->deleted = std::move(deleted);
  DLManagedTensorVersioned& managed = record->managed;
  managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  managed.manager_ctx = record;
  managed.deleter = [](DLManagedTensorVersioned* self) {
    auto* owner = static_cast<ViewRecord*>(self->manager_ctx);
    ++*owner->deleted;
    delete owner;
  };
  DLTensor& dl = managed.dl_tensor;
  dl.data = buffer.data();
  dl.device = {kDLCPU, 0};
  dl.ndim = static_cast<std::int32_t>(view.shape.size());
  dl.dtype = {kDLInt, 32, 1};
  dl.shape = record->shape.empty() ? nullptr : record->shape.data();
  dl.strides = record->strides.empty() ? nullptr : record->strides.data();
  dl.byte_offset = static_cast<std::uint64_t>(view.offset) * sizeof(std::int32_t);
  auto imported = make_tensor_from_dlpack_versioned(&managed);
  EXPECT_TRUE(imported.has_value()) << view.name << ": " << imported.error().message;
  if (!imported.has_value()) {
    managed.deleter(&managed);
    return Tensor();
  }
  return std::move(*imported);
}

}  // namespace holoscan::test
