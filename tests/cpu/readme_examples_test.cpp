// Runs the README's C++ examples (examples/readme/) on the fake CUDA runtimes, whose device memory
// the host can read: the operator scales its input and the producer's deleter waits for the
// operator's kernel; a refused input goes back to the caller's deleter once; two processes hand
// tensors over a socket and every value arrives. The "kernels" are host loops here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "readme/operator.hpp"
#include "readme/two_processes.hpp"
#include "support/counting_producer.hpp"
#include "support/fake_cuda_ipc.hpp"
#include "support/fake_cuda_test.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_child.hpp"
#include "support/thread_sanitizer.hpp"

namespace {

std::vector<float> first_values_read;  // launch_read's record, in the consumer process

}  // namespace

void launch_scale(const float* in, float* out, std::int64_t count, cudaStream_t stream) {
  for (std::int64_t i = 0; i < count; ++i) {
    out[i] = 2 * in[i];
  }
  holoscan::test::FakeCuda::instance().launch(stream);  // runs until the test completes it
}

void launch_fill(float* data, std::int64_t count, float value, cudaStream_t /*stream*/) {
  for (std::int64_t i = 0; i < count; ++i) {
    data[i] = value;
  }
}

void launch_read(const float* data, std::int64_t /*count*/, cudaStream_t /*stream*/) {
  first_values_read.push_back(data[0]);
}

namespace holoscan {
namespace {

class ReadmeOperator : public test::FakeCudaTest {
 protected:
  DLManagedTensorVersioned* input(std::vector<std::int64_t> shape) {
    test::TensorSpec spec;
    spec.shape = std::move(shape);
    spec.device = DLDevice{kDLCUDA, 0};
    return producer_.make_versioned(spec);
  }

  test::CountingProducer producer_;
};

TEST_F(ReadmeOperator, ScalesAndTheProducersDeleterWaitsForTheKernel) {
  const cudaStream_t producer = fake().create_stream(0);
  const cudaStream_t stream = fake().create_stream(0);
  auto pool = TensorPool::create({PoolMemory::kDevice, 0, 256, 2});
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  DLManagedTensorVersioned* managed = input({16});
  auto* values = static_cast<float*>(managed->dl_tensor.data);
  for (int i = 0; i < 16; ++i) {
    values[i] = static_cast<float>(i);
  }
  auto out = scale(managed, producer, **pool, stream);
  ASSERT_TRUE(out.has_value()) << out.error().message;
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(out->data_as<float>()[i], 2.0f * static_cast<float>(i));
  }
  EXPECT_TRUE(out->has_readiness_stream_contract());
  EXPECT_EQ(producer_.deleter_calls(), 0) << "the kernel on `stream` still reads the input";
  fake().complete(stream);
  flush_deferred_releases();
  EXPECT_EQ(producer_.deleter_calls(), 1);
}

TEST_F(ReadmeOperator, ARefusedInputGoesToItsDeleterOnce) {
  const cudaStream_t stream = fake().create_stream(0);
  auto pool = TensorPool::create({PoolMemory::kDevice, 0, 256, 1});
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  test::TensorSpec spec;
  spec.ndim = 65;  // more dimensions than an import takes
  spec.shape = std::vector<std::int64_t>(65, 1);
  auto out = scale(producer_.make_versioned(spec), stream, **pool, stream);
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error().code, ErrorCode::kInvalidArgument) << out.error().message;
  EXPECT_EQ(producer_.deleter_calls(), 1);
}

// The kernel reads compact float32: another type (a smaller item would make a smaller output
// block than the kernel writes) or a view (a reversed or broadcast one reads outside the
// producer's memory) is refused, and its producer's deleter still runs once, after its work.
TEST_F(ReadmeOperator, AnInputTheKernelCannotReadIsRefused) {
  const cudaStream_t producer = fake().create_stream(0);
  const cudaStream_t stream = fake().create_stream(0);
  auto pool = TensorPool::create({PoolMemory::kDevice, 0, 256, 1});
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  test::TensorSpec half;
  half.shape = {16};
  half.device = DLDevice{kDLCUDA, 0};
  half.dtype = DLDataType{kDLFloat, 16, 1};
  test::TensorSpec broadcast;
  broadcast.shape = {16};
  broadcast.device = DLDevice{kDLCUDA, 0};
  broadcast.strides = std::vector<std::int64_t>{0};  // one element, sixteen times
  int refused = 0;
  for (const test::TensorSpec& spec : {half, broadcast}) {
    auto out = scale(producer_.make_versioned(spec), producer, **pool, stream);
    ASSERT_FALSE(out.has_value());
    EXPECT_EQ(out.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(out.error().message, "scale: a compact float32 tensor only");
    ++refused;
  }
  fake().complete(producer);
  flush_deferred_releases();
  EXPECT_EQ(producer_.deleter_calls(), refused);
  EXPECT_EQ((*pool)->available_blocks(), 1u) << "a refused input took a block";
}

TEST(ReadmeTwoProcesses, EveryTensorArrivesAndEveryBlockComesBack) {
#ifdef HDL_THREAD_SANITIZER
  // As for IpcProcess: the fake runtime's mutex, remade in a forked child, stops it under TSan.
  GTEST_SKIP() << "forked children that use the fake runtime cannot run under ThreadSanitizer";
#endif
  constexpr int kCount = 12;  // three times the pool's blocks: each is reused
  test::FakeCudaIpcScope scope;
  const std::string path = "/tmp/holoscan-dlpack-readme-" + std::to_string(::getpid());
  test::Child consumer;
  ASSERT_TRUE(consumer.start([&] {
    // Process 1 listens first: wait for its socket, as a second program would be started later.
    while (::access(path.c_str(), F_OK) != 0) {
      ::usleep(1000);
    }
    try {
      consume(path, kCount, scope.fake().create_stream(0));
    } catch (const std::exception& error) {
      std::fprintf(stderr, "consume: %s\n", error.what());
      return 2;
    }
    for (int i = 0; i < kCount; ++i) {
      if (first_values_read.size() != static_cast<std::size_t>(kCount) ||
          first_values_read[i] != static_cast<float>(i)) {
        return 1;
      }
    }
    return 0;
  }));
  try {
    produce(path, kCount, scope.fake().create_stream(0));
  } catch (const std::exception& error) {
    ADD_FAILURE() << "produce: " << error.what();
  }
  EXPECT_EQ(consumer.reap(), 0) << "the consumer read other values (1) or failed (2)";
}

}  // namespace
}  // namespace holoscan
