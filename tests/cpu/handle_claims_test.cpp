// Covers handle-claim counting on the DLPack owners: pairs, threads, unpaired releases.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "holoscan/dlpack.hpp"
#include "support/counting_producer.hpp"

namespace holoscan {
namespace {

using test::CountingProducer;

TEST(HandleClaims, StartAtZero) {
  CountingProducer producer;
  const DLManagedMemoryBufferVersioned buffer(producer.make_versioned());
  EXPECT_EQ(buffer.handle_claims(), 0);
  EXPECT_EQ(buffer.unpaired_releases(), 0u);
}

TEST(HandleClaims, RetainAndReleaseAreCounted) {
  CountingProducer producer;
  {
    DLManagedMemoryBufferVersioned buffer(producer.make_versioned());
    buffer.retain_tensor_handle();
    buffer.retain_tensor_handle();
    buffer.retain_tensor_handle();
    EXPECT_EQ(buffer.handle_claims(), 3);
    buffer.release_tensor_handle();
    EXPECT_EQ(buffer.handle_claims(), 2);
    buffer.release_tensor_handle();
    buffer.release_tensor_handle();
    EXPECT_EQ(buffer.handle_claims(), 0);
    EXPECT_EQ(buffer.unpaired_releases(), 0u);
    EXPECT_EQ(producer.deleter_calls(), 0);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(HandleClaims, LegacyBufferCountsToo) {
  CountingProducer producer;
  DLManagedMemoryBuffer buffer(producer.make_legacy());
  buffer.retain_tensor_handle();
  buffer.retain_tensor_handle();
  EXPECT_EQ(buffer.handle_claims(), 2);
  buffer.release_tensor_handle();
  buffer.release_tensor_handle();
  EXPECT_EQ(buffer.handle_claims(), 0);
  EXPECT_EQ(buffer.unpaired_releases(), 0u);
}

TEST(HandleClaims, UnpairedReleaseIsCountedAndNeverWraps) {
  CountingProducer producer;
  DLManagedMemoryBufferVersioned buffer(producer.make_versioned());
  buffer.release_tensor_handle();
  EXPECT_EQ(buffer.handle_claims(), 0);
  EXPECT_EQ(buffer.unpaired_releases(), 1u);
  buffer.release_tensor_handle();
  EXPECT_EQ(buffer.handle_claims(), 0);
  EXPECT_EQ(buffer.unpaired_releases(), 2u);

  buffer.retain_tensor_handle();
  EXPECT_EQ(buffer.handle_claims(), 1);
  buffer.release_tensor_handle();
  EXPECT_EQ(buffer.handle_claims(), 0);
  EXPECT_EQ(buffer.unpaired_releases(), 2u);
}

// A release that finds no claim must not make another thread's retain/release pair, landing
// while it is being judged, look unpaired: the pair's release then found the count at zero too,
// and one claim nobody held stayed behind (a pool block never reused) with one unpaired too many.
TEST(HandleClaims, UnpairedReleasesRacingPairsAreCountedExactly) {
  constexpr int kRounds = 4000;
  constexpr int kUnpaired = 64;
  constexpr int kPairs = 64;
  CountingProducer producer;
  DLManagedMemoryBufferVersioned buffer(producer.make_versioned());
  for (int round = 0; round < kRounds; ++round) {
    const std::uint64_t unpaired_before = buffer.unpaired_releases();
    std::atomic<bool> go{false};
    std::thread unpaired([&] {
      while (!go.load(std::memory_order_acquire)) {
      }
      for (int i = 0; i < kUnpaired; ++i) {
        buffer.release_tensor_handle();
      }
    });
    std::thread pairs([&] {
      while (!go.load(std::memory_order_acquire)) {
      }
      for (int i = 0; i < kPairs; ++i) {
        buffer.retain_tensor_handle();
        buffer.release_tensor_handle();
      }
    });
    go.store(true, std::memory_order_release);
    unpaired.join();
    pairs.join();
    ASSERT_EQ(buffer.handle_claims(), 0) << "round " << round;
    ASSERT_EQ(buffer.unpaired_releases() - unpaired_before, std::uint64_t{kUnpaired})
        << "round " << round;
  }
  EXPECT_EQ(producer.deleter_calls(), 0);
}

TEST(HandleClaims, SixteenThreadsOfPairsEndAtZero) {
  constexpr int kThreads = 16;
  constexpr int kPairs = 20000;
  CountingProducer producer;
  DLManagedMemoryBufferVersioned buffer(producer.make_versioned());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&buffer] {
      for (int i = 0; i < kPairs; ++i) {
        buffer.retain_tensor_handle();
        buffer.release_tensor_handle();
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(buffer.handle_claims(), 0);
  EXPECT_EQ(buffer.unpaired_releases(), 0u);
}

TEST(HandleClaims, SixteenThreadsRetainAllThenReleaseAll) {
  constexpr int kThreads = 16;
  constexpr int kClaimsPerThread = 5000;
  CountingProducer producer;
  DLManagedMemoryBufferVersioned buffer(producer.make_versioned());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&buffer] {
      for (int i = 0; i < kClaimsPerThread; ++i) {
        buffer.retain_tensor_handle();
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(buffer.handle_claims(), kThreads * kClaimsPerThread);

  threads.clear();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&buffer] {
      for (int i = 0; i < kClaimsPerThread; ++i) {
        buffer.release_tensor_handle();
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(buffer.handle_claims(), 0);
  EXPECT_EQ(buffer.unpaired_releases(), 0u);
}

}  // namespace
}  // namespace holoscan
