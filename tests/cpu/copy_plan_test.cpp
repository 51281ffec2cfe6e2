// Covers how a strided view is cut into the rectangles of a copy, at the edges of its arithmetic.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "dlpack/copy_plan.hpp"

namespace holoscan::detail {
namespace {

// A host view of `shape` and element `strides` (the arrays outlive the view).
template <std::size_t N>
DLTensor host_view(std::int64_t (&shape)[N], std::int64_t (&strides)[N], DLDataType dtype) {
  DLTensor view{};
  view.data = reinterpret_cast<void*>(std::uintptr_t{0x1000});
  view.device = DLDevice{kDLCPU, 0};
  view.ndim = static_cast<std::int32_t>(N);
  view.dtype = dtype;
  view.shape = shape;
  view.strides = strides;
  return view;
}

std::vector<CopyPiece> pieces_of(const CopyPlan& plan) {
  std::vector<CopyPiece> pieces;
  auto walked = plan.for_each_piece([&](const CopyPiece& piece) -> expected<void, Error> {
    pieces.push_back(piece);
    return {};
  });
  EXPECT_TRUE(walked.has_value());
  return pieces;
}

// Two rows 2^62 bytes apart: asking whether the next dimension continues them multiplied the row
// count by the pitch in signed 64 bits (2 * 2^62), which overflowed (undefined behaviour, which
// the sanitizer build stops at). The outer dimension is walked, one piece per index.
TEST(CopyPlan, RowsFarApartNeverOverflowTheMergeTest) {
  std::int64_t shape[] = {2, 2};
  std::int64_t strides[] = {1, std::int64_t{1} << 62};
  const DLTensor view = host_view(shape, strides, DLDataType{kDLUInt, 8, 1});
  auto plan = CopyPlan::of(view, 0, "test");
  ASSERT_TRUE(plan.has_value()) << plan.error().message;
  EXPECT_EQ(plan->bytes(), 4);
  const std::vector<CopyPiece> pieces = pieces_of(*plan);
  ASSERT_EQ(pieces.size(), 2u);
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(pieces[i].source_offset, static_cast<std::int64_t>(i));
    EXPECT_EQ(pieces[i].destination_offset, static_cast<std::int64_t>(2 * i));
    EXPECT_EQ(pieces[i].width, 1u);
    EXPECT_EQ(pieces[i].height, 2u);
    EXPECT_EQ(pieces[i].source_pitch, std::size_t{1} << 62);
    EXPECT_EQ(pieces[i].destination_pitch, 1u);
  }
}

// The ordinary merge still happens: a 2-D slice of rows with padding is one rectangle.
TEST(CopyPlan, PaddedRowsAreOneRectangle) {
  std::int64_t shape[] = {3, 4, 5};
  std::int64_t strides[] = {4 * 8, 8, 1};  // rows of 5 elements padded to 8
  const DLTensor view = host_view(shape, strides, DLDataType{kDLFloat, 32, 1});
  auto plan = CopyPlan::of(view, 0, "test");
  ASSERT_TRUE(plan.has_value()) << plan.error().message;
  const std::vector<CopyPiece> pieces = pieces_of(*plan);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].width, 20u);
  EXPECT_EQ(pieces[0].height, 12u);
  EXPECT_EQ(pieces[0].source_pitch, 32u);
}

// The copy that following `plan`'s pieces makes of `source` (the view's first element at
// `origin` bytes into it), as the host copy does.
std::vector<std::uint8_t> gather_by_plan(const CopyPlan& plan,
                                         const std::vector<std::uint8_t>& source,
                                         std::int64_t origin) {
  std::vector<std::uint8_t> copy(static_cast<std::size_t>(plan.bytes()), 0xEE);
  for (const CopyPiece& piece : pieces_of(plan)) {
    for (std::size_t row = 0; row < piece.height; ++row) {
      const std::int64_t from =
          origin + piece.source_offset + static_cast<std::int64_t>(row * piece.source_pitch);
      std::memcpy(copy.data() + piece.destination_offset + row * piece.destination_pitch,
                  source.data() + from, piece.width);
    }
  }
  return copy;
}

// The same copy, element by element in row-major order.
template <std::size_t N>
std::vector<std::uint8_t> gather_by_index(const std::vector<std::uint8_t>& source,
                                          std::int64_t origin, const std::int64_t (&shape)[N],
                                          const std::int64_t (&strides)[N], std::size_t item) {
  std::vector<std::uint8_t> copy;
  std::int64_t index[N] = {};
  const std::int64_t count =
      std::accumulate(shape, shape + N, std::int64_t{1}, std::multiplies<std::int64_t>());
  for (std::int64_t n = 0; n < count; ++n) {
    std::int64_t offset = origin;
    for (std::size_t d = 0; d < N; ++d) {
      offset += index[d] * strides[d] * static_cast<std::int64_t>(item);
    }
    copy.insert(copy.end(), source.begin() + offset, source.begin() + offset + item);
    for (std::size_t d = N; d-- > 0;) {
      if (++index[d] < shape[d]) {
        break;
      }
      index[d] = 0;
    }
  }
  return copy;
}

// A reversed, broadcast or overlapping innermost dimension made every element a piece of its own
// (a flipped 1080p image, `img[:, ::-1]`, was two million cudaMemcpyAsync calls); the rows now
// come from an outer dimension, one piece per index of the inner one, and the copy is the same.
struct InnerStrideCase {
  const char* name;
  std::int64_t shape[3];
  std::int64_t strides[3];  // elements
  std::size_t item;
  std::size_t most_pieces;
};

class CopyPlanInnerStride : public ::testing::TestWithParam<InnerStrideCase> {};

TEST_P(CopyPlanInnerStride, TakesRowsFromAnOuterDimensionAndCopiesTheSameBytes) {
  const InnerStrideCase& c = GetParam();
  std::int64_t shape[3] = {c.shape[0], c.shape[1], c.shape[2]};
  std::int64_t strides[3] = {c.strides[0], c.strides[1], c.strides[2]};
  const DLDataType dtype{kDLUInt, static_cast<std::uint8_t>(8 * c.item), 1};
  // The first element sits where every negative stride stays inside the buffer.
  std::int64_t low = 0;
  std::int64_t high = 0;
  for (std::size_t d = 0; d < 3; ++d) {
    const std::int64_t reach = (shape[d] - 1) * strides[d] * static_cast<std::int64_t>(c.item);
    (reach < 0 ? low : high) += reach;
  }
  const std::int64_t origin = -low;
  std::vector<std::uint8_t> source(static_cast<std::size_t>(origin + high) + c.item);
  std::iota(source.begin(), source.end(), std::uint8_t{1});
  auto plan = CopyPlan::of(host_view(shape, strides, dtype), 0, "test");
  ASSERT_TRUE(plan.has_value()) << plan.error().message;
  EXPECT_LE(pieces_of(*plan).size(), c.most_pieces);
  for (const CopyPiece& piece : pieces_of(*plan)) {
    EXPECT_GE(piece.source_pitch, piece.width);
    EXPECT_GE(piece.destination_pitch, piece.width);
  }
  EXPECT_EQ(gather_by_plan(*plan, source, origin),
            gather_by_index(source, origin, shape, strides, c.item));
}

INSTANTIATE_TEST_SUITE_P(
    Views, CopyPlanInnerStride,
    ::testing::Values(
        // img[:, ::-1] of an interleaved RGB image: rows from the image's rows.
        InnerStrideCase{"FlippedColumns", {64, 256, 3}, {768, -3, 1}, 1, 256},
        // A broadcast column (stride 0) of float: rows from the outer dimension.
        InnerStrideCase{"BroadcastInner", {1, 64, 256}, {0, 1, 0}, 4, 256},
        // Reversed innermost, forward outer dimensions: the longest outer one gives the rows.
        InnerStrideCase{"ReversedInner", {8, 128, 16}, {2048, 16, -1}, 2, 8 * 16},
        // Overlapping windows (a stride smaller than the row): the forward outer one gives rows.
        InnerStrideCase{"OverlappingInner", {32, 40, 4}, {64, 1, 1}, 4, 40 * 4},
        // Every dimension reversed: nothing qualifies, every element is walked, still right.
        InnerStrideCase{"AllReversed", {4, 5, 6}, {-30, -6, -1}, 1, 4 * 5 * 6}),
    [](const ::testing::TestParamInfo<InnerStrideCase>& view) { return view.param.name; });

}  // namespace
}  // namespace holoscan::detail
