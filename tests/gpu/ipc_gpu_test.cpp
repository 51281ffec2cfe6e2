// Cross-process tensors on a real GPU: the exporter is this process, each importer a separate
// process (fork + exec of holoscan_dlpack_ipc_peer) with its own CUDA context. A slow producer
// kernel writes a pattern; each consumer checks it on the GPU twice (at once, and after a spin),
// so a missing readiness wait or a block reused under a consumer shows as mismatches.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <holoscan/ipc.hpp>
#include <holoscan/tensor_pool.hpp>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpu/gpu_test_fixture.hpp"
#include "gpu/ipc_spawn.hpp"
#include "gpu/kernels.hpp"
#include "ipc/spawn.hpp"
#include "support/ipc_raw_socket.hpp"

namespace holoscan::test {
namespace {

constexpr DLDataType kUInt32{kDLUInt, 32, 1};
constexpr auto kDeadline = std::chrono::seconds(30);

class IpcGpuTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    auto exporter = ipc::Exporter::create();
    ASSERT_TRUE(exporter.has_value()) << exporter.error().message;
    exporter_.emplace(std::move(*exporter));
  }

  void TearDown() override {
    for (pid_t pid : children_) {
      ::kill(pid, SIGKILL);
      (void)wait_peer(pid, 10000);
    }
    if (exporter_) {
      EXPECT_TRUE(poll_until([&] { return exporter_->held() == 0; }));
      exporter_.reset();
    }
    GpuTest::TearDown();
  }

  std::shared_ptr<TensorPool> make_pool(std::int64_t elements, std::size_t blocks, bool shareable,
                                        int device = 0) {
    TensorPoolConfig config;
    config.device = device;
    config.block_bytes = static_cast<std::size_t>(elements) * sizeof(std::uint32_t);
    config.block_count = blocks;
    // Not shareable: cudaMalloc memory, exported through legacy CUDA IPC.
    config.memory_provider = shareable ? ipc::shareable_pool_memory() : ipc::cuda_ipc_pool_memory();
    auto pool = TensorPool::create(config);
    EXPECT_TRUE(pool.has_value()) << pool.error().message;
    return pool ? *pool : nullptr;
  }

  // Starts a peer and adds it to the exporter.
  ipc::PeerId spawn(const std::vector<std::string>& arguments,
                    const std::vector<std::string>& environment = {}) {
    SpawnedPeer peer = spawn_peer(arguments, environment);
    if (peer.pid <= 0 || !peer.channel) {
      ADD_FAILURE() << "could not start " << peer_binary();
      return 0;
    }
    children_.push_back(peer.pid);
    signal_fds_.emplace_back(peer.signal_fd);
    auto id = exporter_->add_peer(std::move(*peer.channel), 30000);
    EXPECT_TRUE(id.has_value()) << id.error().message;
    return id ? *id : 0;
  }

  // Waits for every spawned peer to exit with status 0, polling the exporter meanwhile (their
  // releases keep coming until they exit).
  void expect_peers_succeed() {
    for (pid_t pid : children_) {
      const int status = ipc_demo::wait_exit(pid, 120000, [&] { (void)exporter_->poll(); });
      EXPECT_EQ(status, 0) << "peer " << pid << " failed (see its stderr above)";
    }
    children_.clear();
  }

  template <class Predicate>
  bool poll_until(Predicate done) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!done()) {
      if (!exporter_->poll()) {
        return false;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return false;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return true;
  }

  // Tensor i holds pattern_value(seed_base + i), written by a kernel that first spins
  // `delay_us`; it goes to every peer in `peers`.
  void produce(TensorPool& pool, cudaStream_t producer, const std::vector<ipc::PeerId>& peers,
               long count, std::int64_t elements, std::uint64_t delay_us,
               std::uint32_t seed_base = 1) {
    for (long i = 0; i < count; ++i) {
      Tensor tensor;
      ASSERT_TRUE(poll_until([&] {
        auto allocated = pool.allocate({elements}, kUInt32);
        if (allocated) {
          tensor = std::move(*allocated);
        }
        return static_cast<bool>(tensor);
      })) << "no block came back";
      HDL_ASSERT_CUDA(launch_slow_fill(
          static_cast<std::uint32_t*>(tensor.data()), static_cast<std::uint64_t>(elements),
          seed_base + static_cast<std::uint32_t>(i), delay_us, producer));
      ASSERT_TRUE(tensor.set_readiness_stream(producer));
      for (ipc::PeerId peer : peers) {
        expected<std::uint64_t, Error> published = 0;
        ASSERT_TRUE(poll_until([&] {
          published = exporter_->publish(peer, tensor);
          return published.has_value() || published.error().code != ErrorCode::kNotReady;
        }));
        ASSERT_TRUE(published.has_value()) << published.error().message;
      }
      (void)exporter_->poll();
    }
  }

  // 64 tensors, each written by a kernel that spins 2 ms first, to one consumer process (started
  // with `words` besides its role) that checks every value; then every claim and block is back.
  void slow_producer_to_one_consumer(const std::vector<std::string>& words) {
    auto pool = make_pool(1 << 16, 4, /*shareable=*/true);
    ASSERT_NE(pool, nullptr);
    const cudaStream_t producer = make_stream();
    std::vector<std::string> arguments{"role=consume", "count=64", "delay_us=20"};
    arguments.insert(arguments.end(), words.begin(), words.end());
    const ipc::PeerId peer = spawn(arguments);
    produce(*pool, producer, {peer}, 64, 1 << 16, /*delay_us=*/2000);
    expect_peers_succeed();
    EXPECT_TRUE(poll_until([&] { return exporter_->held() == 0; }));
    EXPECT_EQ(pool->available_blocks(), 4u);
    EXPECT_EQ(exporter_->stats().published, 64u);
    EXPECT_EQ(exporter_->stats().unopenable_events, 0u);
    // One pool allocation, one peer: its fd crossed the socket with the first Publish only, and
    // the consumer (which checked every value) mapped it from there.
    EXPECT_EQ(exporter_->stats().fds_sent, 1u);
    EXPECT_EQ(exporter_->stats().refused_exports, 0u);
  }

  std::optional<ipc::Exporter> exporter_;
  std::vector<pid_t> children_;
  std::vector<ipc::UniqueFd> signal_fds_;
};

TEST_F(IpcGpuTest, ConsumerInAnotherProcessSeesWhatASlowProducerWrote) {
  slow_producer_to_one_consumer({});
}

// The same with the consumer's stream waiting on the producer's event (ReadinessWait::kOnGpu): a
// missing or misplaced cross-process wait reads the memory before the slow producer wrote it.
TEST_F(IpcGpuTest, ConsumerStreamInAnotherProcessWaitsForWhatASlowProducerWrote) {
  slow_producer_to_one_consumer({"readiness=gpu"});
}

// One consumer of each readiness wait: the fast one on its host (the default), the slow one on
// its stream.
TEST_F(IpcGpuTest, FanOutToTwoConsumerProcessesReusesABlockOnlyAfterBoth) {
  auto pool = make_pool(1 << 14, 2, /*shareable=*/true);
  ASSERT_NE(pool, nullptr);
  const cudaStream_t producer = make_stream();
  const ipc::PeerId fast = spawn({"role=consume", "count=200", "delay_us=20"});
  const ipc::PeerId slow = spawn({"role=consume", "count=200", "delay_us=400", "readiness=gpu"});
  produce(*pool, producer, {fast, slow}, 200, 1 << 14, /*delay_us=*/20);
  expect_peers_succeed();
  EXPECT_GE(pool->reuse_count(), 198u);
  EXPECT_EQ(exporter_->stats().fds_sent, 2u) << "one fd per peer, each with its first Publish";
}

// The consumer process first imports a tensor from a second exporter with the wait on the GPU,
// queues its check on a stream of its own and kills that exporter mid-write: that stream never
// runs again, nor does the deallocation point recorded there. Then it consumes 64 tensors of this
// exporter's two-block pool, which come round only if each of their releases does: a release
// stream shared with the dead connection's would wait on that point for ever.
TEST_F(IpcGpuTest, AnExporterKilledMidWriteHoldsBackNoOtherExportersReleases) {
  auto pool = make_pool(1 << 14, 2, /*shareable=*/true);
  ASSERT_NE(pool, nullptr);
  const cudaStream_t producer = make_stream();
  const ipc::PeerId peer = spawn({"role=consume", "count=64", "delay_us=20", "beside_dead=1"});
  produce(*pool, producer, {peer}, 64, 1 << 14, /*delay_us=*/200);
  expect_peers_succeed();
  EXPECT_GE(pool->reuse_count(), 62u);
}

TEST_F(IpcGpuTest, CudaMallocPoolTravelsThroughLegacyIpc) {
  auto pool = make_pool(1 << 14, 3, /*shareable=*/false);
  ASSERT_NE(pool, nullptr);
  const cudaStream_t producer = make_stream();
  const ipc::PeerId peer = spawn({"role=consume", "count=64", "delay_us=50"});
  produce(*pool, producer, {peer}, 64, 1 << 14, /*delay_us=*/500);
  expect_peers_succeed();
}

TEST_F(IpcGpuTest, KilledConsumerGivesItsBlocksBackAndThePoolServesTheNextOne) {
  auto pool = make_pool(1 << 14, 4, /*shareable=*/true);
  ASSERT_NE(pool, nullptr);
  const cudaStream_t producer = make_stream();
  const ipc::PeerId holder = spawn({"role=hold", "count=4", "release=2", "delay_us=500000"});
  produce(*pool, producer, {holder}, 4, 1 << 14, /*delay_us=*/0);
  pollfd ready{signal_fds_.back().get(), POLLIN, 0};
  ASSERT_EQ(::poll(&ready, 1, 30000), 1) << "the holder never signalled";
  ASSERT_TRUE(poll_until([&] { return exporter_->stats().releases == 2; }));
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(exporter_->poll().has_value());
    ASSERT_EQ(exporter_->held(), 4u) << "a block came back while the holder's checks ran";
  }
  EXPECT_EQ(pool->available_blocks(), 0u);

  ASSERT_EQ(::kill(children_.back(), SIGKILL), 0);
  EXPECT_EQ(wait_peer(children_.back(), 30000), -1);
  children_.clear();
  ASSERT_TRUE(poll_until([&] { return exporter_->held() == 0; }))
      << "the killed consumer's claims were never dropped";
  EXPECT_FALSE(exporter_->connected(holder));
  EXPECT_EQ(exporter_->stats().dropped, 4u);
  EXPECT_TRUE(poll_until([&] { return pool->available_blocks() == 4; }));

  const ipc::PeerId next = spawn({"role=consume", "count=32", "delay_us=50", "seed_base=100"});
  produce(*pool, producer, {next}, 32, 1 << 14, /*delay_us=*/200, /*seed_base=*/100);
  expect_peers_succeed();
}

// 10^4 by default; HOLOSCAN_DLPACK_IPC_ROUND_TRIPS lowers it under compute-sanitizer.
long round_trips() {
  const char* text = std::getenv("HOLOSCAN_DLPACK_IPC_ROUND_TRIPS");
  const long value = text != nullptr ? std::atol(text) : 0;
  return value > 200 ? value : 10000;
}

TEST_F(IpcGpuTest, TenThousandRoundTripsKeepMemoryAndDescriptorsFlat) {
  const long count = round_trips();
  constexpr long kWarmUp = 100;
  auto pool = make_pool(256, 8, /*shareable=*/true);
  ASSERT_NE(pool, nullptr);
  const cudaStream_t producer = make_stream();
  const ipc::PeerId peer = spawn({"role=consume", "count=" + std::to_string(count), "flat=1"});
  produce(*pool, producer, {peer}, kWarmUp, 256, 0);
  ASSERT_TRUE(poll_until([&] { return exporter_->held() == 0; }));
  std::size_t free_before = 0;
  std::size_t total = 0;
  HDL_ASSERT_CUDA(cudaMemGetInfo(&free_before, &total));
  const int fds_before = open_fd_count();
  const auto start = std::chrono::steady_clock::now();
  produce(*pool, producer, {peer}, count - kWarmUp, 256, 0, 1 + kWarmUp);
  expect_peers_succeed();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(poll_until([&] { return exporter_->held() == 0; }));
  std::size_t free_after = 0;
  HDL_ASSERT_CUDA(cudaMemGetInfo(&free_after, &total));
  EXPECT_LE(static_cast<long long>(free_before) - static_cast<long long>(free_after), 2 << 20)
      << "the exporter's GPU memory grew";
  // The peer's channel and pidfd are closed by now, so the count may only have gone down.
  EXPECT_LE(open_fd_count(), fds_before) << "the exporter's descriptors grew";
  RecordProperty("round_trips_per_second", std::to_string((count - kWarmUp) / seconds));
  std::printf("ipc: %ld round trips in %.3f s (%.0f/s)\n", count - kWarmUp, seconds,
              (count - kWarmUp) / seconds);
}

TEST_F(IpcGpuTest, ImporterFindsTheDeviceByUuidNotByOrdinal) {
  if (device_count() < 2) {
    GTEST_SKIP() << "needs two GPUs (" << device_count() << " present)";
  }
  auto pool = make_pool(1 << 14, 2, /*shareable=*/true, /*device=*/1);
  ASSERT_NE(pool, nullptr);
  const cudaStream_t producer = make_stream(1);
  // The child sees only the exporter's device 1, as its device 0.
  const ipc::PeerId peer =
      spawn({"role=consume", "count=16", "expect_device=0"}, {"CUDA_VISIBLE_DEVICES=1"});
  produce(*pool, producer, {peer}, 16, 1 << 14, 200);
  expect_peers_succeed();
}

// What the driver's pointer attributes say about each kind of memory, on the real driver.
TEST_F(IpcGpuTest, MemoryThatCannotCrossAProcessIsRefusedByKind) {
  auto export_of = [](void* data, std::int64_t elements) {
    DeviceTensorSpec spec;
    spec.data = static_cast<std::uint32_t*>(data);
    spec.elements = elements;
    spec.free_data = false;
    auto tensor = make_tensor_from_dlpack_versioned(make_versioned_device_tensor(spec));
    EXPECT_TRUE(tensor.has_value());
    return ipc::export_tensor(*tensor, 1);
  };
  void* managed = nullptr;
  HDL_ASSERT_CUDA(cudaMallocManaged(&managed, 4096));
  auto refused = export_of(managed, 16);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message.find("managed memory"), std::string::npos)
      << refused.error().message;
  HDL_EXPECT_CUDA(cudaFree(managed));

  void* pinned = nullptr;
  HDL_ASSERT_CUDA(cudaMallocHost(&pinned, 4096));
  refused = export_of(pinned, 16);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("pinned host memory"), std::string::npos)
      << refused.error().message;
  HDL_EXPECT_CUDA(cudaFreeHost(pinned));

  std::vector<std::uint32_t> pageable(16);
  refused = export_of(pageable.data(), 16);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("host memory that CUDA did not allocate"),
            std::string::npos)
      << refused.error().message;

  const cudaStream_t stream = make_stream();
  void* pooled = nullptr;
  HDL_ASSERT_CUDA(cudaMallocAsync(&pooled, 4096, stream));
  HDL_ASSERT_CUDA(cudaStreamSynchronize(stream));
  refused = export_of(pooled, 16);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kNotImplemented) << refused.error().message;
  HDL_EXPECT_CUDA(cudaFreeAsync(pooled, stream));
  HDL_EXPECT_CUDA(cudaStreamSynchronize(stream));

  void* device = nullptr;
  HDL_ASSERT_CUDA(cudaMalloc(&device, 4096));
  {
    auto accepted = export_of(static_cast<std::uint32_t*>(device) + 8, 16);
    ASSERT_TRUE(accepted.has_value()) << accepted.error().message;
    EXPECT_EQ(accepted->descriptor().handle_kind, ipc::MemoryHandleKind::kCudaIpc);
    EXPECT_EQ(accepted->descriptor().offset, 8 * sizeof(std::uint32_t));
    EXPECT_GE(accepted->descriptor().allocation_bytes, 4096u);
  }
  HDL_EXPECT_CUDA(cudaFree(device));

  auto pool = make_pool(1024, 1, /*shareable=*/true);
  ASSERT_NE(pool, nullptr);
  auto tensor = pool->allocate({16}, kUInt32);
  ASSERT_TRUE(tensor.has_value());
  auto shared = ipc::export_tensor(*tensor, 2);
  ASSERT_TRUE(shared.has_value()) << shared.error().message;
  EXPECT_EQ(shared->descriptor().handle_kind, ipc::MemoryHandleKind::kPosixFd);
  EXPECT_GE(shared->fd(), 0);
}

}  // namespace
}  // namespace holoscan::test
