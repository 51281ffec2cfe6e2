// Covers Exporter and Importer end to end over a socketpair in one process, on the fake
// runtimes: the imported tensor (data, layout, read-only authority, readiness contract), the
// release ordered after every deallocation stream without a host block, one mapping per
// allocation, refusals given back at once, imports that outlive their importer, fan-out to two
// importers, and a publish that never waits. Every test checks that no descriptor leaks.
#include <cuda.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "holoscan/deferred_release.hpp"
#include "holoscan/ipc.hpp"
#include "holoscan/stream_tracked_reference.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/fake_cuda_ipc.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_peers.hpp"
#include "support/ipc_raw_socket.hpp"

namespace holoscan::ipc {
namespace {

using test::CudaEntry;
using test::CudaIpcEntry;

// Readiness waited for on the consumers' streams (the default waits on the host).
ImporterOptions on_gpu() { return test::readiness_options(ReadinessWait::kOnGpu); }

class IpcRoundTrip : public ::testing::Test {
 protected:
  void SetUp() override {
    fds_before_ = test::open_fd_count();
    ASSERT_EQ(pending_deferred_releases(), 0u);
    auto exporter = Exporter::create();
    ASSERT_TRUE(exporter.has_value()) << exporter.error().message;
    exporter_.emplace(std::move(*exporter));
  }

  void TearDown() override {
    importer_.reset();
    other_.reset();
    if (exporter_) {
      EXPECT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }))
          << exporter_->held() << " claim(s) never dropped";
      exporter_.reset();
    }
    pool_.reset();
    scope_.reset();
    EXPECT_EQ(test::open_fd_count(), fds_before_) << "descriptor leak";
  }

  // A shareable pool and one importer connected to the exporter.
  void connect(std::size_t blocks = 4, test::PoolKind kind = test::PoolKind::kShareable,
               const ImporterOptions& options = {}) {
    pool_ = test::make_device_pool(1024, blocks, kind);
    ASSERT_NE(pool_, nullptr);
    auto connected = test::connect_importer(*exporter_, options);
    ASSERT_TRUE(connected.importer.has_value());
    peer_ = connected.peer;
    importer_.emplace(std::move(*connected.importer));
  }

  // A pool tensor of 32 floats 0, 1, 2, ... written by the host (fake device memory is host
  // memory), ready on a busy producer stream.
  Tensor produce(cudaStream_t producer) {
    Tensor tensor = test::allocate(*pool_, {4, 8});
    auto* data = static_cast<float*>(tensor.data());
    for (int i = 0; i < 32; ++i) {
      data[i] = static_cast<float>(i);
    }
    fake().launch(producer);
    EXPECT_TRUE(tensor.set_readiness_stream(producer));
    return tensor;
  }

  // Two connections (importer_, other_) to the exporter of a two-block pool, one import each,
  // each import with a deallocation point on a busy stream of its own (returned in that order).
  std::pair<cudaStream_t, cudaStream_t> one_busy_import_per_connection(Tensor& first,
                                                                       Tensor& second) {
    connect(2);
    auto connected = test::connect_importer(*exporter_);
    EXPECT_TRUE(connected.importer.has_value());
    other_.emplace(std::move(*connected.importer));
    const cudaStream_t producer = fake().create_stream(0);
    EXPECT_TRUE(exporter_->publish(peer_, produce(producer)).has_value());
    EXPECT_TRUE(exporter_->publish(connected.peer, produce(producer)).has_value());
    fake().complete(producer);
    first = test::receive_one(*importer_);
    second = test::receive_one(*other_);
    const std::pair<cudaStream_t, cudaStream_t> streams{fake().create_stream(0),
                                                        fake().create_stream(0)};
    fake().launch(streams.first);
    fake().launch(streams.second);
    EXPECT_TRUE(first.set_deallocation_stream(streams.first));
    EXPECT_TRUE(second.set_deallocation_stream(streams.second));
    return streams;
  }

  std::uint64_t host_waits() {
    return fake().calls(CudaEntry::kEventSynchronize) +
           fake().calls(CudaEntry::kStreamSynchronize) +
           ipc().calls(CudaIpcEntry::kEventSynchronize);
  }

  test::FakeCuda& fake() { return scope_->fake(); }
  test::FakeCudaIpc& ipc() { return scope_->ipc(); }

  int fds_before_ = 0;
  std::optional<test::FakeCudaIpcScope> scope_{std::in_place};
  std::shared_ptr<TensorPool> pool_;
  std::optional<Exporter> exporter_;
  std::optional<Importer> importer_;
  std::optional<Importer> other_;
  PeerId peer_ = 0;
};

TEST_F(IpcRoundTrip, ImportedTensorIsTheExportersDataReadOnlyWithAReadinessContract) {
  connect(4, test::PoolKind::kShareable, on_gpu());
  const cudaStream_t producer = fake().create_stream(0);
  Tensor produced = produce(producer);
  auto id = exporter_->publish(peer_, produced);
  ASSERT_TRUE(id.has_value()) << id.error().message;

  Tensor imported = test::receive_one(*importer_);
  ASSERT_TRUE(imported);
  EXPECT_NE(imported.data(), produced.data()) << "mapped anew in the importer";
  EXPECT_EQ(std::memcmp(imported.data(), produced.data(), 32 * sizeof(float)), 0);
  EXPECT_TRUE(ipc().mapped_read_only(imported.data()));
  EXPECT_EQ(imported.shape(), (std::vector<std::int64_t>{4, 8}));
  EXPECT_EQ(imported.strides(), (std::vector<std::int64_t>{32, 4}));
  EXPECT_EQ(imported.dtype().bits, 32);
  EXPECT_EQ(imported.device().device_type, kDLCUDA);
  EXPECT_EQ(imported.device().device_id, 0);
  EXPECT_TRUE(imported.is_read_only());
  EXPECT_TRUE(imported.has_readiness_stream_contract());
  EXPECT_EQ(imported.readiness_stream(), nullptr) << "streams are process-local";
  EXPECT_FALSE(imported.set_readiness_stream(producer));
  EXPECT_TRUE(imported.memory_reference()->tracks_deallocation_stream());

  // One wait on the exporter's event, nothing recorded, no host block.
  const cudaStream_t consumer = fake().create_stream(0);
  const std::uint64_t waits = ipc().calls(CudaIpcEntry::kStreamWaitEvent);
  ASSERT_TRUE(imported.synchronize_for_consumer_stream(consumer).has_value());
  EXPECT_EQ(ipc().calls(CudaIpcEntry::kStreamWaitEvent), waits + 1);
  EXPECT_EQ(fake().calls(CudaEntry::kStreamWaitEvent), 0u);
  EXPECT_EQ(host_waits(), 0u);
  EXPECT_EQ(importer_->outstanding(), 1u);
  EXPECT_EQ(exporter_->held(), 1u);
}

TEST_F(IpcRoundTrip, HostWaitBlocksUntilTheProducerFinishes) {
  connect(4, test::PoolKind::kShareable, on_gpu());
  const cudaStream_t producer = fake().create_stream(0);
  ASSERT_TRUE(exporter_->publish(peer_, produce(producer)).has_value());
  Tensor imported = test::receive_one(*importer_);
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    EXPECT_TRUE(imported.synchronize_for_host().has_value());
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(returned) << "returned before the producer's work completed";
  fake().complete(producer);
  waiter.join();
  EXPECT_TRUE(returned);
}

TEST_F(IpcRoundTrip, BlockComesBackOnlyAfterEveryDeallocationStreamWithoutAHostBlock) {
  connect(1);
  const cudaStream_t producer = fake().create_stream(0);
  ASSERT_TRUE(exporter_->publish(peer_, produce(producer)).has_value());
  fake().complete(producer);
  Tensor imported = test::receive_one(*importer_);
  const cudaStream_t first = fake().create_stream(0);
  const cudaStream_t second = fake().create_stream(0);
  for (cudaStream_t consumer : {first, second}) {
    ASSERT_TRUE(imported.synchronize_for_consumer_stream(consumer).has_value());
    fake().launch(consumer);
    ASSERT_TRUE(imported.set_deallocation_stream(consumer));
  }
  imported = Tensor();  // the last owner: the Release goes out now, with its event
  EXPECT_EQ(importer_->outstanding(), 0u);
  EXPECT_EQ(importer_->stats().release_events, 1u);
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->stats().releases == 1; }));

  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(exporter_->poll().value_or(99), 0u);
  }
  EXPECT_EQ(exporter_->held(), 1u) << "dropped before the consumers' work completed";
  EXPECT_EQ(pool_->available_blocks(), 0u);
  fake().complete(first);
  EXPECT_EQ(exporter_->poll().value_or(99), 0u);
  EXPECT_EQ(exporter_->held(), 1u) << "dropped while the second consumer still runs";
  fake().complete(second);
  EXPECT_EQ(exporter_->poll().value_or(0), 1u);
  EXPECT_EQ(exporter_->held(), 0u);
  EXPECT_EQ(pool_->available_blocks(), 1u);
  EXPECT_EQ(host_waits(), 0u) << "a host block on the hot path";
}

TEST_F(IpcRoundTrip, WithoutDeallocationStreamsTheReleaseCarriesNoEvent) {
  connect(1);
  ASSERT_TRUE(exporter_->publish(peer_, test::allocate(*pool_, {8})).has_value());
  { Tensor imported = test::receive_one(*importer_); }
  EXPECT_EQ(importer_->stats().released, 1u);
  EXPECT_EQ(importer_->stats().release_events, 0u);
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }));
  EXPECT_EQ(pool_->available_blocks(), 1u);
  EXPECT_EQ(ipc().calls(CudaIpcEntry::kIpcOpenEventHandle), 0u);
}

TEST_F(IpcRoundTrip, EachAllocationIsMappedOnceAndEventsAreReused) {
  connect(2);
  const cudaStream_t producer = fake().create_stream(0);
  const cudaStream_t consumer = fake().create_stream(0);
  for (int round = 0; round < 5; ++round) {
    ASSERT_TRUE(exporter_->publish(peer_, produce(producer)).has_value());
    fake().complete(producer);
    Tensor imported = test::receive_one(*importer_);
    fake().launch(consumer);
    ASSERT_TRUE(imported.set_deallocation_stream(consumer));
    imported = Tensor();
    fake().complete(consumer);
    ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }));
  }
  EXPECT_EQ(importer_->stats().mappings_opened, 1u);
  EXPECT_EQ(importer_->cached_mappings(), 1u);
  EXPECT_EQ(ipc().calls(CudaIpcEntry::kMemImportFromShareableHandle), 1u);
  // The exporter's readiness event comes back to its pool after each release and is reused, so
  // the importer opens it once; the importer's release events are a ring (fresh ones until it is
  // full), each opened once by the exporter.
  EXPECT_EQ(ipc().calls(CudaIpcEntry::kEventCreateWithFlags), 1u + 5u);
  EXPECT_EQ(ipc().calls(CudaIpcEntry::kIpcOpenEventHandle), 1u + 5u);
  EXPECT_EQ(ipc().live_mappings(), 2u) << "the pool's and the importer's";
  importer_.reset();
  flush_deferred_releases();
  EXPECT_EQ(ipc().live_mappings(), 1u) << "the importer's mapping goes with it";
}

TEST_F(IpcRoundTrip, LegacyHandleOfACudaMallocPoolIsOpenedOnceAndClosedAtTheEnd) {
  connect(2, test::PoolKind::kCudaIpc);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(exporter_->publish(peer_, test::allocate(*pool_, {8})).has_value());
    ASSERT_TRUE(test::receive_one(*importer_));
    ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }));
  }
  EXPECT_EQ(ipc().calls(CudaIpcEntry::kIpcOpenMemHandle), 1u);
  EXPECT_EQ(ipc().open_memory_handles(), 1u);
  importer_.reset();
  EXPECT_EQ(ipc().open_memory_handles(), 0u);
}

TEST_F(IpcRoundTrip, MemoryWithoutAllocationIdIsUnmappedAfterTheConsumersWork) {
  connect(1);
  std::vector<float> memory(64, 3.0f);
  ipc().add_memory(memory.data(), memory.size() * sizeof(float), test::FakeMemory::kDevice);
  Tensor foreign = test::wrap_memory(memory.data(), {64}, DLDevice{kDLCUDA, 0});
  ASSERT_TRUE(exporter_->publish(peer_, foreign).has_value());
  ASSERT_TRUE(exporter_->publish(peer_, foreign).has_value());
  Tensor a = test::receive_one(*importer_);
  Tensor b = test::receive_one(*importer_);
  EXPECT_EQ(ipc().open_memory_handles(), 2u) << "mapped per import";
  EXPECT_EQ(importer_->cached_mappings(), 0u);
  const cudaStream_t consumer = fake().create_stream(0);
  fake().launch(consumer);
  ASSERT_TRUE(a.set_deallocation_stream(consumer));
  a = Tensor();
  b = Tensor();  // no deallocation stream: unmapped at once
  EXPECT_EQ(ipc().open_memory_handles(), 1u) << "unmapped under the consumer's kernel";
  fake().complete(consumer);
  flush_deferred_releases();
  EXPECT_EQ(ipc().open_memory_handles(), 0u);
}

// CUDA calls a free of legacy IPC memory before the importer's cudaIpcCloseMemHandle undefined:
// memory outside a pool is mapped for one import, and that mapping is closed before its Release
// lets the exporter's claim (the memory's last hold) go. The release thread rests long here, so
// that a Release sent ahead of the close would let the claim drop first.
TEST_F(IpcRoundTrip, ALegacyMappingOfMemoryOutsideAPoolIsClosedBeforeItsRelease) {
  const ReleaseThreadOptions before = release_thread_options();
  ReleaseThreadOptions slow = before;
  slow.poll_interval = std::chrono::milliseconds(200);
  ASSERT_TRUE(set_release_thread_options(slow).has_value());
  connect(1);
  std::vector<float> memory(64, 3.0f);
  ipc().add_memory(memory.data(), memory.size() * sizeof(float), test::FakeMemory::kDevice);
  ASSERT_TRUE(
      exporter_->publish(peer_, test::wrap_memory(memory.data(), {64}, DLDevice{kDLCUDA, 0}))
          .has_value());
  Tensor imported = test::receive_one(*importer_);
  ASSERT_EQ(ipc().open_memory_handles(), 1u);
  const cudaStream_t consumer = fake().create_stream(0);
  fake().launch(consumer);
  ASSERT_TRUE(imported.set_deallocation_stream(consumer));
  imported = Tensor();
  fake().complete(consumer);
  std::size_t open_at_drop = 99;
  EXPECT_TRUE(test::poll_until(*exporter_, [&] {
    open_at_drop = ipc().open_memory_handles();  // read before the claim is seen gone
    return exporter_->held() == 0;
  }));
  EXPECT_EQ(open_at_drop, 0u) << "the exporter's claim went while the importer had it mapped";
  ASSERT_TRUE(set_release_thread_options(before).has_value());
}

TEST_F(IpcRoundTrip, UnknownDeviceIsRefusedAndGivenBackAtOnce) {
  connect(1);
  ASSERT_TRUE(exporter_->publish(peer_, test::allocate(*pool_, {8})).has_value());
  // The importer's device 0 is another GPU than the exporter's.
  ipc().set_uuid(
      0, std::array<std::uint8_t, 16>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  auto received = importer_->receive(1000);
  ASSERT_FALSE(received.has_value());
  EXPECT_EQ(received.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(received.error().message,
            "ipc import: the exporter's device GPU-face000d-c0da-0000-0000-000000000000 is not "
            "one of the 1 CUDA devices this process sees");
  EXPECT_EQ(importer_->stats().refused, 1u);
  EXPECT_EQ(importer_->outstanding(), 0u);
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }));
  EXPECT_EQ(pool_->available_blocks(), 1u);
  EXPECT_EQ(ipc().live_mappings(), 1u) << "nothing was mapped for it";
}

TEST_F(IpcRoundTrip, HandleKindAndDescriptorMustAgree) {
  connect(1);
  Tensor tensor = test::allocate(*pool_, {8});
  auto exported = export_tensor(tensor, 1000);
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  const TensorDescriptor valid = exported->descriptor();
  // Each case as a new export (1000, 1001, ...): one given back is never imported again.
  std::uint64_t next_export = 1000;
  auto expect = [&](TensorDescriptor d, UniqueFd fd, ErrorCode code, const std::string& message) {
    d.export_id = next_export++;
    auto imported = import_tensor(d, std::move(fd), *importer_);
    ASSERT_FALSE(imported.has_value());
    EXPECT_EQ(imported.error().code, code);
    EXPECT_EQ(imported.error().message, message);
  };
  TensorDescriptor unnamed = valid;
  unnamed.allocation_id = 0;
  expect(unnamed, UniqueFd(), ErrorCode::kInvalidArgument,
         "ipc import: handle kind kPosixFd needs the allocation's file descriptor, and none came");
  expect(valid, UniqueFd(), ErrorCode::kInvalidArgument,
         "ipc import: export 1001 came without the file descriptor of allocation " +
             std::to_string(valid.allocation_id) + ", which is not mapped here");
  TensorDescriptor legacy = valid;
  legacy.handle_kind = MemoryHandleKind::kCudaIpc;
  const int stray = ::fcntl(exported->fd(), F_DUPFD_CLOEXEC, 0);
  expect(legacy, UniqueFd(stray), ErrorCode::kInvalidArgument,
         "ipc import: handle kind kCudaIpc carries no file descriptor, but one came (it is "
         "closed)");
  EXPECT_EQ(::fcntl(stray, F_GETFD), -1) << "the stray descriptor was not closed";
  TensorDescriptor fake_kind = valid;
  fake_kind.handle_kind = MemoryHandleKind::kFake;
  expect(fake_kind, UniqueFd(), ErrorCode::kNotImplemented,
         "ipc import: handle kind kFake names no memory (protocol tests only)");
  TensorDescriptor mangled = valid;
  mangled.offset = mangled.allocation_bytes;
  expect(mangled, UniqueFd(), ErrorCode::kInvalidArgument,
         "ipc descriptor: offset 65536 with shape and strides addresses bytes outside the "
         "allocation's [0, 65536)");
  EXPECT_EQ(importer_->stats().refused, 5u);
  EXPECT_EQ(importer_->stats().released, 5u) << "each refusal is given back";
  ASSERT_TRUE(test::poll_until(*exporter_, [&] {
    return exporter_->stats().ignored_releases == 5;
  })) << "the exporter never published ids 1000-1004, so it ignores those releases";
  EXPECT_EQ(ipc().calls(CudaIpcEntry::kMemImportFromShareableHandle), 0u) << "nothing mapped";
}

TEST_F(IpcRoundTrip, ImportsOutliveTheImporterAndTheChannelClosesAfterTheLast) {
  connect(1);
  ASSERT_TRUE(exporter_->publish(peer_, test::allocate(*pool_, {8})).has_value());
  Tensor imported = test::receive_one(*importer_);
  importer_.reset();
  for (int i = 0; i < 3; ++i) {
    (void)exporter_->poll();
  }
  EXPECT_TRUE(exporter_->connected(peer_)) << "closed while an import is alive";
  EXPECT_EQ(exporter_->held(), 1u);
  imported = Tensor();
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return !exporter_->connected(peer_); }));
  EXPECT_EQ(exporter_->held(), 0u) << "the Release came before the end-of-file";
  EXPECT_EQ(exporter_->stats().releases, 1u);
  EXPECT_EQ(pool_->available_blocks(), 1u);
  // Forgotten once its last claim came back, the peer still reads as one that hung up.
  auto late = exporter_->publish(peer_, test::allocate(*pool_, {8}));
  ASSERT_FALSE(late.has_value());
  EXPECT_EQ(late.error().code, ErrorCode::kClosed) << late.error().message;
  auto unknown = exporter_->publish(peer_ + 1, test::allocate(*pool_, {8}));
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound) << unknown.error().message;
}

// An Importer destroyed with Publishes it never read: each is given back (the exporter's claim
// and its block come back at once, not when this process exits), and the exporter's later
// publishes are refused instead of piling up claims on a connection nobody reads, while the
// imports made before still give their exports back as they drop.
TEST_F(IpcRoundTrip, AnImporterDestroyedGivesBackWhatItNeverReadAndTakesNoMore) {
  connect(3);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(exporter_->publish(peer_, test::allocate(*pool_, {8})).has_value());
  }
  Tensor imported = test::receive_one(*importer_);
  importer_.reset();  // the second Publish was never read
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 1; }))
      << "the unread Publish's claim waits for this process to exit";
  EXPECT_EQ(pool_->available_blocks(), 2u);
  EXPECT_EQ(exporter_->stats().refused_exports, 1u);
  EXPECT_TRUE(exporter_->connected(peer_)) << "closed while an import is alive";

  auto late = exporter_->publish(peer_, test::allocate(*pool_, {8}));
  ASSERT_FALSE(late.has_value()) << "a publish to an Importer that is gone was taken";
  EXPECT_EQ(late.error().code, ErrorCode::kClosed) << late.error().message;
  EXPECT_EQ(exporter_->held(), 1u) << "the refused publish left a claim";
  EXPECT_EQ(pool_->available_blocks(), 2u);

  imported = Tensor();
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return !exporter_->connected(peer_); }));
  EXPECT_EQ(exporter_->held(), 0u);
  EXPECT_EQ(pool_->available_blocks(), 3u);
}

// A child forked without exec holds a copy of the Importer over the same socket: its copy going
// away (at the child's exit) leaves the parent's connection as it was, receiving.
TEST_F(IpcRoundTrip, AForkedChildDroppingItsCopyOfTheImporterLeavesTheParentsReceiving) {
  connect(2);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    importer_.reset();  // no mapping or event is held yet: nothing of the fake runtime is called
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  ASSERT_TRUE(exporter_->publish(peer_, test::allocate(*pool_, {8})).has_value())
      << "the child's copy shut the parent's connection";
  Tensor imported = test::receive_one(*importer_);
  EXPECT_TRUE(imported);
  EXPECT_EQ(exporter_->stats().refused_exports, 0u);
}

// A child forked without exec holds a copy of the Exporter over the same sockets: its copy going
// away reads none of the Releases waiting there, which are the parent's. (It read them: the
// parent then held the claim, and the pool block, until the importing process exited.)
TEST_F(IpcRoundTrip, AForkedChildDroppingItsCopyOfTheExporterLeavesTheReleasesToTheParent) {
  connect(2);
  ASSERT_TRUE(exporter_->publish(peer_, test::allocate(*pool_, {8})).has_value());
  test::receive_one(*importer_);  // dropped at once: its Release goes out, no point to wait for
  flush_deferred_releases();
  pollfd release_waiting{exporter_->fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&release_waiting, 1, 5000), 1) << "no Release reached the exporter's socket";
  ASSERT_EQ(exporter_->held(), 1u);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    exporter_.reset();
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }))
      << "the child's copy read the parent's Release";
  EXPECT_EQ(pool_->available_blocks(), 2u);
}

// A child forked without exec holds a copy of the Exporter with the release events it opened:
// destroying them there would call CUDA, which a forked child cannot use; they are left to its
// exit (the parent closes its own).
TEST_F(IpcRoundTrip, AForkedChildDroppingItsCopyOfTheExporterCallsNoCuda) {
  connect(1);
  const cudaStream_t producer = fake().create_stream(0);
  ASSERT_TRUE(exporter_->publish(peer_, produce(producer)).has_value());
  fake().complete(producer);
  Tensor imported = test::receive_one(*importer_);
  const cudaStream_t consumer = fake().create_stream(0);
  ASSERT_TRUE(imported.synchronize_for_consumer_stream(consumer).has_value());
  fake().launch(consumer);
  ASSERT_TRUE(imported.set_deallocation_stream(consumer));
  const std::uint64_t opened = ipc().calls(CudaIpcEntry::kIpcOpenEventHandle);
  imported = Tensor();  // the Release goes out with its event, which the exporter opens
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->stats().releases == 1; }));
  ASSERT_EQ(ipc().calls(CudaIpcEntry::kIpcOpenEventHandle), opened + 1);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::uint64_t destroyed = ipc().calls(CudaIpcEntry::kEventDestroy);
    exporter_.reset();
    ::_exit(ipc().calls(CudaIpcEntry::kEventDestroy) == destroyed ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child's copy destroyed an opened event (status " << status << ")";
  fake().complete(consumer);
  EXPECT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }));
}

// A child forked without exec holds copies of the parent's imports: one dropped there gives
// nothing back, since the parent still reads the block. (Its Release let the exporter reuse the
// block under the parent's reads.)
TEST_F(IpcRoundTrip, AForkedChildDroppingItsCopyOfAnImportGivesNothingBack) {
  connect(2);
  ASSERT_TRUE(exporter_->publish(peer_, test::allocate(*pool_, {8})).has_value());
  Tensor imported = test::receive_one(*importer_);
  ASSERT_TRUE(imported);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    imported = Tensor();
    flush_deferred_releases();
    ::_exit(pending_deferred_releases() == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(exporter_->poll().has_value());
  }
  EXPECT_EQ(exporter_->held(), 1u) << "the child's copy gave the parent's import back";
  EXPECT_EQ(pool_->available_blocks(), 1u) << "the block was free under the parent's import";
  imported = Tensor();
  EXPECT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }));
}

// The exporter hangs up while nothing waits to be sent: poll() says kClosed, as documented
// (it said so only once a Release failed to go out).
TEST_F(IpcRoundTrip, PollSaysClosedOnceTheExporterHungUpWithNothingQueued) {
  connect(1);
  ASSERT_TRUE(importer_->poll().has_value());
  exporter_.reset();
  auto polled = importer_->poll();
  ASSERT_FALSE(polled.has_value()) << "poll() missed the hang-up";
  EXPECT_EQ(polled.error().code, ErrorCode::kClosed) << polled.error().message;
  EXPECT_FALSE(importer_->poll().has_value()) << "a later poll() forgot the hang-up";
}

TEST_F(IpcRoundTrip, FanOutToTwoImportersReturnsTheBlockAfterBoth) {
  connect(1);
  auto second = test::connect_importer(*exporter_);
  ASSERT_TRUE(second.importer.has_value());
  other_.emplace(std::move(*second.importer));
  const cudaStream_t producer = fake().create_stream(0);
  {
    Tensor produced = produce(producer);
    ASSERT_TRUE(exporter_->publish(peer_, produced).has_value());
    ASSERT_TRUE(exporter_->publish(second.peer, produced).has_value());
  }
  fake().complete(producer);
  Tensor a = test::receive_one(*importer_);
  Tensor b = test::receive_one(*other_);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), 32 * sizeof(float)), 0);
  a = Tensor();
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 1; }));
  EXPECT_EQ(pool_->available_blocks(), 0u) << "reused while the second importer reads it";
  b = Tensor();
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }));
  EXPECT_EQ(pool_->available_blocks(), 1u);
}

// A consumer stream that waited on a dead exporter's event never runs again
// (ReadinessWait::kOnGpu), nor do the deallocation points recorded on it. Each connection has its
// own release stream, so such a point holds back its own connection's Release only, never a later
// one of another.
TEST_F(IpcRoundTrip, AConsumerStreamThatNeverRunsAgainHoldsBackOnlyItsOwnConnectionsRelease) {
  Tensor stuck;
  Tensor healthy;
  const auto [stuck_stream, healthy_stream] = one_busy_import_per_connection(stuck, healthy);
  ASSERT_FALSE(HasFailure());
  stuck = Tensor();  // its release waits are queued first
  healthy = Tensor();
  EXPECT_EQ(importer_->stats().release_events, 1u);
  EXPECT_EQ(other_->stats().release_events, 1u);

  fake().complete(healthy_stream);
  EXPECT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 1; }))
      << "a release waited behind another connection's consumer stream that has not run";
  EXPECT_EQ(pool_->available_blocks(), 1u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(exporter_->poll().value_or(99), 0u);
  }
  EXPECT_EQ(exporter_->held(), 1u) << "the stuck import's block came back before its consumer ran";
  fake().complete(stuck_stream);
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }));
  EXPECT_EQ(pool_->available_blocks(), 2u);
  EXPECT_EQ(host_waits(), 0u) << "a host block on the hot path";
}

TEST_F(IpcRoundTrip, ReleasesNamingNoClaimAreIgnoredAndDropNothing) {
  pool_ = test::make_device_pool(1024, 1, test::PoolKind::kShareable);
  ASSERT_NE(pool_, nullptr);
  auto ends = Channel::pair();
  ASSERT_TRUE(ends.has_value());
  Channel raw = std::move(ends->second);
  std::thread hello([&] {
    EXPECT_TRUE(raw.send(Hello{static_cast<std::uint32_t>(::getpid()), kProtocolVersion}, 5000));
    auto got = raw.receive(5000);
    EXPECT_TRUE(got && *got && std::holds_alternative<Hello>(**got));
  });
  auto peer = exporter_->add_peer(std::move(ends->first), 5000);
  hello.join();
  ASSERT_TRUE(peer.has_value()) << peer.error().message;
  auto id = exporter_->publish(*peer, test::allocate(*pool_, {8}));
  ASSERT_TRUE(id.has_value());
  auto publish = raw.receive(1000);  // the descriptor and its fd, closed unread
  ASSERT_TRUE(publish && *publish);
  Release unknown;
  unknown.export_id = *id + 1;
  ASSERT_TRUE(raw.send(unknown, 1000));
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->stats().releases == 1; }));
  EXPECT_EQ(exporter_->stats().ignored_releases, 1u);
  EXPECT_EQ(exporter_->held(), 1u);
  Release real;
  real.export_id = *id;
  ASSERT_TRUE(raw.send(real, 1000));
  ASSERT_TRUE(raw.send(real, 1000));  // again: a double release
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->stats().releases == 3; }));
  EXPECT_EQ(exporter_->stats().ignored_releases, 2u);
  EXPECT_EQ(exporter_->stats().dropped, 1u);
  EXPECT_EQ(exporter_->held(), 0u);
  EXPECT_EQ(pool_->available_blocks(), 1u);
  ASSERT_TRUE(raw.send(Hello{1, kProtocolVersion}, 1000));  // out of place after the handshake
  ASSERT_TRUE(
      test::poll_until(*exporter_, [&] { return exporter_->stats().refused_messages == 1; }));
}

TEST_F(IpcRoundTrip, PublishNeverWaitsForASlowImporter) {
  connect(1);
  Tensor tensor = test::allocate(*pool_, {8});
  std::size_t published = 0;
  expected<std::uint64_t, Error> last = 0;
  const auto start = std::chrono::steady_clock::now();
  while (published < 100000 && (last = exporter_->publish(peer_, tensor))) {
    ++published;
  }
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(last.has_value()) << "the socket never filled";
  EXPECT_EQ(last.error().code, ErrorCode::kNotReady) << last.error().message;
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_EQ(exporter_->held(), published) << "the refused publish kept its claim";
  for (std::size_t i = 0; i < published; ++i) {
    Tensor imported = test::receive_one(*importer_);
    ASSERT_TRUE(imported);
  }
  tensor = Tensor();
  // The releases may have filled the other direction: the importer sends the rest as it polls.
  ASSERT_TRUE(test::poll_until(*exporter_, [&] {
    (void)importer_->poll();
    return exporter_->held() == 0;
  }));
  EXPECT_EQ(importer_->queued_releases(), 0u);
  EXPECT_EQ(pool_->available_blocks(), 1u);
}

// The exporter's process exits while another process (a launcher that made the socket pair)
// keeps a copy of its end: the socket never hangs up, so before the fix the importer waited out
// every receive() (for ever without a limit), poll() said the exporter was there, and the
// mappings of its allocations stayed. The Hello's pidfd says the process exited.
TEST(IpcExporterExit, AnImporterLearnsItsExporterExitedWhileAnotherProcessHoldsItsEnd) {
  test::FakeCudaIpcScope scope;
  auto pool = test::make_device_pool(1024, 2, test::PoolKind::kShareable);
  ASSERT_NE(pool, nullptr);
  auto ends = Channel::pair();
  ASSERT_TRUE(ends.has_value());
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(go[1]);
    auto exporter = Exporter::create();
    auto peer = exporter ? exporter->add_peer(std::move(ends->first), 10000)
                         : expected<PeerId, Error>(make_unexpected(exporter.error()));
    const bool published = peer.has_value() &&
                           exporter->publish(*peer, test::allocate(*pool, {8})).has_value() &&
                           exporter->publish(*peer, test::allocate(*pool, {8})).has_value();
    char told = 0;
    const ssize_t read = ::read(go[0], &told, 1);  // until told to exit, its last Publish unread
    ::_exit(published && read >= 0 ? 0 : 1);
  }
  ::close(go[0]);
  // This process keeps its copy of the exporter's end, ends->first, open throughout.
  auto importer = Importer::create(std::move(ends->second), 10000);
  ASSERT_TRUE(importer.has_value()) << importer.error().message;
  Tensor first = test::receive_one(*importer);
  ASSERT_TRUE(first);
  first = Tensor();
  flush_deferred_releases();
  EXPECT_EQ(importer->cached_mappings(), 1u);
  ::close(go[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // What it sent before it exited is still read, then the exit is reported.
  Tensor second = test::receive_one(*importer);
  EXPECT_TRUE(second);
  const auto started = std::chrono::steady_clock::now();
  auto after = importer->receive(5000);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  ASSERT_FALSE(after.has_value()) << (*after ? "a tensor" : "a timeout");
  EXPECT_EQ(after.error().code, ErrorCode::kClosed);
  EXPECT_EQ(after.error().message, "ipc importer: the exporter's process has exited");
  auto polled = importer->poll();
  ASSERT_FALSE(polled.has_value());
  EXPECT_EQ(polled.error().code, ErrorCode::kClosed);
  second = Tensor();
  flush_deferred_releases();
  EXPECT_EQ(importer->cached_mappings(), 0u);  // no exporter left to publish them again
}

// An honest exporter names at most kRememberedAllocations allocations whose fd it counts as sent;
// a caller's import_tensor of another allocation (its descriptor and fd came another way) was
// cached among them and pushed the oldest channel mapping out, so the exporter's next Publish of
// that allocation, without its fd, was refused (a tensor lost). The caller's mappings are bounded
// apart now.
TEST(IpcCallersImports, NeverPushOutAMappingTheExporterCountsAsSent) {
  test::FakeCudaIpcScope scope;
  auto exporter = Exporter::create();
  ASSERT_TRUE(exporter.has_value());
  auto connected = test::connect_importer(*exporter);
  ASSERT_TRUE(connected.importer.has_value());
  Importer& importer = *connected.importer;
  std::vector<std::shared_ptr<TensorPool>> pools;
  for (std::size_t i = 0; i < kRememberedAllocations; ++i) {
    pools.push_back(test::make_device_pool(1024, 1, test::PoolKind::kShareable));
    ASSERT_TRUE(exporter->publish(connected.peer, test::allocate(*pools.back(), {8})));
    EXPECT_TRUE(static_cast<bool>(test::receive_one(importer)));
  }
  ASSERT_TRUE(test::poll_until(*exporter, [&] { return exporter->held() == 0; }));
  EXPECT_EQ(importer.cached_mappings(), kRememberedAllocations);
  auto extra = test::make_device_pool(1024, 1, test::PoolKind::kShareable);
  {
    Tensor tensor = test::allocate(*extra, {8});
    auto exported = export_tensor(tensor, 1000000);
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    auto imported = import_tensor(exported->descriptor(),
                                  UniqueFd(::fcntl(exported->fd(), F_DUPFD_CLOEXEC, 0)), importer);
    ASSERT_TRUE(imported.has_value()) << imported.error().message;
  }
  flush_deferred_releases();
  // Every allocation the exporter counts as sent is published again, without its fd.
  const auto refused_before = importer.stats().refused;
  for (const auto& pool : pools) {
    ASSERT_TRUE(exporter->publish(connected.peer, test::allocate(*pool, {8})));
    auto received = importer.receive(1000);
    ASSERT_TRUE(received.has_value()) << received.error().message;
    EXPECT_TRUE(received->has_value());
  }
  EXPECT_EQ(importer.stats().refused, refused_before);
  connected.importer.reset();
  EXPECT_TRUE(test::poll_until(*exporter, [&] { return exporter->held() == 0; }));
}

// The importer's side of the test above: a child forked without exec that drops its copy of an
// import with a deallocation point, then its copy of the Importer, made the CUDA calls of a
// Release (a release stream, a wait, an event recorded) and unmapped the parent's VMM mapping
// (cuMemUnmap, cuMemRelease), CUDA calls a forked child cannot make. It calls none now.
TEST(IpcForkedChild, DroppingItsCopiesOfAnImportAndTheImporterCallsNoCuda) {
  test::FakeCudaIpcScope scope;
  test::LocalLink link = test::local_link(2);
  ASSERT_TRUE(link.ok());
  ASSERT_TRUE(link.exporter->publish(link.peer, test::allocate(*link.pool, {8})).has_value());
  Tensor imported = test::receive_one(*link.importer);
  ASSERT_TRUE(imported);
  const cudaStream_t consumer = scope.fake().create_stream(0);
  scope.fake().launch(consumer);
  ASSERT_TRUE(imported.set_deallocation_stream(consumer));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto& ipc = scope.ipc();
    const CudaIpcEntry counted[] = {CudaIpcEntry::kStreamCreateWithFlags,
                                    CudaIpcEntry::kStreamWaitEvent,
                                    CudaIpcEntry::kEventRecord,
                                    CudaIpcEntry::kEventCreateWithFlags,
                                    CudaIpcEntry::kMemUnmap,
                                    CudaIpcEntry::kMemRelease};
    std::uint64_t before[6];
    for (int i = 0; i < 6; ++i) {
      before[i] = ipc.calls(counted[i]);
    }
    imported = Tensor();
    link.importer.reset();
    scope.fake().complete(consumer);
    flush_deferred_releases();
    int made = 0;
    for (int i = 0; i < 6; ++i) {
      made |= ipc.calls(counted[i]) != before[i] ? 1 << i : 0;
    }
    ::_exit(made);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "CUDA calls in the child, by bit: 1 stream create, 2 stream wait, 4 event record, "
         "8 event create, 16 cuMemUnmap, 32 cuMemRelease";
  // The parent's copies are whole: its drop gives the export back as ever.
  scope.fake().complete(consumer);
  imported = Tensor();
  link.importer.reset();
  EXPECT_TRUE(test::poll_until(*link.exporter, [&] { return link.exporter->held() == 0; }));
}

}  // namespace
}  // namespace holoscan::ipc
