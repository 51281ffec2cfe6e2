// Covers read-only authority from a view's DLPACK_FLAG_BITMASK_READ_ONLY: a Tensor constructed
// over a flagged context locks it (as Holoscan 5.0's constructor does), a flag set later narrows
// it at the next check, and clearing the flag never widens it again, for every Tensor over the
// context and for its exports.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "holoscan/dlpack.hpp"
#include "holoscan/tensor.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

// A writable host context over `values` (no owner: the test keeps the memory), flagged `flags`.
std::shared_ptr<DLManagedTensorContext> host_context(std::vector<float>& values,
                                                     std::uint64_t flags) {
  auto context = std::make_shared<DLManagedTensorContext>();
  std::int64_t extent = static_cast<std::int64_t>(values.size());
  const DLTensor view{values.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &extent, nullptr, 0};
  copy_dl_tensor_with_owned_metadata(*context, view, {/*materialize_implicit_strides=*/true});
  context->tensor.flags = flags;
  return context;
}

// Every way a Tensor shows its authority agrees with `read_only`.
void expect_authority(Tensor& tensor, bool read_only) {
  EXPECT_EQ(tensor.is_read_only(), read_only);
  auto data = tensor.mutable_data();
  EXPECT_EQ(data.has_value(), !read_only);
  if (read_only) {
    ASSERT_FALSE(data.has_value());
    EXPECT_EQ(data.error().code, ErrorCode::kPermissionDenied);
  }
  auto legacy = tensor.to_dlpack();  // legacy DLPack cannot say read-only
  EXPECT_EQ(legacy.has_value(), !read_only);
  if (legacy.has_value()) {
    (*legacy)->deleter(*legacy);
  }
  auto versioned = tensor.to_dlpack_versioned();
  ASSERT_TRUE(versioned.has_value()) << versioned.error().message;
  EXPECT_EQ(((*versioned)->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0, read_only);
  (*versioned)->deleter(*versioned);
}

TEST(ReadOnlyAuthority, AFlaggedContextIsLockedAtConstruction) {
  std::vector<float> values(4);
  auto context = host_context(values, DLPACK_FLAG_BITMASK_READ_ONLY);
  Tensor tensor(context);
  context->tensor.flags = 0;  // cleared before anything else asked: the constructor saw it
  expect_authority(tensor, true);
  Tensor copy = tensor;
  expect_authority(copy, true);
  Tensor another(context);  // every Tensor over the context shares its authority
  expect_authority(another, true);
  EXPECT_EQ(tensor.flags(), 0u);  // the producer's bits are reported as they are now
}

// Holoscan 5.0 reads the flag only when a Tensor is constructed over the context; here a flag set
// later narrows the authority at the next check, for good.
TEST(ReadOnlyAuthority, AFlagSetLaterRevokesWriteAccessForGood) {
  std::vector<float> values(4);
  auto context = host_context(values, 0);
  Tensor tensor(context);
  const Tensor copy = tensor;
  expect_authority(tensor, false);
  context->tensor.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  EXPECT_TRUE(copy.is_read_only());
  context->tensor.flags = 0;
  expect_authority(tensor, true);
}

// An export that sees the flag first narrows the authority too.
TEST(ReadOnlyAuthority, AnExportThatSeesTheFlagNarrowsIt) {
  std::vector<float> values(4);
  auto context = host_context(values, 0);
  Tensor tensor(context);
  context->tensor.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  auto versioned = tensor.to_dlpack_versioned();
  ASSERT_TRUE(versioned.has_value()) << versioned.error().message;
  EXPECT_NE((*versioned)->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0u);
  (*versioned)->deleter(*versioned);
  context->tensor.flags = 0;
  expect_authority(tensor, true);
}

// A context put into a Tensor through dl_ctx() skips the constructor: its flag is still honoured.
TEST(ReadOnlyAuthority, AContextAssignedThroughDlCtxIsChecked) {
  std::vector<float> values(4);
  Tensor tensor;
  tensor.dl_ctx() = host_context(values, DLPACK_FLAG_BITMASK_READ_ONLY);
  expect_authority(tensor, true);
  tensor.dl_ctx()->tensor.flags = 0;
  expect_authority(tensor, true);
}

// A read-only context (an import's, locked for good) assigned a writable context by copy keeps
// its authority: the assignment copied it, so the import's memory became writable through every
// Tensor over it and went out in writable exports.
TEST(ReadOnlyAuthority, AssigningAWritableContextNeverWidensAReadOnlyOne) {
  std::vector<float> values(4);
  Tensor tensor(host_context(values, DLPACK_FLAG_BITMASK_READ_ONLY));
  Tensor other_over_it = tensor;
  const auto writable = host_context(values, 0);
  *tensor.dl_ctx() = *writable;
  expect_authority(tensor, true);
  expect_authority(other_over_it, true);
  // The other way, a writable context assigned a read-only one narrows as before.
  Tensor writer(host_context(values, 0));
  expect_authority(writer, false);
  *writer.dl_ctx() = *tensor.dl_ctx();
  expect_authority(writer, true);
}

}  // namespace
}  // namespace holoscan
