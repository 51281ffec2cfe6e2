// Covers host-only tensors on a machine without a usable CUDA driver: hooks fail cleanly.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <regex>
#include <string>

#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack.hpp"
#include "holoscan/event_pool.hpp"
#include "holoscan/tensor.hpp"
#include "support/counting_producer.hpp"
#include "support/cuda_availability.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

using test::CountingProducer;

class NoDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::cuda_device_available()) {
      GTEST_SKIP() << "a CUDA device is present; covered by the GPU suite";
    }
  }
};

// The streams a caller may pass without having created one.
const cudaStream_t kBuiltinStreams[] = {nullptr, cudaStreamLegacy, cudaStreamPerThread};

// The hooks of a host-only StreamTrackedReference, none of which can reach a GPU here.
void expect_stream_hooks_fail_cleanly(StreamTrackedReference& reference) {
  for (cudaStream_t stream : kBuiltinStreams) {
    SCOPED_TRACE(reinterpret_cast<std::uintptr_t>(stream));
    EXPECT_FALSE(reference.set_readiness_stream(stream));
    EXPECT_FALSE(reference.has_readiness_stream_contract());
    EXPECT_EQ(reference.readiness_stream(), nullptr);
    EXPECT_FALSE(reference.set_deallocation_stream(stream));
    EXPECT_EQ(reference.deallocation_point_count(), 0u);
  }
  for (cudaStream_t stream : kBuiltinStreams) {
    EXPECT_TRUE(reference.synchronize_for_consumer(stream).has_value());
  }
  EXPECT_TRUE(reference.synchronize_for_host().has_value());
}

TEST_F(NoDriver, VersionedBufferHooksFailAndDeleterRunsOnce) {
  CountingProducer producer;
  {
    DLManagedMemoryBufferVersioned buffer(producer.make_versioned());
    expect_stream_hooks_fail_cleanly(buffer);
    EXPECT_EQ(producer.deleter_calls(), 0);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

TEST_F(NoDriver, LegacyBufferHooksFailAndDeleterRunsOnce) {
  CountingProducer producer;
  {
    DLManagedMemoryBuffer buffer(producer.make_legacy());
    expect_stream_hooks_fail_cleanly(buffer);
    EXPECT_EQ(producer.deleter_calls(), 0);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

TEST_F(NoDriver, TensorHooksReportNoReadinessContract) {
  CountingProducer producer;
  {
    expected<Tensor> imported = make_tensor_from_dlpack_versioned(producer.make_versioned());
    ASSERT_TRUE(imported.has_value()) << imported.error().message;
    Tensor& tensor = *imported;
    for (cudaStream_t stream : kBuiltinStreams) {
      SCOPED_TRACE(reinterpret_cast<std::uintptr_t>(stream));
      EXPECT_FALSE(tensor.set_readiness_stream(stream));
      EXPECT_FALSE(tensor.has_readiness_stream_contract());
      EXPECT_FALSE(tensor.set_deallocation_stream(stream));

      const expected<void> consumer = tensor.synchronize_for_consumer_stream(stream);
      ASSERT_FALSE(consumer.has_value());
      EXPECT_EQ(consumer.error().code, ErrorCode::kNotImplemented);
    }
    const expected<void> host = tensor.synchronize_for_host();
    ASSERT_FALSE(host.has_value());
    EXPECT_EQ(host.error().code, ErrorCode::kNotImplemented);
    EXPECT_EQ(producer.deleter_calls(), 0);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST_F(NoDriver, LegacyTensorHooksReportNoReadinessContract) {
  CountingProducer producer;
  {
    expected<Tensor> imported = make_tensor_from_dlpack(producer.make_legacy());
    ASSERT_TRUE(imported.has_value()) << imported.error().message;
    EXPECT_FALSE(imported->set_readiness_stream(cudaStreamPerThread));
    const expected<void> consumer = imported->synchronize_for_consumer_stream(cudaStreamPerThread);
    ASSERT_FALSE(consumer.has_value());
    EXPECT_EQ(consumer.error().code, ErrorCode::kNotImplemented);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST_F(NoDriver, ReserveStreamEventsReportsTheDriverError) {
  int ignored = 0;
  const cudaError_t driver_status = cudaGetDeviceCount(&ignored);
  ASSERT_NE(driver_status, cudaSuccess);
  const std::string status_name = cudaGetErrorName(driver_status);

  const expected<void> reserved = reserve_stream_events(0, 4);
  ASSERT_FALSE(reserved.has_value());
  const Error& error = reserved.error();
  EXPECT_EQ(error.code, ErrorCode::kFailure);
  EXPECT_EQ(error.provenance, static_cast<std::uint64_t>(driver_status));
  EXPECT_NE(error.message.find(status_name), std::string::npos) << error.message;
  if (driver_status == cudaErrorInsufficientDriver) {
    EXPECT_NE(error.message.find("cudaErrorInsufficientDriver"), std::string::npos)
        << error.message;
  }

  // The failing call (cudaSetDevice, cudaEventCreateWithFlags, ...) is named, not just the error.
  bool names_a_call = false;
  const std::regex cuda_name(R"(\bcuda[A-Z][A-Za-z]*\b)");
  for (auto it = std::sregex_iterator(error.message.begin(), error.message.end(), cuda_name);
       it != std::sregex_iterator(); ++it) {
    if (it->str().rfind("cudaError", 0) != 0) {
      names_a_call = true;
    }
  }
  EXPECT_TRUE(names_a_call) << error.message;

  EXPECT_EQ(created_stream_events(0), 0u);
}

TEST_F(NoDriver, NoEventsAreCreated) {
  CountingProducer producer;
  {
    DLManagedMemoryBufferVersioned buffer(producer.make_versioned());
    EXPECT_FALSE(buffer.set_readiness_stream(cudaStreamPerThread));
  }
  EXPECT_EQ(created_stream_events(0), 0u);
  EXPECT_EQ(producer.deleter_calls(), 1);
}

}  // namespace
}  // namespace holoscan
