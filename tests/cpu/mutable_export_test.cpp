// Covers Holoscan 5.0's exclusive access claim of a DLPack export of a writable Tensor: while such
// an export is alive, another export of its context (versioned: kPermissionDenied, legacy:
// kNotSupported) and mutable_data() (kPermissionDenied) are refused with 5.0's sentences, for
// every Tensor over the context; the deleter ends it; read-only exports take none; a refusal
// keeps nothing; and under contention one export at a time holds it.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "holoscan/dlpack.hpp"
#include "holoscan/make_tensor.hpp"
#include "holoscan/tensor.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

constexpr DLDataType kFloat32{kDLFloat, 32, 1};

// A writable host tensor over memory of its own, whose release function counts its calls.
struct OwnedHostTensor {
  std::shared_ptr<std::atomic<int>> releases = std::make_shared<std::atomic<int>>(0);
  Tensor tensor;

  explicit OwnedHostTensor(std::int64_t count = 4) {
    auto* data = new float[static_cast<std::size_t>(count)]();
    auto made = make_tensor({count}, kFloat32, {}, MemoryStorageType::kSystem, data,
                            [releases = releases](void* memory) -> expected<void, Error> {
                              delete[] static_cast<float*>(memory);
                              releases->fetch_add(1);
                              return {};
                            });
    if (!made) {
      delete[] data;
      ADD_FAILURE() << made.error().message;
      return;
    }
    tensor = std::move(*made);
  }
};

// Whether `result` failed with `code` and a message that contains `text`.
template <class T>
testing::AssertionResult refused_with(const expected<T, Error>& result, ErrorCode code,
                                      const std::string& text) {
  if (result) {
    return testing::AssertionFailure() << "accepted";
  }
  if (result.error().code != code) {
    return testing::AssertionFailure()
           << error_code_name(result.error().code) << ": " << result.error().message;
  }
  if (result.error().message.find(text) == std::string::npos) {
    return testing::AssertionFailure() << "no \"" << text << "\" in " << result.error().message;
  }
  return testing::AssertionSuccess();
}

// Every refusal an alive mutable export causes, on `tensor` (any Tensor over its context).
void expect_claimed(Tensor& tensor) {
  EXPECT_TRUE(refused_with(tensor.to_dlpack_versioned(), ErrorCode::kPermissionDenied,
                           "Tensor::to_dlpack_versioned: Tensor has an active mutable DLPack "
                           "export"));
  EXPECT_TRUE(refused_with(tensor.to_dlpack(), ErrorCode::kNotSupported,
                           "Legacy DLPack cannot represent read-only Tensor authority or an active "
                           "read lease"));
  EXPECT_TRUE(refused_with(tensor.mutable_data(), ErrorCode::kPermissionDenied,
                           "Tensor data has an active access claim"));
}

// Nothing refuses: the claim is free (each export taken is let go of at once).
void expect_free(Tensor& tensor) {
  auto data = tensor.mutable_data();
  ASSERT_TRUE(data) << data.error().message;
  EXPECT_EQ(*data, tensor.data());
  auto versioned = tensor.to_dlpack_versioned();
  ASSERT_TRUE(versioned) << versioned.error().message;
  (*versioned)->deleter(*versioned);
  auto legacy = tensor.to_dlpack();
  ASSERT_TRUE(legacy) << legacy.error().message;
  legacy.value()->deleter(*legacy);
}

TEST(MutableExport, AVersionedExportOfAWritableTensorIsTheOnlyOneUntilItsDeleterRuns) {
  OwnedHostTensor owned;
  Tensor& tensor = owned.tensor;
  ASSERT_FALSE(tensor.is_read_only());
  auto first = tensor.to_dlpack_versioned();
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ((*first)->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0u);  // the writer's export
  expect_claimed(tensor);
  Tensor copy = tensor;  // Tensor copies share the context, and so the claim
  expect_claimed(copy);
  EXPECT_TRUE(tensor.data() != nullptr);  // reading is never refused
  (*first)->deleter(*first);
  expect_free(tensor);
  expect_free(copy);
  EXPECT_EQ(owned.releases->load(), 0);
}

TEST(MutableExport, ALegacyExportHoldsTheClaimToo) {
  OwnedHostTensor owned;
  auto first = owned.tensor.to_dlpack();
  ASSERT_TRUE(first) << first.error().message;
  expect_claimed(owned.tensor);
  first.value()->deleter(*first);
  expect_free(owned.tensor);
}

TEST(MutableExport, ARefusedExportKeepsNothing) {
  OwnedHostTensor owned;
  auto first = owned.tensor.to_dlpack_versioned();
  ASSERT_TRUE(first) << first.error().message;
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(owned.tensor.to_dlpack_versioned());
    EXPECT_FALSE(owned.tensor.to_dlpack());
  }
  (*first)->deleter(*first);
  EXPECT_EQ(owned.releases->load(), 0);
  owned.tensor = Tensor();
  // Released once, as the last Tensor went: no refused export held the memory (ASan: nor leaked).
  EXPECT_EQ(owned.releases->load(), 1);
}

TEST(MutableExport, AnExportThatOutlivesEveryTensorEndsItsClaimSafely) {
  OwnedHostTensor owned;
  auto exported = owned.tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported) << exported.error().message;
  owned.tensor = Tensor();  // the context lives on in the export
  EXPECT_EQ(owned.releases->load(), 0);
  static_cast<float*>((*exported)->dl_tensor.data)[0] = 1.0f;  // the consumer writes
  (*exported)->deleter(*exported);
  EXPECT_EQ(owned.releases->load(), 1);
}

TEST(MutableExport, ReadOnlyTensorsExportAnyNumberOfTimes) {
  OwnedHostTensor owned;
  auto wrapper = make_tensor_from_dlpack_versioned(*owned.tensor.to_dlpack_versioned());
  ASSERT_TRUE(wrapper) << wrapper.error().message;  // an import: read-only authority
  ASSERT_TRUE(wrapper->is_read_only());
  std::vector<DLManagedTensorVersioned*> exports;
  for (int i = 0; i < 4; ++i) {
    auto exported = wrapper->to_dlpack_versioned();
    ASSERT_TRUE(exported) << exported.error().message;
    EXPECT_NE((*exported)->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0u);
    exports.push_back(*exported);
  }
  for (auto* exported : exports) {
    exported->deleter(exported);
  }
  // The import holds the writable tensor's export, so that one is claimed until it goes.
  expect_claimed(owned.tensor);
  *wrapper = Tensor();
  expect_free(owned.tensor);
}

TEST(MutableExport, AViewFlaggedReadOnlyIsPublishedToAnyNumberOfReaders) {
  OwnedHostTensor owned;
  owned.tensor.dl_ctx()->tensor.flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
  auto a = owned.tensor.to_dlpack_versioned();
  auto b = owned.tensor.to_dlpack_versioned();
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(b) << b.error().message;
  (*a)->deleter(*a);
  (*b)->deleter(*b);
}

TEST(MutableExport, APoolBlockComesBackOnlyOnceItsExportIsGoneAndIsWritableAgain) {
  TensorPoolConfig config;
  config.memory = PoolMemory::kHost;
  config.block_bytes = 256;
  config.block_count = 1;
  auto pool = TensorPool::create(config);
  ASSERT_TRUE(pool) << pool.error().message;
  auto tensor = (*pool)->allocate({8}, kFloat32);
  ASSERT_TRUE(tensor) << tensor.error().message;
  auto exported = tensor->to_dlpack_versioned();
  ASSERT_TRUE(exported) << exported.error().message;
  expect_claimed(*tensor);
  *tensor = Tensor();
  EXPECT_EQ((*pool)->available_blocks(), 0u);  // the export still names the block
  (*exported)->deleter(*exported);
  EXPECT_EQ((*pool)->available_blocks(), 1u);
  auto again = (*pool)->allocate({8}, kFloat32);  // the same block, its context lent anew
  ASSERT_TRUE(again) << again.error().message;
  expect_free(*again);
}

// Threads race to export one writable Tensor, in both forms: every export granted is alone while
// it lives, and every refusal is the claim's.
TEST(MutableExport, UnderContentionOneExportAtATimeHoldsTheClaim) {
  OwnedHostTensor owned;
  const Tensor shared = owned.tensor;
  std::atomic<int> alive{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> granted{0};
  std::atomic<int> other_failures{0};
  // Holds a granted export for a moment, then lets go of it; counts a refusal that is not `code`.
  auto hold_or_count = [&](auto exported, ErrorCode code) {
    if (!exported) {
      other_failures += exported.error().code != code ? 1 : 0;
      return;
    }
    overlaps += alive.fetch_add(1) != 0 ? 1 : 0;
    granted.fetch_add(1);
    std::this_thread::yield();
    alive.fetch_sub(1);
    exported.value()->deleter(*exported);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const Tensor mine = shared;
      for (int i = 0; i < 2000; ++i) {
        if ((i + t) % 2 == 0) {
          hold_or_count(mine.to_dlpack_versioned(), ErrorCode::kPermissionDenied);
        } else {
          hold_or_count(mine.to_dlpack(), ErrorCode::kNotSupported);
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(other_failures.load(), 0);
  EXPECT_GT(granted.load(), 0);
  expect_free(owned.tensor);
}

}  // namespace
}  // namespace holoscan
