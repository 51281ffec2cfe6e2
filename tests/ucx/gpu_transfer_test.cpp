// Device tensors between two processes over UCX's CUDA transports, both directions: the network
// path forced (tcp with cuda_copy staging through host memory, UCX's rendezvous pipeline) and the
// same-host GPU path (cuda_ipc, cuda_copy, and tcp for the connection). Producers are slow
// kernels and send() is called before they finish; every element is checked on the GPU by the
// receiver. A receiver killed mid-stream ends every send once and leaves no block claimed. Skips
// without a CUDA device.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu/gpu_test_fixture.hpp"
#include "ucx/gpu_series.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

constexpr std::int64_t kElements = std::int64_t{1} << 18;  // 1 MiB of uint32
constexpr std::uint64_t kCount = 48;
constexpr std::uint64_t kProducerDelayUs = 1000;
constexpr int kPatienceMs = 60000;

struct Transports {
  const char* name;  ///< For the test name.
  const char* tls;   ///< UCX_TLS for both processes.
};

class UcxGpu : public GpuTest, public ::testing::WithParamInterface<Transports> {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (!IsSkipped()) {
      ::setenv("UCX_TLS", GetParam().tls, 1);  // read when a worker is made; the peer inherits it
    }
  }
  std::vector<std::string> peer_options(const std::string& role) const {
    return {role, "count=" + std::to_string(kCount), "elements=" + std::to_string(kElements),
            "delay_us=" + std::to_string(kProducerDelayUs)};
  }
};

TEST_P(UcxGpu, DeviceTensorsLeaveOnlyWhenReadyAndTheirBlocksComeBackOnlyWhenSent) {
  auto worker = make_worker();
  auto options = peer_options("receive");
  options.push_back("port=" + listen_on_loopback(worker));
  const pid_t receiver = start_gpu_peer(options);
  const auto peer = worker.accept(kPatienceMs);
  ASSERT_TRUE(peer);
  const auto report = send_device_series(worker, *peer, kCount, kElements, kProducerDelayUs);
  EXPECT_EQ(report.delivered, kCount) << report.error;
  EXPECT_EQ(wait_peer(receiver, kPatienceMs, &worker), 0)
      << "the receiver found wrong elements (see its line above)";
}

TEST_P(UcxGpu, DeviceTensorsLandInTheReceiversPoolReadyToUse) {
  auto worker = make_worker(device_receiving_config(kElements));
  auto options = peer_options("send");
  options.push_back("port=" + listen_on_loopback(worker));
  const pid_t sender = start_gpu_peer(options);
  const auto report = receive_device_series(worker, kCount, kElements);
  EXPECT_EQ(report.received, kCount) << report.error;
  EXPECT_EQ(report.mismatches, 0u);
  EXPECT_EQ(report.wrong_sums, 0u);
  EXPECT_EQ(wait_peer(sender, kPatienceMs, &worker), 0) << "a send failed";
}

// Sends 1 MiB device tensors from a 3-block pool to a peer that drops them, kills the peer once
// eight were delivered (transfers are then in every stage: rendezvous started, staged, in
// flight), and waits for every send to end: UCX aborts what it held, and only then may a block
// come back.
TEST_P(UcxGpu, AKilledReceiverEndsEverySendOnceAndLeavesNoBlockClaimed) {
  auto worker = make_worker();
  const pid_t receiver = start_gpu_peer({"drain", "elements=" + std::to_string(kElements),
                                         "port=" + listen_on_loopback(worker)});
  const auto peer = worker.accept(kPatienceMs);
  ASSERT_TRUE(peer);
  auto pool = TensorPool::create({PoolMemory::kDevice, 0, kElements * sizeof(std::uint32_t),
                                  kDeviceSeriesBlocks});
  ASSERT_TRUE(pool);
  std::vector<std::uint64_t> sent;
  std::vector<std::uint64_t> ended;
  std::uint64_t delivered = 0;
  bool killed = false;
  const auto collect = [&] {
    (void)worker.progress();
    while (auto result = worker.next_send_result()) {
      ended.push_back(result->sequence);
      delivered += result->outcome ? 1 : 0;
      if (!result->outcome) {
        EXPECT_EQ(result->outcome.error().code, ErrorCode::kClosed)
            << result->outcome.error().message;
      }
    }
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kPatienceMs);
  while (!killed || ended.size() < sent.size()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "a send never ended";
    collect();
    if (!killed && delivered >= 8) {
      ::kill(receiver, SIGKILL);
      killed = true;
    }
    if (killed) {
      continue;
    }
    auto tensor = (*pool)->allocate({kElements}, DLDataType{kDLUInt, 32, 1});
    if (!tensor) {
      continue;  // every block is claimed until UCX is done with it
    }
    HDL_ASSERT_CUDA(cudaMemset(tensor->data(), 0x5a, static_cast<std::size_t>(tensor->nbytes())));
    HDL_ASSERT_CUDA(cudaStreamSynchronize(nullptr));  // the bytes are set before UCX reads them
    if (auto sequence = worker.send(*peer, *tensor)) {
      sent.push_back(*sequence);
    }
  }
  EXPECT_EQ(wait_peer(receiver, kPatienceMs), -1);
  std::sort(ended.begin(), ended.end());
  EXPECT_EQ(ended, sent) << "every send ended exactly once";
  EXPECT_EQ(worker.in_flight(), 0u);
  EXPECT_EQ((*pool)->available_blocks(), kDeviceSeriesBlocks) << "a claim outlived the connection";
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxGpu,
                         ::testing::Values(Transports{"network", "tcp,cuda_copy"},
                                           Transports{"same_host", "cuda_ipc,cuda_copy,tcp"}),
                         [](const auto& test_param) { return std::string(test_param.param.name); });

}  // namespace
}  // namespace holoscan::test
