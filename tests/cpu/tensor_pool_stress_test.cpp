// Many threads over one TensorPool: a block is never handed out while anything still names it, and
// whatever a holder did before letting go happens before the next owner's use (ThreadSanitizer
// checks the ordering, the per-owner patterns the data). Interleavings vary by repetition, never
// by sleeping.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "holoscan/tensor.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/fake_cuda_test.hpp"

namespace holoscan {
namespace {

constexpr DLDataType kUInt32{kDLUInt, 32, 1};

// A queue that hands values from one thread to another (and nothing back).
template <class T>
class Handoff {
 public:
  void push(T value) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      items_.push_back(std::move(value));
    }
    ready_.notify_one();
  }
  T pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return !items_.empty(); });
    T value = std::move(items_.front());
    items_.pop_front();
    return value;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<T> items_;
};

std::shared_ptr<TensorPool> make_pool(PoolMemory memory, std::size_t block_bytes,
                                      std::size_t blocks) {
  TensorPoolConfig config;
  config.memory = memory;
  config.block_bytes = block_bytes;
  config.block_count = blocks;
  auto pool = TensorPool::create(config);
  EXPECT_TRUE(pool.has_value()) << pool.error().message;
  return pool.has_value() ? *pool : nullptr;
}

class PoolStress : public test::FakeCudaTest {};

// A holder that names a block only through a copy of its context (documented to keep the block)
// reads it after its last Tensor is gone; the pool hands the block out again only after that
// copy is dropped, and everything the holder did before must happen before the next owner's use.
// Failed under ThreadSanitizer before the pool ordered itself after the drop of the last context
// copy: it saw use_count() == 1 (a relaxed load) and wrote the block's view while nothing ordered
// that after the holder's reads.
TEST_F(PoolStress, ABlockNamedByAContextCopyIsReusedOnlyAfterTheHoldersLastAccess) {
  constexpr int kRounds = 200;
  constexpr std::int64_t kElements = 16;
  auto pool = make_pool(PoolMemory::kHost, kElements * sizeof(std::uint32_t), 1);
  ASSERT_NE(pool, nullptr);
  Handoff<Tensor> handoff;
  std::atomic<int> corrupted{0};
  std::thread holder([&] {
    for (int round = 0; round < kRounds; ++round) {
      std::shared_ptr<DLManagedTensorContext> context;
      {
        Tensor tensor = handoff.pop();
        context = tensor.dl_ctx();
      }
      const auto* words = static_cast<const std::uint32_t*>(context->tensor.dl_tensor.data);
      for (std::int64_t i = 0; i < context->dl_shape[0]; ++i) {
        if (words[i] != static_cast<std::uint32_t>(round)) {
          corrupted.fetch_add(1);
        }
      }
    }
  });
  for (int round = 0; round < kRounds; ++round) {
    expected<Tensor> tensor = pool->allocate({kElements}, kUInt32);
    while (!tensor.has_value()) {
      ASSERT_EQ(tensor.error().code, ErrorCode::kResourceExhausted);
      std::this_thread::yield();
      tensor = pool->allocate({kElements}, kUInt32);
    }
    auto* words = static_cast<std::uint32_t*>(tensor->data());
    for (std::int64_t i = 0; i < kElements; ++i) {
      words[i] = static_cast<std::uint32_t>(round);
    }
    handoff.push(std::move(*tensor));
  }
  holder.join();
  EXPECT_EQ(corrupted.load(), 0);
  EXPECT_EQ(pool->available_blocks(), 1u);
}

}  // namespace
}  // namespace holoscan
