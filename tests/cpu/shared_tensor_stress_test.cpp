// Many threads over copies of one imported tensor, against the fake runtime with a thread playing
// the GPU: whatever the interleaving, the producer's deleter runs once, only after every Tensor
// and export is gone and after every point recorded on the memory has passed; every claim and
// event comes back. Interleavings vary by repetition, never by sleeping; ThreadSanitizer and
// AddressSanitizer check the accesses themselves.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "holoscan/deferred_release.hpp"
#include "holoscan/event_pool.hpp"
#include "holoscan/tensor.hpp"
#include "stream/pooled_events.hpp"
#include "support/counting_producer.hpp"
#include "support/fake_cuda_test.hpp"
#include "support/fake_gpu_thread.hpp"
#include "support/tensor_helpers.hpp"

namespace holoscan {
namespace {

using test::FakeCuda;

constexpr int kWorkers = 8;
constexpr int kStreams = 4;  // two on each of two devices
constexpr std::int64_t kElements = 16;
constexpr DLDataType kUInt32{kDLUInt, 32, 1};

// An exported owner on its way to the thread that deletes or imports it.
struct Exported {
  DLManagedTensorVersioned* versioned = nullptr;
  DLManagedTensor* legacy = nullptr;
};

// Exports handed between threads; pop() waits for one, or says none will come.
class ExportQueue {
 public:
  void push(Exported exported) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      items_.push_back(exported);
    }
    changed_.notify_one();
  }
  // The next export; false once closed and empty. Never waits when `wait` is false.
  bool pop(Exported& exported, bool wait) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (wait) {
      changed_.wait(lock, [&] { return !items_.empty() || closed_; });
    }
    if (items_.empty()) {
      return false;
    }
    exported = items_.front();
    items_.pop_front();
    return true;
  }
  // Takes exports again (after close(), with none left).
  void reopen() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = false;
  }
  void close() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
    }
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Exported> items_;
  bool closed_ = false;
};

void run_deleter(const Exported& exported) {
  if (exported.versioned != nullptr) {
    exported.versioned->deleter(exported.versioned);
  } else {
    exported.legacy->deleter(exported.legacy);
  }
}

// What the producer's deleter finds when it runs: it must be the last of everything.
struct ProducerWatch {
  void (*deleter)(DLManagedTensorVersioned*) = nullptr;
  std::atomic<int> holders{0};  // threads holding Tensors, exports not yet deleted nor imported
  std::vector<cudaEvent_t> markers;  // recorded just before each point on the memory
  std::atomic<int> calls{0};
  std::atomic<int> early{0};       // ran while something still held the memory
  std::atomic<int> unfinished{0};  // ran before a point recorded on the memory had passed
};

std::atomic<ProducerWatch*> the_watch{nullptr};

void watched_deleter(DLManagedTensorVersioned* self) {
  ProducerWatch& watch = *the_watch.load();
  if (watch.holders.load() != 0) {
    watch.early.fetch_add(1);
  }
  for (cudaEvent_t marker : watch.markers) {
    if (FakeCuda::table().event_query(marker) != cudaSuccess) {
      watch.unfinished.fetch_add(1);
    }
  }
  watch.calls.fetch_add(1);
  watch.deleter(self);
}

class SharedTensorStress : public test::FakeCudaTest {
 protected:
  SharedTensorStress() : FakeCudaTest(2) {}

  void SetUp() override {
    FakeCudaTest::SetUp();
    for (int i = 0; i < kStreams; ++i) {
      streams_[i] = fake().create_stream(i / 2);
    }
    // One marker per worker and stream, made on the stream's device: a worker records its
    // marker on a stream just before it records a point there.
    for (int i = 0; i < kWorkers * kStreams; ++i) {
      const int device = i % kStreams / 2;
      cudaEvent_t event = nullptr;
      ASSERT_EQ(FakeCuda::table().set_device(device), cudaSuccess);
      ASSERT_EQ(FakeCuda::table().event_create_with_flags(&event, cudaEventDisableTiming),
                cudaSuccess);
      watch_.markers.push_back(event);
    }
    ASSERT_EQ(FakeCuda::table().set_device(0), cudaSuccess);
    the_watch.store(&watch_);
  }

  void TearDown() override {
    the_watch.store(nullptr);
    for (cudaEvent_t marker : watch_.markers) {
      EXPECT_EQ(FakeCuda::table().event_destroy(marker), cudaSuccess);
    }
  }

  // Queues work on `stream`, then records `worker`'s marker after it: a point recorded next
  // passes only once the marker has.
  void busy(int worker, int stream) {
    fake().launch(streams_[stream]);
    ASSERT_EQ(FakeCuda::table().event_record(watch_.markers[worker * kStreams + stream],
                                             streams_[stream]),
              cudaSuccess);
  }

  void worker(int id, int round, std::array<Tensor, 4> slots);
  void operate(int id, std::minstd_rand& random, std::array<Tensor, 4>& slots);
  void share_or_receive(std::minstd_rand& random, std::array<Tensor, 4>& slots, Tensor& slot);

  std::array<cudaStream_t, kStreams> streams_{};
  ProducerWatch watch_;
  ExportQueue exports_;
  std::atomic<int> failures_{0};
  std::uint32_t pattern_ = 0;
  std::atomic<bool> go_{false};
};

// Every element of a non-empty tensor holds the round's pattern (read through the tensor, so a
// use after free shows under AddressSanitizer).
bool intact(const Tensor& tensor, std::uint32_t pattern) {
  if (!tensor) {
    return true;
  }
  const auto* words = tensor.data_as<std::uint32_t>();
  for (std::int64_t i = 0; i < kElements; ++i) {
    if (words[i] != pattern) {
      return false;
    }
  }
  return true;
}

// Whether `error` is the refusal of an export of writable `slot` while another export of its
// context is alive (Holoscan 5.0's one mutable export at a time): `code` for that form.
bool refused_by_the_claim(const Tensor& slot, const Error& error, ErrorCode code) {
  return !slot.is_read_only() && error.code == code;
}

// Exports (versioned, or legacy where the authority allows; a writable view once at a time),
// imports an export, or deletes one.
void SharedTensorStress::share_or_receive(std::minstd_rand& random, std::array<Tensor, 4>& slots,
                                          Tensor& slot) {
  Exported exported;
  switch (random() % 3) {
    case 0:
      if (auto out = slot.to_dlpack_versioned(); out.has_value()) {
        watch_.holders.fetch_add(1);
        exports_.push(Exported{*out, nullptr});
      } else if (slot && !refused_by_the_claim(slot, out.error(), ErrorCode::kPermissionDenied)) {
        failures_.fetch_add(1);
      }
      return;
    case 1:
      if (auto out = slot.to_dlpack(); out.has_value()) {
        watch_.holders.fetch_add(1);
        exports_.push(Exported{nullptr, *out});
      } else if (slot && !slot.is_read_only() &&
                 !refused_by_the_claim(slot, out.error(), ErrorCode::kNotSupported)) {
        failures_.fetch_add(1);
      }
      return;
    default:
      if (!exports_.pop(exported, false)) {
        return;
      }
      // This thread holds what it imports until it ends, as it holds its other Tensors.
      Tensor& target = slots[random() % slots.size()];
      auto imported = exported.versioned != nullptr
                          ? make_tensor_from_dlpack_versioned(exported.versioned)
                          : make_tensor_from_dlpack(exported.legacy);
      watch_.holders.fetch_sub(1);
      if (imported.has_value()) {
        target = std::move(*imported);
      } else {
        failures_.fetch_add(1);
      }
  }
}

void SharedTensorStress::operate(int id, std::minstd_rand& random, std::array<Tensor, 4>& slots) {
  Tensor& slot = slots[random() % slots.size()];
  Tensor& other = slots[random() % slots.size()];
  const int stream = static_cast<int>(random() % kStreams);
  const auto kind = random() % 10;
  switch (kind) {
    case 0:
      slot = other;
      break;
    case 1:
      slot = std::move(other);
      break;
    case 2: {
      Tensor copy(other);
      Tensor moved(std::move(copy));
      slot = moved;
      break;
    }
    case 3:
      if (random() % 4 == 0) {  // seldom, so that most operations find a tensor
        slot = Tensor();
      }
      break;
    case 4:
    case 6:
      // A point recorded on the memory, readiness or deallocation, after work and a marker.
      if (slot) {
        busy(id, stream);
        const bool recorded = kind == 4 ? slot.set_readiness_stream(streams_[stream])
                                        : slot.set_deallocation_stream(streams_[stream]);
        failures_.fetch_add(recorded ? 0 : 1);
      }
      break;
    case 5:
      if (slot) {
        const bool contract = slot.has_readiness_stream_contract();  // never lost while held
        const auto synchronized = slot.synchronize_for_consumer_stream(streams_[stream]);
        failures_.fetch_add(contract && !synchronized.has_value() ? 1 : 0);
      }
      break;
    case 7:
      if (slot) {
        const bool contract = slot.has_readiness_stream_contract();
        const auto ready = slot.synchronize_for_host();  // the GPU thread ends the wait
        failures_.fetch_add(contract && !ready.has_value() ? 1 : 0);
      }
      break;
    default:
      share_or_receive(random, slots, slot);
  }
  failures_.fetch_add(intact(other, pattern_) && intact(slot, pattern_) ? 0 : 1);
}

void SharedTensorStress::worker(int id, int round, std::array<Tensor, 4> slots) {
  constexpr int kOperations = 400;
  std::minstd_rand random(static_cast<std::uint32_t>(round * kWorkers + id + 1));
  // Held while this thread is counted among the holders, so that the deleter cannot rightly run
  // meanwhile; the slots' copies come and go as the operations say.
  const Tensor pinned = slots[0];
  while (!go_.load()) {  // all start together, so that their operations interleave
    std::this_thread::yield();
  }
  for (int i = 0; i < kOperations; ++i) {
    operate(id, random, slots);
  }
  for (Tensor& slot : slots) {
    slot = Tensor();
  }
  watch_.holders.fetch_sub(1);  // counted out before `pinned`, the last it holds, goes
}

// Drains the release thread, deleters that drop further owners included (a flush waits only for
// the releases queued before it).
void drain_releases() {
  ASSERT_TRUE(test::eventually([] {
    flush_deferred_releases();
    return pending_deferred_releases() == 0;
  }));
}

// Even rounds: the test keeps the imported tensor (and a writable view of it) through the round
// and checks that every claim came back; odd rounds: it drops both at once, so that the last
// owner goes on any thread (a worker, a deleting thread or the release thread).
TEST_F(SharedTensorStress, CopiesOfOneImportOnManyThreadsReleaseItOnceAndLast) {
  constexpr int kRounds = 40;
  constexpr int kDeletingThreads = 2;
  test::CountingProducer producer;
  test::TensorSpec spec;
  spec.shape = {kElements};
  spec.dtype = kUInt32;
  test::FakeGpuThread gpu(fake(), {streams_.begin(), streams_.end()});
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE(round);
    pattern_ = 0x5a000000u + static_cast<std::uint32_t>(round);
    DLManagedTensorVersioned* managed = producer.make_versioned(spec);
    auto* words = static_cast<std::uint32_t*>(managed->dl_tensor.data);
    for (std::int64_t i = 0; i < kElements; ++i) {
      words[i] = pattern_;
    }
    watch_.deleter = managed->deleter;
    managed->deleter = &watched_deleter;
    auto imported = make_tensor_from_dlpack_versioned(managed);
    ASSERT_TRUE(imported.has_value()) << imported.error().message;
    Tensor root = std::move(*imported);
    Tensor writable = test::writable_view_of(root);
    StreamTrackedReference* owner = test::tracked(root).get();  // alive while root is
    const int calls = watch_.calls.load();
    exports_.reopen();
    watch_.holders.store(kWorkers);
    go_.store(false);

    std::vector<std::thread> workers;
    for (int id = 0; id < kWorkers; ++id) {
      workers.emplace_back(
          [this, id, round,
           slots = std::array<Tensor, 4>{root, writable, Tensor(), Tensor()}]() mutable {
            worker(id, round, std::move(slots));
          });
    }
    std::vector<std::thread> deleting;
    for (int i = 0; i < kDeletingThreads; ++i) {
      deleting.emplace_back([this] {
        Exported exported;
        while (exports_.pop(exported, true)) {
          watch_.holders.fetch_sub(1);
          run_deleter(exported);
        }
      });
    }
    go_.store(true);
    if (round % 2 == 1) {
      root = Tensor();
      writable = Tensor();
    }
    for (std::thread& thread : workers) {
      thread.join();
    }
    exports_.close();
    for (std::thread& thread : deleting) {
      thread.join();
    }
    if (round % 2 == 0) {
      drain_releases();  // the owners imported from exports
      EXPECT_EQ(owner->handle_claims(), 2);
      EXPECT_EQ(owner->unpaired_releases(), 0u);
      EXPECT_EQ(watch_.calls.load(), calls);
      root = Tensor();
      writable = Tensor();
    }
    drain_releases();
    EXPECT_EQ(watch_.calls.load(), calls + 1);
    EXPECT_EQ(producer.deleter_calls(), round + 1);
    EXPECT_EQ(watch_.early.load(), 0);
    EXPECT_EQ(watch_.unfinished.load(), 0);
    EXPECT_EQ(failures_.load(), 0);
    // Every pooled event is back (none held), and the fake holds no other of the library's.
    EXPECT_EQ(detail::destroy_free_events(), 0u);
    EXPECT_EQ(fake().live_events(), watch_.markers.size());
  }
}

// Threads that drop owners with points still pending flush from time to time and find every
// release they queued before run, while another thread flushes without end and a third changes
// the release thread's poll interval all along (a rest under way ends at each change).
TEST_F(SharedTensorStress, FlushesRacingDropsAndOptionChangesWaitForEveryEarlierRelease) {
  constexpr int kDroppers = 4;
  constexpr int kDrops = 400;
  constexpr int kDropsPerFlush = 10;
  std::array<test::CountingProducer, kDroppers> producers;
  test::FakeGpuThread gpu(fake(), {streams_.begin(), streams_.end()});
  std::atomic<bool> stop{false};
  std::thread changer([&] {
    std::minstd_rand random(1);
    while (!stop.load()) {
      ReleaseThreadOptions options;
      options.poll_interval = std::chrono::microseconds(1 + random() % 200);
      const bool set = set_release_thread_options(options).has_value();
      const auto in_effect = release_thread_options().poll_interval.count();
      failures_.fetch_add(set && in_effect >= 1 && in_effect <= 200 ? 0 : 1);
    }
  });
  std::thread flusher([&] {
    while (!stop.load()) {
      flush_deferred_releases();
    }
  });
  std::vector<std::thread> droppers;
  for (int id = 0; id < kDroppers; ++id) {
    droppers.emplace_back([&, id] {
      const cudaStream_t stream = streams_[id % kStreams];
      for (int drop = 1; drop <= kDrops; ++drop) {
        {
          Tensor tensor = test::import_or_die(producers[id]);
          fake().launch(stream);
          failures_.fetch_add(tensor.set_deallocation_stream(stream) ? 0 : 1);
        }
        if (drop % kDropsPerFlush == 0) {
          flush_deferred_releases();
          failures_.fetch_add(producers[id].deleter_calls() == drop ? 0 : 1);
        }
      }
    });
  }
  for (std::thread& thread : droppers) {
    thread.join();
  }
  stop.store(true);
  changer.join();
  flusher.join();
  ASSERT_TRUE(set_release_thread_options({}).has_value());
  EXPECT_EQ(failures_.load(), 0);
  drain_releases();
  for (const test::CountingProducer& producer : producers) {
    EXPECT_EQ(producer.deleter_calls(), kDrops);
  }
  EXPECT_EQ(detail::destroy_free_events(), 0u);
  EXPECT_EQ(fake().live_events(), watch_.markers.size());
}

}  // namespace
}  // namespace holoscan
