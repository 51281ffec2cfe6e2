// Covers handle-claim counting on the DLPack owners: pairs, threads, unpaired releases.
#include <gtest/gtest.h>

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
