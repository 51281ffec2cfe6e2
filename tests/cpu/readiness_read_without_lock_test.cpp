// synchronize_for_consumer reads the readiness point without the StreamState lock. Consumers wait
// while the producer moves the readiness between streams of two devices, under ThreadSanitizer in
// the tsan preset: every wait must be for a readiness record already made after the producer's
// pending work (nothing a consumer queues afterwards may pass before that work), none may fail.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <thread>
#include <vector>

#include "stream/stream_state.hpp"
#include "support/fake_cuda_test.hpp"

namespace holoscan {
namespace {

class ReadinessReadWithoutLock : public test::FakeCudaTest {
 protected:
  ReadinessReadWithoutLock() : FakeCudaTest(2) {}
};

TEST_F(ReadinessReadWithoutLock, WaitsDuringConcurrentRecordsAreForARecordMade) {
  constexpr int kRecords = 400;
  const std::array<cudaStream_t, 3> producers{fake().create_stream(0), fake().create_stream(1),
                                              fake().create_stream(0)};
  std::array<cudaStream_t, 3> consumers{};
  for (cudaStream_t& consumer : consumers) {
    consumer = fake().create_stream(0);
  }
  detail::StreamState state;
  fake().launch(producers[0]);
  ASSERT_TRUE(state.set_readiness_stream(producers[0]));

  std::atomic<bool> done{false};
  std::atomic<int> failed{0};
  std::atomic<int> passed_early{0};
  std::atomic<int> waits{0};
  std::vector<std::thread> readers;
  for (cudaStream_t consumer : consumers) {
    readers.emplace_back([&, consumer] {
      while (!done.load(std::memory_order_acquire)) {
        if (!state.synchronize_for_consumer(consumer).has_value()) {
          failed.fetch_add(1);
        } else if (test::later_work_passed(consumer)) {
          passed_early.fetch_add(1);
        }
        waits.fetch_add(1);
      }
    });
  }
  // Every reader waits at least once before the records start, and the waits made while they
  // run are counted: readers started late, all waiting after the last record, prove nothing.
  while (waits.load() < static_cast<int>(consumers.size())) {
    std::this_thread::yield();
  }
  const int waits_before = waits.load();
  // At least kRecords, and on until the readers waited a few times meanwhile (a loaded host may
  // not run them during the first few hundred).
  constexpr int kMostRecords = 200000;
  const int overlapping = 3 * static_cast<int>(consumers.size());
  int refused = 0;
  for (int i = 0; i < kRecords || (waits.load() - waits_before < overlapping && i < kMostRecords);
       ++i) {
    const cudaStream_t producer = producers[static_cast<std::size_t>(i) % producers.size()];
    fake().launch(producer);  // never completed until the end: every record is after it
    refused += state.set_readiness_stream(producer) ? 0 : 1;
  }
  const int waits_during = waits.load() - waits_before;
  while (waits.load() < waits_before + 3 * static_cast<int>(consumers.size())) {
    std::this_thread::yield();
  }
  done.store(true, std::memory_order_release);
  for (std::thread& reader : readers) {
    reader.join();
  }
  EXPECT_GT(waits_during, 0) << "no wait overlapped the records";
  EXPECT_EQ(refused, 0);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(passed_early.load(), 0);
  fake().complete_all();
  for (cudaStream_t consumer : consumers) {
    EXPECT_TRUE(test::later_work_passed(consumer));
  }
}

}  // namespace
}  // namespace holoscan
