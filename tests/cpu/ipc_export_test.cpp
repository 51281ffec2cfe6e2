// Covers export_tensor on the fake runtimes: what the descriptor says for each kind of shareable
// memory, the readiness event and when it is recorded, and the refusal of every kind of memory
// that cannot cross a process boundary (no event is left behind by a refusal).
#include <cuda.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "holoscan/ipc.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/fake_cuda_ipc.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_peers.hpp"

namespace holoscan::ipc {
namespace {

using test::CudaEntry;
using test::CudaIpcEntry;
using test::FakeMemory;

class IpcExport : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(pending_deferred_releases(), 0u); }

  static bool event_done(const std::array<std::uint8_t, kIpcHandleBytes>& handle) {
    return test::FakeCudaIpc::event_done(handle);
  }

  void expect_refused(const Tensor& tensor, ErrorCode code, const std::string& message) {
    const std::uint64_t events = scope_.ipc().calls(CudaIpcEntry::kEventCreateWithFlags);
    auto exported = export_tensor(tensor, 1);
    ASSERT_FALSE(exported.has_value()) << "exported memory that cannot be shared";
    EXPECT_EQ(exported.error().code, code) << exported.error().message;
    EXPECT_EQ(exported.error().message, message);
    EXPECT_EQ(scope_.ipc().calls(CudaIpcEntry::kEventCreateWithFlags), events);
  }

  test::FakeCudaIpcScope scope_;
};

TEST_F(IpcExport, ShareablePoolBlockTravelsWithThePoolsDescriptor) {
  auto pool = test::make_device_pool(1024, 4, test::PoolKind::kShareable);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(scope_.ipc().calls(CudaIpcEntry::kMemCreate), 1u);
  EXPECT_EQ(scope_.ipc().calls(CudaIpcEntry::kMemExportToShareableHandle), 1u);
  Tensor first = test::allocate(*pool, {4, 8});
  Tensor second = test::allocate(*pool, {4, 8});
  const cudaStream_t producer = scope_.fake().create_stream(0);
  scope_.fake().launch(producer);
  ASSERT_TRUE(second.set_readiness_stream(producer));

  auto exported = export_tensor(second, 7);
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  const TensorDescriptor& d = exported->descriptor();
  EXPECT_EQ(d.handle_kind, MemoryHandleKind::kPosixFd);
  EXPECT_EQ(d.export_id, 7u);
  EXPECT_NE(d.allocation_id, 0u);
  EXPECT_EQ(d.allocation_bytes, test::FakeCudaIpc::kGranularity);  // 4 KiB rounded up
  EXPECT_EQ(d.offset, 1024u);
  EXPECT_EQ(d.device_uuid, test::FakeCudaIpc::default_uuid(0));
  EXPECT_EQ(d.dtype.code, kDLFloat);
  EXPECT_EQ(d.shape, (std::vector<std::int64_t>{4, 8}));
  EXPECT_EQ(d.strides, (std::vector<std::int64_t>{8, 1}));
  EXPECT_EQ(d.dlpack_flags, std::uint64_t{DLPACK_FLAG_BITMASK_READ_ONLY});
  EXPECT_EQ(d.exporter_pid, static_cast<std::uint32_t>(::getpid()));
  ASSERT_TRUE(d.has_readiness_event);
  EXPECT_GE(exported->fd(), 0);

  // The pool's one descriptor is lent to every export; nothing is exported again.
  auto again = export_tensor(first, 8);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(again->fd(), exported->fd());
  EXPECT_EQ(again->descriptor().allocation_id, d.allocation_id);
  EXPECT_EQ(again->descriptor().offset, 0u);
  EXPECT_FALSE(again->descriptor().has_readiness_event) << "the first block has no readiness";
  EXPECT_EQ(scope_.ipc().calls(CudaIpcEntry::kMemExportToShareableHandle), 1u);

  // The readiness event covers the producer's work queued before the export.
  EXPECT_FALSE(event_done(d.readiness_event));
  scope_.fake().complete(producer);
  EXPECT_TRUE(event_done(d.readiness_event));
}

TEST_F(IpcExport, AnExportHoldsItsBlockUntilItIsDestroyed) {
  auto pool = test::make_device_pool(1024, 2, test::PoolKind::kShareable);
  ASSERT_NE(pool, nullptr);
  auto exported = export_tensor(test::allocate(*pool, {16}), 1);
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  EXPECT_EQ(pool->available_blocks(), 1u) << "the export's claim keeps the block";
  exported = export_tensor(test::allocate(*pool, {16}), 2);  // the first export is dropped
  ASSERT_TRUE(exported.has_value());
  EXPECT_EQ(pool->available_blocks(), 1u);
  { ExportedTensor gone = std::move(*exported); }
  EXPECT_EQ(pool->available_blocks(), 2u);
}

TEST_F(IpcExport, ReadinessOnAnotherStreamIsOrderedAfterTheProducer) {
  auto pool = test::make_device_pool(1024, 1, test::PoolKind::kShareable);
  ASSERT_NE(pool, nullptr);
  Tensor tensor = test::allocate(*pool, {16});
  const cudaStream_t producer = scope_.fake().create_stream(0);
  const cudaStream_t other = scope_.fake().create_stream(0);
  ASSERT_TRUE(tensor.set_readiness_stream(producer));

  const std::uint64_t waits = scope_.fake().calls(CudaEntry::kStreamWaitEvent);
  auto on_producer = export_tensor(tensor, 1, producer);
  ASSERT_TRUE(on_producer.has_value()) << on_producer.error().message;
  EXPECT_EQ(scope_.fake().calls(CudaEntry::kStreamWaitEvent), waits) << "same stream: no wait";
  auto on_other = export_tensor(tensor, 2, other);
  ASSERT_TRUE(on_other.has_value()) << on_other.error().message;
  EXPECT_EQ(scope_.fake().calls(CudaEntry::kStreamWaitEvent), waits + 1);
  EXPECT_EQ(scope_.ipc().calls(CudaIpcEntry::kEventRecord), 2u);
}

TEST_F(IpcExport, WithoutReadinessNoEventIsRecorded) {
  auto pool = test::make_device_pool(1024, 1, test::PoolKind::kShareable);
  ASSERT_NE(pool, nullptr);
  auto exported = export_tensor(test::allocate(*pool, {16}), 1);
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  EXPECT_FALSE(exported->descriptor().has_readiness_event);
  EXPECT_EQ(scope_.ipc().calls(CudaIpcEntry::kEventRecord), 0u);
}

TEST_F(IpcExport, CudaMallocPoolTravelsAsOneLegacyHandle) {
  auto pool = test::make_device_pool(512, 4, test::PoolKind::kCudaIpc);
  ASSERT_NE(pool, nullptr);
  Tensor a = test::allocate(*pool, {8});
  Tensor b = test::allocate(*pool, {8});
  auto first = export_tensor(a, 1);
  auto second = export_tensor(b, 2);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  ASSERT_TRUE(second.has_value()) << second.error().message;
  EXPECT_EQ(first->descriptor().handle_kind, MemoryHandleKind::kCudaIpc);
  EXPECT_EQ(first->fd(), -1);
  EXPECT_NE(first->descriptor().allocation_id, 0u);
  EXPECT_EQ(first->descriptor().allocation_bytes, 2048u);
  EXPECT_EQ(first->descriptor().handle_bytes, second->descriptor().handle_bytes);
  EXPECT_EQ(second->descriptor().offset - first->descriptor().offset, 512u);
  EXPECT_EQ(scope_.ipc().calls(CudaIpcEntry::kIpcGetMemHandle), 1u) << "asked for once per pool";
}

TEST_F(IpcExport, PoolWithoutAProviderOfThisLibraryTravelsAsAnyCudaMallocMemory) {
  // Its allocation is the core's: the exporter asks the driver, as for memory it knows nothing of.
  auto pool = test::make_device_pool(512, 2, test::PoolKind::kPlain);
  ASSERT_NE(pool, nullptr);
  Tensor a = test::allocate(*pool, {8});
  Tensor b = test::allocate(*pool, {8});
  auto first = export_tensor(a, 1);
  auto second = export_tensor(b, 2);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  ASSERT_TRUE(second.has_value()) << second.error().message;
  EXPECT_EQ(first->descriptor().handle_kind, MemoryHandleKind::kCudaIpc);
  EXPECT_EQ(first->descriptor().allocation_id, 0u) << "no id: importers must not cache it";
  EXPECT_EQ(first->descriptor().allocation_bytes, 1024u) << "the driver's view: the whole pool";
  EXPECT_EQ(scope_.ipc().calls(CudaIpcEntry::kIpcGetMemHandle), 2u) << "asked for per export";
  EXPECT_EQ(scope_.ipc().calls(CudaIpcEntry::kPointerGetAttributes), 2u);
}

TEST_F(IpcExport, CudaMallocMemoryOutsideAPoolIsMappedPerExport) {
  std::vector<float> memory(64);
  scope_.ipc().add_memory(memory.data(), memory.size() * sizeof(float), FakeMemory::kDevice);
  Tensor tensor = test::wrap_memory(memory.data() + 16, {16}, DLDevice{kDLCUDA, 0});
  auto exported = export_tensor(tensor, 1);
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  EXPECT_EQ(exported->descriptor().handle_kind, MemoryHandleKind::kCudaIpc);
  EXPECT_EQ(exported->descriptor().allocation_id, 0u) << "no id: importers must not cache it";
  EXPECT_EQ(exported->descriptor().allocation_bytes, memory.size() * sizeof(float));
  EXPECT_EQ(exported->descriptor().offset, 16 * sizeof(float));
}

// An export holds the memory reference it exported, and its claim there: a holder that puts
// another reference into the shared context (the member is public) neither frees the memory the
// importer maps nor makes the export's claim land on the newcomer.
TEST_F(IpcExport, AnExportKeepsItsReferenceWhenTheContextsIsReplaced) {
  std::vector<float> memory(64);
  scope_.ipc().add_memory(memory.data(), memory.size() * sizeof(float), FakeMemory::kDevice);
  Tensor tensor = test::wrap_memory(memory.data(), {16}, DLDevice{kDLCUDA, 0});
  // An import's owner lives by its holds: the export keeps it (AddressSanitizer checks the reads
  // through this pointer), though its shared_ptr goes with the last Tensor.
  const auto* original =
      dynamic_cast<const StreamTrackedReference*>(tensor.memory_reference().get());
  ASSERT_NE(original, nullptr);
  auto exported = export_tensor(tensor, 1);
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  auto replacement = std::make_shared<DLManagedMemoryBufferVersioned>(nullptr);
  tensor.release_handle();  // the Tensor's claim moves with the reference, as a holder would
  tensor.dl_ctx()->memory_reference = replacement;
  tensor.retain_handle();
  tensor = Tensor();
  EXPECT_EQ(original->handle_claims(), 1);  // the export's
  EXPECT_EQ(original->unpaired_releases(), 0u);
  { ExportedTensor gone = std::move(*exported); }
  EXPECT_EQ(replacement->handle_claims(), 0);
  EXPECT_EQ(replacement->unpaired_releases(), 0u);
}

TEST_F(IpcExport, VmmMemoryOutsideAPoolTravelsAsAFreshDescriptor) {
  test::VmmBuffer vmm(4096);
  ASSERT_NE(vmm.data(), nullptr);
  Tensor tensor = test::wrap_memory(vmm.data(), {64}, DLDevice{kDLCUDA, 0});
  {
    auto exported = export_tensor(tensor, 1);
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    EXPECT_EQ(exported->descriptor().handle_kind, MemoryHandleKind::kPosixFd);
    EXPECT_EQ(exported->descriptor().allocation_id, 0u);
    EXPECT_EQ(exported->descriptor().allocation_bytes, test::FakeCudaIpc::kGranularity);
    EXPECT_GE(exported->fd(), 0);
    EXPECT_EQ(scope_.ipc().live_allocations(), 1u) << "the retained handle is released at once";
  }
  tensor = Tensor();
}

TEST_F(IpcExport, EmptyTensorIsRefused) {
  expect_refused(Tensor(), ErrorCode::kInvalidArgument, "ipc export: the tensor is empty");
}

TEST_F(IpcExport, HostMemoryIsRefused) {
  std::vector<float> memory(16);
  expect_refused(test::wrap_memory(memory.data(), {16}, DLDevice{kDLCPU, 0}),
                 ErrorCode::kInvalidArgument,
                 "ipc export: host memory that CUDA did not allocate cannot be shared between "
                 "processes; copy it into a shareable TensorPool");
  // A tensor that claims to be on the GPU but is not: the driver knows better.
  expect_refused(test::wrap_memory(memory.data(), {16}, DLDevice{kDLCUDA, 0}),
                 ErrorCode::kInvalidArgument,
                 "ipc export: host memory that CUDA did not allocate cannot be shared between "
                 "processes; copy it into a shareable TensorPool");
}

TEST_F(IpcExport, PinnedHostMemoryIsRefused) {
  const std::string message =
      "ipc export: pinned host memory (cudaMallocHost, cudaHostRegister) cannot be shared "
      "between processes; copy it into a shareable TensorPool";
  std::vector<float> memory(16);
  expect_refused(test::wrap_memory(memory.data(), {16}, DLDevice{kDLCUDAHost, 0}),
                 ErrorCode::kInvalidArgument, message);
  scope_.ipc().add_memory(memory.data(), 64, FakeMemory::kPinnedHost);
  expect_refused(test::wrap_memory(memory.data(), {16}, DLDevice{kDLCUDA, 0}),
                 ErrorCode::kInvalidArgument, message);
}

TEST_F(IpcExport, ManagedMemoryIsRefused) {
  const std::string message =
      "ipc export: managed memory (cudaMallocManaged) cannot be shared between processes";
  std::vector<float> memory(16);
  expect_refused(test::wrap_memory(memory.data(), {16}, DLDevice{kDLCUDAManaged, 0}),
                 ErrorCode::kInvalidArgument, message);
  scope_.ipc().add_memory(memory.data(), 64, FakeMemory::kManaged);
  expect_refused(test::wrap_memory(memory.data(), {16}, DLDevice{kDLCUDA, 0}),
                 ErrorCode::kInvalidArgument, message);
}

TEST_F(IpcExport, DeviceMemoryCudaCannotShareIsRefused) {
  std::vector<float> memory(16);
  scope_.ipc().add_memory(memory.data(), 64, FakeMemory::kDeviceUnshareable);
  expect_refused(test::wrap_memory(memory.data(), {16}, DLDevice{kDLCUDA, 0}),
                 ErrorCode::kInvalidArgument,
                 "ipc export: this device allocation cannot be shared: CUDA reports it neither "
                 "cudaIpcGetMemHandle-capable nor exportable as a POSIX file descriptor (allocate "
                 "it from a shareable TensorPool)");
}

TEST_F(IpcExport, StreamOrderedPoolMemoryIsNotImplemented) {
  std::vector<float> memory(16);
  scope_.ipc().add_memory(memory.data(), 64, FakeMemory::kStreamOrderedPool);
  expect_refused(test::wrap_memory(memory.data(), {16}, DLDevice{kDLCUDA, 0}),
                 ErrorCode::kNotImplemented,
                 "ipc export: memory from a stream-ordered pool (cudaMallocAsync) cannot be "
                 "exported by this library (no cudaMemPoolExportPointer support); allocate it "
                 "from a shareable TensorPool");
}

TEST_F(IpcExport, HostPoolIsRefusedAndCannotBeShareable) {
  TensorPoolConfig config;
  config.memory = PoolMemory::kHost;
  config.block_bytes = 256;
  config.block_count = 1;
  auto pool = TensorPool::create(config);
  ASSERT_TRUE(pool.has_value());
  expect_refused(test::allocate(**pool, {4}), ErrorCode::kInvalidArgument,
                 "ipc export: host memory that CUDA did not allocate cannot be shared between "
                 "processes; copy it into a shareable TensorPool");
  config.memory_provider = shareable_pool_memory();
  auto shareable = TensorPool::create(config);
  ASSERT_FALSE(shareable.has_value());
  EXPECT_EQ(shareable.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(shareable.error().message,
            "TensorPool::create: only device memory comes from a memory provider");
}

TEST_F(IpcExport, RecordFailureNamesTheCallAndKeepsNoEvent) {
  auto pool = test::make_device_pool(1024, 1, test::PoolKind::kShareable);
  ASSERT_NE(pool, nullptr);
  Tensor tensor = test::allocate(*pool, {16});
  const cudaStream_t producer = scope_.fake().create_stream(0);
  ASSERT_TRUE(tensor.set_readiness_stream(producer));
  scope_.ipc().fail_next(CudaIpcEntry::kEventRecord, cudaErrorInvalidResourceHandle);
  auto exported = export_tensor(tensor, 1);
  ASSERT_FALSE(exported.has_value());
  EXPECT_EQ(exported.error().code, ErrorCode::kFailure);
  EXPECT_EQ(exported.error().provenance, std::uint64_t{cudaErrorInvalidResourceHandle});
  EXPECT_NE(exported.error().message.find("cudaEventRecord(readiness) failed: "
                                          "cudaErrorInvalidResourceHandle"),
            std::string::npos)
      << exported.error().message;
  EXPECT_EQ(pool->available_blocks(), 0u) << "the tensor itself is still held";
  tensor = Tensor();
  EXPECT_EQ(pool->available_blocks(), 1u) << "the failed export keeps no claim";
  // The event went back to its pool: the next export reuses it.
  tensor = test::allocate(*pool, {16});
  ASSERT_TRUE(tensor.set_readiness_stream(producer));
  ASSERT_TRUE(export_tensor(tensor, 2).has_value());
  EXPECT_EQ(scope_.ipc().calls(CudaIpcEntry::kEventCreateWithFlags), 1u);
}

TEST_F(IpcExport, VmmFailuresNameTheDriverCall) {
  scope_.ipc().fail_next(CudaIpcEntry::kMemCreate, CUDA_ERROR_OUT_OF_MEMORY);
  TensorPoolConfig config;
  config.block_bytes = 1024;
  config.block_count = 2;
  config.memory_provider = shareable_pool_memory();
  auto pool = TensorPool::create(config);
  ASSERT_FALSE(pool.has_value());
  EXPECT_EQ(pool.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(pool.error().message,
            "cuMemCreate failed: CUDA_ERROR_OUT_OF_MEMORY (fake driver error)");
  scope_.ipc().fail_next(CudaIpcEntry::kMemMap, CUDA_ERROR_INVALID_VALUE);
  pool = TensorPool::create(config);
  ASSERT_FALSE(pool.has_value());
  EXPECT_EQ(pool.error().code, ErrorCode::kFailure);
  EXPECT_EQ(pool.error().provenance, std::uint64_t{CUDA_ERROR_INVALID_VALUE});
  EXPECT_EQ(pool.error().message, "cuMemMap failed: CUDA_ERROR_INVALID_VALUE (fake driver error)");
}

}  // namespace
}  // namespace holoscan::ipc
