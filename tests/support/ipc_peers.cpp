#include "support/ipc_peers.hpp"

#include <gtest/gtest.h>

#include "ipc/cuda/cuda_ipc_api.hpp"
#include "ipc/transport/ipc_handshake.hpp"
#include "support/fake_cuda_ipc.hpp"

namespace holoscan::test {

std::shared_ptr<TensorPool> make_device_pool(std::size_t block_bytes, std::size_t blocks,
                                             PoolKind kind) {
  TensorPoolConfig config;
  config.memory = PoolMemory::kDevice;
  config.block_bytes = block_bytes;
  config.block_count = blocks;
  if (kind == PoolKind::kShareable) {
    config.memory_provider = ipc::shareable_pool_memory();
  } else if (kind == PoolKind::kCudaIpc) {
    config.memory_provider = ipc::cuda_ipc_pool_memory();
  }
  auto pool = TensorPool::create(config);
  EXPECT_TRUE(pool.has_value()) << pool.error().message;
  if (!pool) {
    return nullptr;
  }
  if (kind != PoolKind::kShareable) {
    // A fresh pool hands out its first block first: its address is the allocation's.
    Tensor first = allocate(**pool, {1});
    FakeCudaIpc::instance().add_memory(first.data(), (*pool)->block_bytes() * blocks,
                                       FakeMemory::kDevice, config.device);
  }
  return *pool;
}

Tensor allocate(TensorPool& pool, const std::vector<std::int64_t>& shape, DLDataType dtype) {
  auto tensor = pool.allocate(shape, dtype);
  EXPECT_TRUE(tensor.has_value()) << tensor.error().message;
  return tensor ? std::move(*tensor) : Tensor();
}

Tensor wrap_memory(void* data, const std::vector<std::int64_t>& shape, DLDevice device,
                   DLDataType dtype) {
  struct Holder {
    DLManagedTensorVersioned managed{};
    std::vector<std::int64_t> shape;
  };
  auto* holder = new Holder{{}, shape};
  holder->managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  holder->managed.manager_ctx = holder;
  holder->managed.deleter = [](DLManagedTensorVersioned* self) {
    delete static_cast<Holder*>(self->manager_ctx);
  };
  DLTensor& view = holder->managed.dl_tensor;
  view.data = data;
  view.device = device;
  view.ndim = static_cast<std::int32_t>(shape.size());
  view.dtype = dtype;
  view.shape = holder->shape.data();
  auto tensor = make_tensor_from_dlpack_versioned(&holder->managed);
  if (!tensor) {
    ADD_FAILURE() << tensor.error().message;
    holder->managed.deleter(&holder->managed);
    return Tensor();
  }
  return std::move(*tensor);
}

VmmBuffer::VmmBuffer(std::size_t bytes, int device) { create(bytes, device); }

void VmmBuffer::create(std::size_t bytes, int device) {
  const auto& api = detail::cuda_ipc();
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  std::size_t granularity = 1;
  CUdeviceptr base = 0;
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(
      api.mem_get_allocation_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
      CUDA_SUCCESS);
  bytes_ = (bytes + granularity - 1) / granularity * granularity;
  ASSERT_EQ(api.mem_create(&handle_, bytes_, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(api.mem_address_reserve(&base, bytes_, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(api.mem_map(base, bytes_, 0, handle_, 0), CUDA_SUCCESS);
  ASSERT_EQ(api.mem_set_access(base, bytes_, &access, 1), CUDA_SUCCESS);
  data_ = reinterpret_cast<void*>(base);
}

VmmBuffer::~VmmBuffer() {
  const auto& api = detail::cuda_ipc();
  if (data_ != nullptr) {
    EXPECT_EQ(api.mem_unmap(reinterpret_cast<CUdeviceptr>(data_), bytes_), CUDA_SUCCESS);
    EXPECT_EQ(api.mem_address_free(reinterpret_cast<CUdeviceptr>(data_), bytes_), CUDA_SUCCESS);
  }
  if (handle_ != 0) {
    EXPECT_EQ(api.mem_release(handle_), CUDA_SUCCESS);
  }
}

// A channel pair whose second end becomes an Importer (its Hello exchange on another thread)
// while `exporter_side` takes the first end's part of the exchange (it returns an expected);
// the importer, or nothing after a test failure.
template <class ExporterSide>
std::optional<ipc::Importer> importer_beside(ExporterSide exporter_side,
                                             const ipc::ImporterOptions& options = {}) {
  auto ends = ipc::Channel::pair();
  if (!ends) {
    ADD_FAILURE() << ends.error().message;
    return std::nullopt;
  }
  std::optional<expected<ipc::Importer, Error>> importer;
  std::thread other(
      [&] { importer.emplace(ipc::Importer::create(std::move(ends->second), options)); });
  auto exported = exporter_side(std::move(ends->first));
  other.join();
  if (!exported || !*importer) {
    ADD_FAILURE() << (exported ? (*importer).error().message : exported.error().message);
    return std::nullopt;
  }
  return std::move(**importer);
}

ipc::ImporterOptions readiness_options(ipc::ReadinessWait where, int hello_timeout_ms) {
  ipc::ImporterOptions options;
  options.hello_timeout_ms = hello_timeout_ms;
  options.readiness = where;
  return options;
}

ConnectedImporter connect_importer(ipc::Exporter& exporter) {
  return connect_importer(exporter, ipc::ImporterOptions{});
}

ConnectedImporter connect_importer(ipc::Exporter& exporter, const ipc::ImporterOptions& options) {
  ConnectedImporter connected;
  ipc::PeerId peer = 0;
  connected.importer = importer_beside(
      [&](ipc::Channel end) {
        auto added = exporter.add_peer(std::move(end), 5000);
        peer = added ? *added : 0;
        return added;
      },
      options);
  connected.peer = connected.importer ? peer : 0;
  return connected;
}

RawExporterLink raw_exporter_link() {
  RawExporterLink link;
  std::optional<ipc::Channel> raw;
  link.importer = importer_beside([&](ipc::Channel end) {
    auto hello = ipc::detail::exchange_hello(end, 5000, "test exporter", ipc::PeerRole::kExporter);
    raw.emplace(std::move(end));
    return hello;
  });
  if (link.importer) {
    link.raw = std::move(raw);
  }
  return link;
}

LocalLink local_link(std::size_t blocks, const ipc::ImporterOptions& options) {
  LocalLink link;
  auto exporter = ipc::Exporter::create();
  if (!exporter) {
    ADD_FAILURE() << exporter.error().message;
    return link;
  }
  link.exporter.emplace(std::move(*exporter));
  auto connected = connect_importer(*link.exporter, options);
  link.peer = connected.peer;
  link.importer = std::move(connected.importer);
  link.pool = make_device_pool(1024, blocks, PoolKind::kShareable);
  return link;
}

Tensor receive_one(ipc::Importer& importer) {
  auto received = importer.receive(1000);
  if (!received) {
    ADD_FAILURE() << "receive failed: " << received.error().message;
    return Tensor();
  }
  if (!*received) {
    ADD_FAILURE() << "nothing arrived within a second";
    return Tensor();
  }
  return std::move(**received);
}

}  // namespace holoscan::test
