// Covers the holds a pool block's memory reference lives by: an export keeps its block named (never
// handed out again) and its memory alive, even past its Tensors and its pool, with one hold; no
// unpaired release takes that hold; and the block comes back once the last hold is given back,
// however many times it is lent.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "holoscan/dlpack.hpp"
#include "holoscan/tensor_pool.hpp"

namespace holoscan {
namespace {

constexpr DLDataType kInt32{kDLInt, 32, 1};

std::shared_ptr<TensorPool> host_pool(std::size_t blocks) {
  TensorPoolConfig config;
  config.memory = PoolMemory::kHost;
  config.block_bytes = 256;
  config.block_count = blocks;
  auto pool = TensorPool::create(config);
  EXPECT_TRUE(pool.has_value()) << pool.error().message;
  return *pool;
}

// A 4 x 8 int32 block holding `first`, `first` + 1, ...
Tensor filled(TensorPool& pool, std::int32_t first) {
  auto tensor = pool.allocate({4, 8}, kInt32);
  EXPECT_TRUE(tensor.has_value()) << tensor.error().message;
  auto* values = static_cast<std::int32_t*>(tensor->mutable_data().value());
  for (std::int32_t i = 0; i < 32; ++i) {
    values[i] = first + i;
  }
  return std::move(*tensor);
}

// Whether the exported elements still read `first`, `first` + 1, ... (ASan checks the reads).
bool reads_back(const DLManagedTensorVersioned& exported, std::int32_t first) {
  const auto* values = static_cast<const std::int32_t*>(exported.dl_tensor.data);
  for (std::int32_t i = 0; i < 32; ++i) {
    if (values[i] != first + i) {
      return false;
    }
  }
  return true;
}

const StreamTrackedReference& block_reference(const Tensor& tensor) {
  return dynamic_cast<const StreamTrackedReference&>(*tensor.dl_ctx()->memory_reference);
}

// Published read-only, as a producer hands a written tensor to readers: its exports take no
// mutable export lease, which would keep the context (and so its shared_ptr) alive.
void publish_read_only(Tensor& tensor) {
  tensor.dl_ctx()->tensor.flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
}

TEST(PoolExportHolds, AnExportKeepsItsBlockFromTheNextAllocation) {
  auto pool = host_pool(1);
  Tensor tensor = filled(*pool, 100);
  publish_read_only(tensor);
  const StreamTrackedReference& reference = block_reference(tensor);
  expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  EXPECT_EQ(reference.handle_claims(), 2);  // the Tensor's and the export's
  std::weak_ptr<TensorMemoryReference> watched = tensor.dl_ctx()->memory_reference;
  tensor = Tensor();
  EXPECT_EQ(reference.handle_claims(), 1);
  EXPECT_TRUE(watched.expired());  // the export holds the block by its hold, not a shared_ptr
  EXPECT_EQ(pool->available_blocks(), 0u);
  auto refused = pool->allocate({4, 8}, kInt32);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
  EXPECT_TRUE(reads_back(**exported, 100));
  (*exported)->deleter(*exported);
  EXPECT_EQ(reference.handle_claims(), 0);
  EXPECT_EQ(pool->available_blocks(), 1u);
  Tensor next = filled(*pool, 7);
  EXPECT_EQ(pool->reuse_count(), 1u);
}

TEST(PoolExportHolds, SurplusReleasesNeverFreeABlockAnExportReads) {
  auto pool = host_pool(1);
  Tensor tensor = filled(*pool, 5);
  expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  const StreamTrackedReference& reference = block_reference(tensor);
  tensor.release_handle();  // the Tensor's own claim, given back early
  tensor.release_handle();  // a caller's bug: counted, takes nothing
  tensor.release_handle();
  EXPECT_EQ(reference.unpaired_releases(), 2u);
  EXPECT_EQ(reference.handle_claims(), 1);  // the export's
  tensor = Tensor();
  EXPECT_EQ(pool->available_blocks(), 0u);
  EXPECT_TRUE(reads_back(**exported, 5));
  (*exported)->deleter(*exported);
  EXPECT_EQ(reference.handle_claims(), 0);
  EXPECT_EQ(pool->available_blocks(), 1u);
}

// The pool's memory stays until the export that outlives the pool lets go (ASan reads it).
TEST(PoolExportHolds, AnExportOutlivesItsPool) {
  auto pool = host_pool(2);
  Tensor tensor = filled(*pool, 40);
  expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  tensor = Tensor();
  pool.reset();
  EXPECT_TRUE(reads_back(**exported, 40));
  (*exported)->deleter(*exported);
}

// Each life of a block ends one of two ways: its shared_ptr last (the hold left in place) or an
// export last (the hold taken off). Alternated, neither leaves the block claimed or unusable.
TEST(PoolExportHolds, ABlockLentAgainAndAgainComesBackEveryTime) {
  auto pool = host_pool(1);
  for (std::int32_t round = 0; round < 1000; ++round) {
    Tensor tensor = filled(*pool, round);
    const StreamTrackedReference& reference = block_reference(tensor);
    EXPECT_EQ(reference.handle_claims(), 1);
    if (round % 3 == 0) {
      tensor = Tensor();  // no export: the shared_ptr's drop is the last
    } else {
      expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
      ASSERT_TRUE(exported.has_value()) << exported.error().message;
      if (round % 3 == 1) {
        tensor = Tensor();  // the export goes last
        EXPECT_EQ(pool->available_blocks(), 0u);
        EXPECT_TRUE(reads_back(**exported, round));
        (*exported)->deleter(*exported);
      } else {
        (*exported)->deleter(*exported);  // the Tensor goes last
        tensor = Tensor();
      }
    }
    ASSERT_EQ(reference.handle_claims(), 0) << "round " << round;
    ASSERT_EQ(pool->available_blocks(), 1u) << "round " << round;
  }
  EXPECT_EQ(pool->reuse_count(), 999u);
}

// Exports taken and given back on 8 threads while the Tensor goes midway: the block is handed out
// again only after every thread is done, and what each export read was the block's. Even rounds
// publish the tensor read-only (every export granted); odd rounds keep it writable, so that one
// export at a time is granted and the others are refused by its lease (kPermissionDenied).
TEST(PoolExportHolds, ExportsOnManyThreadsKeepTheBlockUntilTheLast) {
  auto pool = host_pool(1);
  constexpr int kThreads = 8;
  for (int round = 0; round < 50; ++round) {
    auto tensor = std::make_unique<Tensor>(filled(*pool, round));
    const bool writable = round % 2 == 1;
    if (!writable) {
      publish_read_only(*tensor);
    }
    std::atomic<int> wrong{0};
    std::atomic<int> started{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, copy = *tensor] {
        started.fetch_add(1);
        for (int i = 0; i < 50; ++i) {
          auto exported = copy.to_dlpack_versioned();
          if (!exported.has_value()) {
            const bool leased = writable && exported.error().code == ErrorCode::kPermissionDenied;
            wrong.fetch_add(leased ? 0 : 1);
            continue;
          }
          if (!reads_back(**exported, round)) {
            wrong.fetch_add(1);
          }
          (*exported)->deleter(*exported);
        }
      });
    }
    while (started.load() < kThreads) {
      std::this_thread::yield();
    }
    tensor.reset();
    for (std::thread& thread : threads) {
      thread.join();
    }
    ASSERT_EQ(wrong.load(), 0);
    ASSERT_EQ(pool->available_blocks(), 1u);
  }
}

}  // namespace
}  // namespace holoscan
