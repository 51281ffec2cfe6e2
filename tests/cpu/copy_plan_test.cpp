// Covers how a strided view is cut into the rectangles of a copy, at the edges of its arithmetic.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
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

}  // namespace
}  // namespace holoscan::detail
