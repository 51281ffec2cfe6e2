// Readiness ordering (producer stream -> consumer stream or host) of both DLPack owners, with slow
// producer kernels that turn a missing or misplaced wait into stale data.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <holoscan/dlpack.hpp>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "gpu/gpu_test_fixture.hpp"
#include "gpu/kernels.hpp"

namespace holoscan::test {

// Outside the anonymous namespace: CTest test names carry them, and "(anonymous namespace)"
// would put spaces and parentheses there.
struct ReadinessVersionedOwner {
  static std::shared_ptr<StreamTrackedReference> make(const DeviceTensorSpec& spec) {
    return std::make_shared<DLManagedMemoryBufferVersioned>(make_versioned_device_tensor(spec));
  }
};

struct ReadinessLegacyOwner {
  static std::shared_ptr<StreamTrackedReference> make(const DeviceTensorSpec& spec) {
    return std::make_shared<DLManagedMemoryBuffer>(make_legacy_device_tensor(spec));
  }
};

namespace {

constexpr std::int64_t kElements = 1 << 16;
// Far longer than a consumer kernel takes, so an unordered consumer reads before the writes.
constexpr std::uint64_t kProducerDelayUs = 5'000;
// Later, unrelated producer-stream work; long enough to still run after the consumer's host wait.
constexpr std::uint64_t kLaterWorkUs = 200'000;
constexpr int kRaceTries = 20;

template <class Owner>
class ReadinessTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    producer_ = make_stream();
    consumer_ = make_stream();
    ASSERT_NE(producer_, nullptr);
    ASSERT_NE(consumer_, nullptr);
    data_ = device_alloc_zeroed(kElements);
    ASSERT_NE(data_, nullptr);
    int device = 0;
    HDL_ASSERT_CUDA(cudaGetDevice(&device));
    buffer_ = Owner::make(DeviceTensorSpec{data_, kElements, device, &probe_, true});
  }

  void TearDown() override {
    const bool owned = buffer_ != nullptr;
    buffer_.reset();  // may defer; the fixture's flush runs it before the streams go away
    GpuTest::TearDown();
    if (owned) {
      EXPECT_EQ(probe_.calls(), 1) << "the producer's deleter must run exactly once";
    }
  }

  // Resets the data to zero, on the producer stream and complete before the next producer.
  void clear_data() {
    HDL_ASSERT_CUDA(launch_fill(data_, kElements, 0, producer_));
    HDL_ASSERT_CUDA(cudaStreamSynchronize(producer_));
  }

  static void expect_pattern(const CheckResult& result, std::uint32_t seed) {
    EXPECT_EQ(result.mismatches, 0u);
    EXPECT_EQ(result.checksum, expected_checksum(seed, kElements));
  }

  cudaStream_t producer_ = nullptr;
  cudaStream_t consumer_ = nullptr;
  std::uint32_t* data_ = nullptr;
  DeleterProbe probe_;
  std::shared_ptr<StreamTrackedReference> buffer_;
};

using Owners = ::testing::Types<ReadinessVersionedOwner, ReadinessLegacyOwner>;
TYPED_TEST_SUITE(ReadinessTest, Owners);

TYPED_TEST(ReadinessTest, WithoutReadinessPointSynchronizeIsSuccessfulNoOp) {
  EXPECT_FALSE(this->buffer_->has_readiness_stream_contract());
  EXPECT_EQ(this->buffer_->readiness_stream(), nullptr);
  EXPECT_TRUE(this->buffer_->synchronize_for_consumer(this->consumer_).has_value());
  EXPECT_TRUE(this->buffer_->synchronize_for_host().has_value());
}

// The negative control: without synchronize_for_consumer the consumer must read stale data, or
// the ordering tests below would pass for a library that does nothing.
TYPED_TEST(ReadinessTest, ConsumerWithoutSynchronizeSeesStaleData) {
  if (!GpuTest::streams_run_concurrently()) {
    GTEST_SKIP() << "kernels of independent streams do not overlap here (compute-sanitizer "
                    "serializes launches), so a race cannot be shown";
  }
  DeviceArray<CheckResult> results(kRaceTries);
  int stale_at_try = 0;
  for (int attempt = 1; attempt <= kRaceTries && stale_at_try == 0; ++attempt) {
    const auto seed = static_cast<std::uint32_t>(0x5100 + attempt);
    this->clear_data();
    HDL_ASSERT_CUDA(
        launch_slow_fill(this->data_, kElements, seed, kProducerDelayUs, this->producer_));
    ASSERT_TRUE(this->buffer_->set_readiness_stream(this->producer_));
    HDL_ASSERT_CUDA(
        launch_check(this->data_, kElements, seed, 0, results.get(attempt - 1), this->consumer_));
    HDL_ASSERT_CUDA(cudaStreamSynchronize(this->consumer_));
    HDL_ASSERT_CUDA(cudaStreamSynchronize(this->producer_));
    if (results.at(attempt - 1).mismatches > 0) {
      stale_at_try = attempt;
    }
  }
  EXPECT_NE(stale_at_try, 0) << "no stale read in " << kRaceTries
                             << " unordered tries: the ordering tests here prove nothing";
  std::cout << "[   INFO   ] unordered consumer read stale data at try " << stale_at_try << "\n";
}

TYPED_TEST(ReadinessTest, ConsumerStreamWaitsForProducer) {
  constexpr std::uint32_t kSeed = 0xA11CE;
  DeviceArray<CheckResult> result(1);
  HDL_ASSERT_CUDA(
      launch_slow_fill(this->data_, kElements, kSeed, kProducerDelayUs, this->producer_));
  ASSERT_TRUE(this->buffer_->set_readiness_stream(this->producer_));
  EXPECT_TRUE(this->buffer_->has_readiness_stream_contract());
  EXPECT_EQ(this->buffer_->readiness_stream(), this->producer_);
  auto synced = this->buffer_->synchronize_for_consumer(this->consumer_);
  ASSERT_TRUE(synced.has_value()) << synced.error().message;
  HDL_ASSERT_CUDA(launch_check(this->data_, kElements, kSeed, 0, result.get(), this->consumer_));
  HDL_ASSERT_CUDA(cudaStreamSynchronize(this->consumer_));
  // Only the producer stream's fill was queued, so the consumer's stream waited for all of it.
  EXPECT_EQ(query_stream(this->producer_), cudaSuccess);
  this->expect_pattern(result.at(0), kSeed);
}

TYPED_TEST(ReadinessTest, ProducerStreamItselfNeedsNoWait) {
  constexpr std::uint32_t kSeed = 0x5A3E;
  DeviceArray<CheckResult> result(1);
  HDL_ASSERT_CUDA(
      launch_slow_fill(this->data_, kElements, kSeed, kProducerDelayUs, this->producer_));
  ASSERT_TRUE(this->buffer_->set_readiness_stream(this->producer_));
  auto synced = this->buffer_->synchronize_for_consumer(this->producer_);
  ASSERT_TRUE(synced.has_value()) << synced.error().message;
  HDL_ASSERT_CUDA(launch_check(this->data_, kElements, kSeed, 0, result.get(), this->producer_));
  HDL_ASSERT_CUDA(cudaStreamSynchronize(this->producer_));
  this->expect_pattern(result.at(0), kSeed);
}

// The host wait ends at the readiness point: data is there, later producer work still runs.
TYPED_TEST(ReadinessTest, HostSynchronizeWaitsForTheReadinessPointOnly) {
  constexpr std::uint32_t kSeed = 0x4057;
  cudaEvent_t filled = nullptr;
  HDL_ASSERT_CUDA(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming));
  HDL_ASSERT_CUDA(
      launch_slow_fill(this->data_, kElements, kSeed, kProducerDelayUs, this->producer_));
  HDL_ASSERT_CUDA(cudaEventRecord(filled, this->producer_));
  ASSERT_TRUE(this->buffer_->set_readiness_stream(this->producer_));
  HDL_ASSERT_CUDA(launch_spin(kLaterWorkUs, this->producer_));

  auto waited = this->buffer_->synchronize_for_host();
  ASSERT_TRUE(waited.has_value()) << waited.error().message;
  EXPECT_EQ(cudaEventQuery(filled), cudaSuccess) << "returned before the producer finished";
  EXPECT_EQ(query_stream(this->producer_), cudaErrorNotReady)
      << "waited for work queued after set_readiness_stream";
  // A copy on an unrelated non-blocking stream does not wait for the producer stream, so it
  // sees the data only because the host wait already did.
  std::vector<std::uint32_t> host(kElements);
  HDL_ASSERT_CUDA(cudaMemcpyAsync(host.data(), this->data_, kElements * sizeof(std::uint32_t),
                                  cudaMemcpyDeviceToHost, this->consumer_));
  HDL_ASSERT_CUDA(cudaStreamSynchronize(this->consumer_));
  std::int64_t mismatches = 0;
  for (std::int64_t i = 0; i < kElements; ++i) {
    mismatches +=
        host[static_cast<std::size_t>(i)] != pattern_value(kSeed, static_cast<std::uint64_t>(i));
  }
  EXPECT_EQ(mismatches, 0);
  HDL_EXPECT_CUDA(cudaEventDestroy(filled));
}

// The readiness point is recorded at the call: a consumer must not wait for later work.
TYPED_TEST(ReadinessTest, LaterProducerWorkIsNotWaitedFor) {
  if (!GpuTest::streams_run_concurrently()) {
    GTEST_SKIP() << "kernels of independent streams do not overlap here (compute-sanitizer "
                    "serializes launches): the consumer would wait for the later work anyway";
  }
  constexpr std::uint32_t kSeed = 0x1A7E;
  DeviceArray<CheckResult> result(1);
  HDL_ASSERT_CUDA(launch_slow_fill(this->data_, kElements, kSeed, 1'000, this->producer_));
  ASSERT_TRUE(this->buffer_->set_readiness_stream(this->producer_));
  HDL_ASSERT_CUDA(launch_spin(kLaterWorkUs, this->producer_));
  auto synced = this->buffer_->synchronize_for_consumer(this->consumer_);
  ASSERT_TRUE(synced.has_value()) << synced.error().message;
  HDL_ASSERT_CUDA(launch_check(this->data_, kElements, kSeed, 0, result.get(), this->consumer_));
  HDL_ASSERT_CUDA(cudaStreamSynchronize(this->consumer_));
  EXPECT_EQ(query_stream(this->producer_), cudaErrorNotReady)
      << "the consumer waited for work queued after set_readiness_stream";
  this->expect_pattern(result.at(0), kSeed);
}

// nullptr (legacy default), cudaStreamLegacy and cudaStreamPerThread as producer and consumer:
// none of them orders implicitly against the non-blocking streams used on the other side.
TYPED_TEST(ReadinessTest, DefaultStreamHandlesWorkOnBothSides) {
  const cudaStream_t kSpecial[] = {nullptr, cudaStreamLegacy, cudaStreamPerThread};
  const char* const kNames[] = {"nullptr", "cudaStreamLegacy", "cudaStreamPerThread"};
  DeviceArray<CheckResult> results(2 * std::size(kSpecial));
  for (std::size_t k = 0; k < std::size(kSpecial); ++k) {
    SCOPED_TRACE(kNames[k]);
    const cudaStream_t special = kSpecial[k];

    // The default stream handle produces; a non-blocking stream consumes.
    const auto seed_a = static_cast<std::uint32_t>(0xD0 + 2 * k);
    this->clear_data();
    HDL_ASSERT_CUDA(launch_slow_fill(this->data_, kElements, seed_a, kProducerDelayUs, special));
    ASSERT_TRUE(this->buffer_->set_readiness_stream(special));
    EXPECT_EQ(this->buffer_->readiness_stream(), special);
    auto synced = this->buffer_->synchronize_for_consumer(this->consumer_);
    ASSERT_TRUE(synced.has_value()) << synced.error().message;
    HDL_ASSERT_CUDA(
        launch_check(this->data_, kElements, seed_a, 0, results.get(2 * k), this->consumer_));
    HDL_ASSERT_CUDA(cudaStreamSynchronize(this->consumer_));
    HDL_ASSERT_CUDA(cudaStreamSynchronize(special));
    this->expect_pattern(results.at(2 * k), seed_a);

    // A non-blocking stream produces; the default stream handle consumes.
    const auto seed_b = seed_a + 1;
    this->clear_data();
    HDL_ASSERT_CUDA(
        launch_slow_fill(this->data_, kElements, seed_b, kProducerDelayUs, this->producer_));
    ASSERT_TRUE(this->buffer_->set_readiness_stream(this->producer_));
    synced = this->buffer_->synchronize_for_consumer(special);
    ASSERT_TRUE(synced.has_value()) << synced.error().message;
    HDL_ASSERT_CUDA(
        launch_check(this->data_, kElements, seed_b, 0, results.get(2 * k + 1), special));
    EXPECT_TRUE(this->buffer_->set_deallocation_stream(special));
    HDL_ASSERT_CUDA(cudaStreamSynchronize(special));
    HDL_ASSERT_CUDA(cudaStreamSynchronize(this->producer_));
    this->expect_pattern(results.at(2 * k + 1), seed_b);
  }
}

}  // namespace
}  // namespace holoscan::test
