// Many threads over one TensorPool: a block is never handed out while anything still names it, and
// whatever a holder did before letting go happens before the next owner's use (ThreadSanitizer
// checks the ordering, the per-owner patterns the data). Interleavings vary by repetition, never
// by sleeping.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "holoscan/tensor.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/fake_cuda_test.hpp"
#include "support/fake_gpu_thread.hpp"

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
  // pop() if a value is there; false without waiting otherwise.
  bool try_pop(T& value) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (items_.empty()) {
      return false;
    }
    value = std::move(items_.front());
    items_.pop_front();
    return true;
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

using test::FakeCuda;

// A block's tensor on its way from the thread that filled it to the one that reads and drops it,
// with exports of it.
struct Lease {
  Tensor tensor;
  std::uint32_t pattern = 0;
  DLManagedTensorVersioned* exported = nullptr;
  DLManagedTensor* legacy = nullptr;
};

// Whether every element of `words` holds `pattern`.
bool holds(const void* words, std::int64_t count, std::uint32_t pattern) {
  for (std::int64_t i = 0; i < count; ++i) {
    if (static_cast<const std::uint32_t*>(words)[i] != pattern) {
      return false;
    }
  }
  return true;
}

class PoolStress : public test::FakeCudaTest {
 protected:
  static constexpr int kWorkers = 4;
  static constexpr std::size_t kBlocks = 3;
  static constexpr int kLeases = 300;
  static constexpr std::int64_t kElements = 16;

  void run_leases(PoolMemory memory);
  void fill_and_pass(int id, int lease);
  void read_and_drop(int id, Lease lease);
  Tensor allocate(int id);
  void check_previous_readers(const void* block);

  std::shared_ptr<TensorPool> pool_;
  std::vector<cudaStream_t> producers_;
  std::vector<cudaStream_t> readers_;
  std::deque<Handoff<Lease>> handoffs_;
  std::atomic<int> failures_{0};
  std::array<int, kWorkers> received_{};  // leases each worker read and dropped (its own)
  std::mutex mutex_;                      // guards what follows
  // Per block: an event recorded on each reader's stream just before its deallocation point,
  // which the block's next owner must find passed.
  std::map<const void*, std::vector<cudaEvent_t>> readers_of_;
  std::set<const void*> handed_out_;
  int allocations_ = 0;
};

// A block: stream-ordered on this worker's producer stream for device memory (waited for by the
// host before it writes), at once for host memory; retried while the pool is exhausted.
Tensor PoolStress::allocate(int id) {
  const bool device = pool_->device().device_type == kDLCUDA;
  while (true) {
    expected<Tensor> tensor = device ? pool_->allocate({kElements}, kUInt32, producers_[id])
                                     : pool_->allocate({kElements}, kUInt32);
    if (tensor.has_value()) {
      if (device) {
        failures_.fetch_add(
            FakeCuda::table().stream_synchronize(producers_[id]) == cudaSuccess ? 0 : 1);
      }
      return std::move(*tensor);
    }
    failures_.fetch_add(tensor.error().code == ErrorCode::kResourceExhausted ? 0 : 1);
    // The blocks may all be waiting for this thread (passed to it): read and drop one first.
    if (Lease waiting; handoffs_[id].try_pop(waiting)) {
      read_and_drop(id, std::move(waiting));
    }
    std::this_thread::yield();
  }
}

// The readers of the block's previous tensor must be done with it before its new owner writes.
void PoolStress::check_previous_readers(const void* block) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (cudaEvent_t marker : readers_of_[block]) {
    failures_.fetch_add(FakeCuda::table().event_query(marker) == cudaSuccess ? 0 : 1);
    (void)FakeCuda::table().event_destroy(marker);
  }
  readers_of_[block].clear();
  handed_out_.insert(block);
  ++allocations_;
}

void PoolStress::fill_and_pass(int id, int lease) {
  std::minstd_rand random(static_cast<std::uint32_t>(id * kLeases + lease + 1));
  Tensor tensor = allocate(id);
  check_previous_readers(tensor.data());
  const auto pattern = static_cast<std::uint32_t>(id) << 24 | static_cast<std::uint32_t>(lease);
  auto* words = static_cast<std::uint32_t*>(*tensor.mutable_data());
  for (std::int64_t i = 0; i < kElements; ++i) {
    words[i] = pattern;
  }
  fake().launch(producers_[id]);  // the "kernel" that wrote it
  failures_.fetch_add(tensor.set_readiness_stream(producers_[id]) ? 0 : 1);
  Lease out{std::move(tensor), pattern};
  // Pool tensors are writable: one mutable export at a time, of either form.
  switch (random() % 3) {
    case 0:
      out.exported = out.tensor.to_dlpack_versioned().value_or(nullptr);
      failures_.fetch_add(out.exported != nullptr ? 0 : 1);
      break;
    case 1:
      out.legacy = out.tensor.to_dlpack().value_or(nullptr);
      failures_.fetch_add(out.legacy != nullptr ? 0 : 1);
      break;
    default:
      break;
  }
  handoffs_[(id + 1) % kWorkers].push(std::move(out));
}

// Reads the block through every name it was passed with, records this reader's point, and lets
// go of the names one by one, the last a copy of the context read after the tensors are gone.
void PoolStress::read_and_drop(int id, Lease lease) {
  ++received_[id];
  Tensor& tensor = lease.tensor;
  failures_.fetch_add(tensor.synchronize_for_host().has_value() ? 0 : 1);
  Tensor copy = tensor;
  bool intact = holds(tensor.data(), kElements, lease.pattern) &&
                holds(copy.data(), kElements, lease.pattern);
  if (lease.exported != nullptr) {
    intact = intact && holds(lease.exported->dl_tensor.data, kElements, lease.pattern);
    lease.exported->deleter(lease.exported);
  }
  if (lease.legacy != nullptr) {
    intact = intact && holds(lease.legacy->dl_tensor.data, kElements, lease.pattern);
    lease.legacy->deleter(lease.legacy);
  }
  std::shared_ptr<DLManagedTensorContext> context = tensor.dl_ctx();
  cudaEvent_t marker = nullptr;
  fake().launch(readers_[id]);  // the "kernel" that reads it
  failures_.fetch_add(FakeCuda::table().event_create_with_flags(&marker, 0) == cudaSuccess &&
                              FakeCuda::table().event_record(marker, readers_[id]) == cudaSuccess
                          ? 0
                          : 1);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    readers_of_[tensor.data()].push_back(marker);
  }
  failures_.fetch_add(tensor.set_deallocation_stream(readers_[id]) ? 0 : 1);
  tensor = Tensor();
  intact = intact && holds(copy.data(), kElements, lease.pattern);
  copy = Tensor();
  intact = intact && holds(context->tensor.dl_tensor.data, kElements, lease.pattern);
  failures_.fetch_add(intact ? 0 : 1);
}

// Each worker fills a block, passes it on to the next worker, and reads and drops the one the
// previous worker passed it; there are fewer blocks than workers.
void PoolStress::run_leases(PoolMemory memory) {
  pool_ = make_pool(memory, kElements * sizeof(std::uint32_t), kBlocks);
  ASSERT_NE(pool_, nullptr);
  for (int id = 0; id < kWorkers; ++id) {
    producers_.push_back(fake().create_stream(0));
    readers_.push_back(fake().create_stream(0));
    handoffs_.emplace_back();
  }
  std::vector<cudaStream_t> streams(producers_);
  streams.insert(streams.end(), readers_.begin(), readers_.end());
  {
    test::FakeGpuThread gpu(fake(), streams);
    std::vector<std::thread> workers;
    for (int id = 0; id < kWorkers; ++id) {
      workers.emplace_back([this, id] {
        for (int lease = 0; lease < kLeases; ++lease) {
          fill_and_pass(id, lease);
          while (received_[id] <= lease) {
            read_and_drop(id, handoffs_[id].pop());
          }
        }
      });
    }
    for (std::thread& worker : workers) {
      worker.join();
    }
  }
  fake().complete_all();
  EXPECT_EQ(failures_.load(), 0);
  EXPECT_EQ(pool_->available_blocks(), kBlocks);  // every block came back
  EXPECT_EQ(allocations_, kWorkers * kLeases);
  EXPECT_EQ(pool_->reuse_count(), static_cast<std::uint64_t>(allocations_) - handed_out_.size());
  for (auto& [block, markers] : readers_of_) {
    for (cudaEvent_t marker : markers) {
      EXPECT_EQ(FakeCuda::table().event_destroy(marker), cudaSuccess);
    }
  }
  pool_.reset();
}

// A holder that names a block only through a copy of its context (documented to keep the block)
// reads it after its last Tensor is gone; the pool hands the block out again only after that
// copy is dropped, and everything the holder did before must happen before the next owner's use.
// Failed under ThreadSanitizer before the pool ordered itself after the drop of the last context
// copy: it saw use_count() == 1 (a relaxed load) and wrote the block's view while nothing ordered
// that after the holder's reads. A weak reference to the previous round's context must never lock
// onto the block's next allocation.
TEST_F(PoolStress, ABlockNamedByAContextCopyIsReusedOnlyAfterTheHoldersLastAccess) {
  constexpr int kRounds = 200;
  auto pool = make_pool(PoolMemory::kHost, kElements * sizeof(std::uint32_t), 1);
  ASSERT_NE(pool, nullptr);
  Handoff<Tensor> handoff;
  std::atomic<int> corrupted{0};
  std::atomic<int> revived{0};
  std::thread holder([&] {
    std::weak_ptr<DLManagedTensorContext> previous;
    for (int round = 0; round < kRounds; ++round) {
      std::shared_ptr<DLManagedTensorContext> context;
      {
        Tensor tensor = handoff.pop();
        context = tensor.dl_ctx();
      }
      // The last round's context, dropped: the block may be handed out again meanwhile.
      revived.fetch_add(previous.lock() != nullptr ? 1 : 0);
      previous = context;
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
  EXPECT_EQ(revived.load(), 0);
  EXPECT_EQ(pool->available_blocks(), 1u);
}

TEST_F(PoolStress, HostBlocksPassedBetweenThreadsAreNeverHandedOutTwice) {
  run_leases(PoolMemory::kHost);
}

TEST_F(PoolStress, DeviceBlocksAllocatedStreamOrderedAreNeverHandedOutTwice) {
  run_leases(PoolMemory::kDevice);
}

// Many threads mixing everything a block meets: stream-ordered allocates on a worker's streams
// and the legacy default stream, polling allocates, readiness on the producer, another stream, a
// default stream or none, one to six readers (default and per-thread streams among them), names
// passed as exports, memory references and context copies, weak references that must expire, and
// the pool dropped while every worker still holds a block (half of them dropping theirs as it
// goes). A block's next owner must find its previous readers done, every read must see its
// writer's pattern, and ThreadSanitizer checks the ordering.
class PoolMixStress : public test::FakeCudaTest {
 protected:
  static constexpr int kWorkers = 4;
  static constexpr int kRounds = 250;
  static constexpr std::size_t kBlocks = 5;
  static constexpr std::int64_t kElements = 16;

  struct Held {
    Tensor tensor;
    std::uint32_t pattern = 0;
    DLManagedTensorVersioned* exported = nullptr;
    std::shared_ptr<TensorMemoryReference> reference;
    std::shared_ptr<DLManagedTensorContext> context;
  };

  std::shared_ptr<TensorPool> pool_;
  std::vector<cudaStream_t> producers_;
  std::vector<cudaStream_t> others_;
  std::vector<cudaStream_t> readers_;  // 6 of them
  std::deque<Handoff<Held>> handoffs_;
  std::atomic<int> failures_{0};
  std::atomic<int> reused_early_{0};
  std::array<int, kWorkers> received_{};
  std::mutex mutex_;
  std::map<const void*, std::vector<cudaEvent_t>> readers_of_;

  void check_previous_readers(const void* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (cudaEvent_t marker : readers_of_[block]) {
      reused_early_.fetch_add(FakeCuda::table().event_query(marker) == cudaSuccess ? 0 : 1);
      (void)FakeCuda::table().event_destroy(marker);
    }
    readers_of_[block].clear();
  }

  Tensor allocate(int id, std::minstd_rand& random) {
    while (true) {
      const int kind = static_cast<int>(random() % 4);
      cudaStream_t stream = kind == 0 ? producers_[id] : kind == 1 ? nullptr : others_[id];
      expected<Tensor> tensor = kind == 3 ? pool_->allocate({kElements}, kUInt32)
                                          : pool_->allocate({kElements}, kUInt32, stream);
      if (tensor.has_value()) {
        if (kind != 3) {
          (void)FakeCuda::table().stream_synchronize(stream);
        }
        return std::move(*tensor);
      }
      failures_.fetch_add(tensor.error().code == ErrorCode::kResourceExhausted ? 0 : 1);
      if (Held waiting; handoffs_[id].try_pop(waiting)) {
        read_and_drop(id, std::move(waiting), random);
      }
      if (random() % 3 == 0) {
        (void)pool_->available_blocks();
      }
      std::this_thread::yield();
    }
  }

  void fill_and_pass(int id, int round, std::minstd_rand& random) {
    Tensor tensor = allocate(id, random);
    check_previous_readers(tensor.data());
    const auto pattern = static_cast<std::uint32_t>(id) << 24 | static_cast<std::uint32_t>(round);
    auto* words = static_cast<std::uint32_t*>(*tensor.mutable_data());
    for (std::int64_t i = 0; i < kElements; ++i) {
      words[i] = pattern;
    }
    switch (random() % 4) {
      case 0:
        fake().launch(producers_[id]);
        failures_.fetch_add(tensor.set_readiness_stream(producers_[id]) ? 0 : 1);
        break;
      case 1:
        fake().launch(others_[id]);
        failures_.fetch_add(tensor.set_readiness_stream(others_[id]) ? 0 : 1);
        break;
      case 2:
        failures_.fetch_add(tensor.set_readiness_stream(nullptr) ? 0 : 1);
        break;
      default:
        break;
    }
    Held out;
    out.tensor = std::move(tensor);
    out.pattern = pattern;
    if (random() % 3 == 0) {
      out.exported = out.tensor.to_dlpack_versioned().value_or(nullptr);
    }
    if (random() % 3 == 0) {
      out.reference = out.tensor.memory_reference();
    }
    if (random() % 3 == 0) {
      out.context = out.tensor.dl_ctx();
    }
    handoffs_[(id + 1) % kWorkers].push(std::move(out));
  }

  void read_and_drop(int id, Held held, std::minstd_rand& random) {
    Tensor& tensor = held.tensor;
    if (tensor.has_readiness_stream_contract()) {
      failures_.fetch_add(tensor.synchronize_for_host().has_value() ? 0 : 1);
    }
    bool intact = holds(tensor.data(), kElements, held.pattern);
    const int readers = 1 + static_cast<int>(random() % 6);
    const void* block = tensor.data();
    for (int r = 0; r < readers; ++r) {
      cudaStream_t reader = r == 4 ? nullptr : r == 5 ? cudaStreamPerThread : readers_[r];
      fake().launch(reader);
      cudaEvent_t marker = nullptr;
      (void)FakeCuda::table().event_create_with_flags(&marker, 0);
      (void)FakeCuda::table().event_record(marker, reader);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        readers_of_[block].push_back(marker);
      }
      failures_.fetch_add(tensor.set_deallocation_stream(reader) ? 0 : 1);
    }
    std::weak_ptr<DLManagedTensorContext> weak = tensor.dl_ctx();
    tensor = Tensor();
    if (held.exported != nullptr) {
      intact = intact && holds(held.exported->dl_tensor.data, kElements, held.pattern);
      held.exported->deleter(held.exported);
    }
    if (held.context != nullptr) {
      intact = intact && holds(held.context->tensor.dl_tensor.data, kElements, held.pattern);
    }
    held.context.reset();
    held.reference.reset();
    if (auto revived = weak.lock(); revived != nullptr) {
      failures_.fetch_add(1);
    }
    failures_.fetch_add(intact ? 0 : 1);
    ++received_[id];
  }
};

TEST_F(PoolMixStress, EveryWayOfNamingAndOrderingABlockKeepsItUntilItsReadersAreDone) {
  TensorPoolConfig config;
  config.block_bytes = kElements * sizeof(std::uint32_t);
  config.block_count = kBlocks;
  pool_ = *TensorPool::create(config);
  for (int id = 0; id < kWorkers; ++id) {
    producers_.push_back(fake().create_stream(0));
    others_.push_back(fake().create_stream(0));
    handoffs_.emplace_back();
  }
  for (int r = 0; r < 4; ++r) {
    readers_.push_back(fake().create_stream(0));
  }
  std::vector<cudaStream_t> streams(producers_);
  streams.insert(streams.end(), others_.begin(), others_.end());
  streams.insert(streams.end(), readers_.begin(), readers_.end());
  streams.push_back(nullptr);
  std::atomic<int> holding{0};
  std::atomic<bool> pool_gone{false};
  {
    test::FakeGpuThread gpu(fake(), streams);
    std::vector<std::thread> workers;
    for (int id = 0; id < kWorkers; ++id) {
      workers.emplace_back([&, id] {
        std::minstd_rand random(static_cast<std::uint32_t>(id + 1));
        for (int round = 0; round < kRounds; ++round) {
          fill_and_pass(id, round, random);
          while (received_[id] <= round) {
            read_and_drop(id, handoffs_[id].pop(), random);
          }
        }
        // One block each held across the pool's end, by its Tensor or by an export alone.
        Held last;
        last.tensor = allocate(id, random);
        last.pattern = 0;
        auto* words = static_cast<std::uint32_t*>(*last.tensor.mutable_data());
        for (std::int64_t i = 0; i < kElements; ++i) {
          words[i] = 0;
        }
        if (id % 2 == 0) {
          last.exported = last.tensor.to_dlpack_versioned().value_or(nullptr);
        }
        holding.fetch_add(1);
        while (id % 2 == 0 ? !pool_gone.load() : holding.load() < kWorkers) {
          std::this_thread::yield();  // odd workers drop theirs as the pool goes
        }
        read_and_drop(id, std::move(last), random);
      });
    }
    while (holding.load() < kWorkers) {
      std::this_thread::yield();
    }
    pool_.reset();
    pool_gone.store(true);
    for (std::thread& worker : workers) {
      worker.join();
    }
  }
  fake().complete_all();
  flush_deferred_releases();
  EXPECT_EQ(failures_.load(), 0);
  EXPECT_EQ(reused_early_.load(), 0);
  for (auto& [block, markers] : readers_of_) {
    for (cudaEvent_t marker : markers) {
      (void)FakeCuda::table().event_destroy(marker);
    }
  }
}

}  // namespace
}  // namespace holoscan
