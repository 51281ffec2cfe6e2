// Covers TensorPoolConfig::memory_provider: a provider's allocation backs every block,
// pool_allocation() names it from a pool tensor's memory reference, it is freed once after the
// last tensor, and a provider's refusal or short allocation fails create() with nothing kept.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "holoscan/pool_memory.hpp"
#include "holoscan/tensor.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

constexpr DLDataType kFloat32{kDLFloat, 32, 1};

// Host memory standing in for device memory: the pool never touches the bytes itself.
class CountedAllocation final : public PoolAllocation {
 public:
  CountedAllocation(std::size_t bytes, int* freed) noexcept
      : memory_(std::malloc(bytes)), bytes_(bytes), freed_(freed) {}
  ~CountedAllocation() override {
    std::free(memory_);
    ++*freed_;
  }
  void* data() const noexcept override { return memory_; }
  std::size_t bytes() const noexcept override { return bytes_; }

 private:
  void* memory_;
  std::size_t bytes_;
  int* freed_;
};

class CountingProvider final : public PoolMemoryProvider {
 public:
  expected<std::unique_ptr<PoolAllocation>, Error> allocate(int device,
                                                            std::size_t bytes) override {
    devices.push_back(device);
    if (refuse) {
      return make_unexpected(ErrorCode::kResourceExhausted, "provider: no memory left");
    }
    auto allocation = std::make_unique<CountedAllocation>(bytes - shortfall, &freed);
    last = allocation.get();
    return std::unique_ptr<PoolAllocation>(std::move(allocation));
  }

  std::vector<int> devices;
  bool refuse = false;
  std::size_t shortfall = 0;
  int freed = 0;
  PoolAllocation* last = nullptr;
};

TensorPoolConfig device_config(std::shared_ptr<PoolMemoryProvider> provider) {
  TensorPoolConfig config;
  config.memory = PoolMemory::kDevice;
  config.device = 3;
  config.block_bytes = 256;
  config.block_count = 2;
  config.memory_provider = std::move(provider);
  return config;
}

TEST(TensorPoolProvider, ItsAllocationBacksTheBlocksAndIsFreedOnceAfterTheLastTensor) {
  auto provider = std::make_shared<CountingProvider>();
  auto pool = TensorPool::create(device_config(provider));
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  EXPECT_EQ(provider->devices, std::vector<int>{3}) << "one allocation, on the pool's device";
  auto tensor = (*pool)->allocate({4}, kFloat32);
  ASSERT_TRUE(tensor.has_value()) << tensor.error().message;
  EXPECT_EQ(tensor->device().device_type, kDLCUDA);
  EXPECT_EQ(tensor->device().device_id, 3);
  PoolAllocation* allocation = pool_allocation(*tensor->memory_reference());
  ASSERT_EQ(allocation, provider->last);
  const char* base = static_cast<const char*>(allocation->data());
  EXPECT_GE(static_cast<const char*>(tensor->data()), base);
  EXPECT_LE(static_cast<const char*>(tensor->data()) + 256, base + allocation->bytes());
  pool->reset();
  EXPECT_EQ(provider->freed, 0) << "a tensor still lends from it";
  *tensor = Tensor();
  EXPECT_EQ(provider->freed, 1);
}

// A holder may put another memory reference into a block's context: the block is then retired,
// and its memory kept by the context's own name alone. An export taken afterwards points into the
// block, so it keeps it past the pool and every Tensor, until its deleter runs.
TEST(TensorPoolProvider, AnExportKeepsABlockWhoseReferenceWasReplacedPastThePool) {
  auto provider = std::make_shared<CountingProvider>();
  auto pool = TensorPool::create(device_config(provider));
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  auto tensor = (*pool)->allocate({4}, kFloat32);
  ASSERT_TRUE(tensor.has_value()) << tensor.error().message;
  tensor->release_handle();  // the claim was taken on the reference about to be replaced
  tensor->dl_ctx()->memory_reference = std::make_shared<TensorMemoryReference>();  // owns nothing
  tensor->retain_handle();
  expected<DLManagedTensorVersioned*> exported = tensor->to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  pool->reset();
  *tensor = Tensor();
  EXPECT_EQ(provider->freed, 0) << "the export still points into the block";
  (*exported)->deleter(*exported);
  EXPECT_EQ(provider->freed, 1);
}

TEST(TensorPoolProvider, IdsAreNeverZeroNorShared) {
  auto provider = std::make_shared<CountingProvider>();
  std::set<std::uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    auto pool = TensorPool::create(device_config(provider));
    ASSERT_TRUE(pool.has_value()) << pool.error().message;
    ASSERT_NE(provider->last->id(), 0u);
    ids.insert(provider->last->id());
  }
  EXPECT_EQ(ids.size(), 3u);
}

TEST(TensorPoolProvider, OtherReferencesLendFromNoPoolAllocation) {
  TensorPoolConfig config;
  config.memory = PoolMemory::kHost;
  config.block_bytes = 256;
  config.block_count = 1;
  auto host_pool = TensorPool::create(config);
  ASSERT_TRUE(host_pool.has_value()) << host_pool.error().message;
  auto pooled = (*host_pool)->allocate({4}, kFloat32);
  ASSERT_TRUE(pooled.has_value());
  EXPECT_NE(pool_allocation(*pooled->memory_reference()), nullptr) << "the pool's own memory";
  TensorMemoryReference plain;
  EXPECT_EQ(pool_allocation(plain), nullptr);
}

TEST(TensorPoolProvider, ARefusalFailsCreateWithTheProvidersError) {
  auto provider = std::make_shared<CountingProvider>();
  provider->refuse = true;
  auto pool = TensorPool::create(device_config(provider));
  ASSERT_FALSE(pool.has_value());
  EXPECT_EQ(pool.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(pool.error().message, "provider: no memory left");
}

TEST(TensorPoolProvider, AShortAllocationIsRefusedAndFreed) {
  auto provider = std::make_shared<CountingProvider>();
  provider->shortfall = 1;
  auto pool = TensorPool::create(device_config(provider));
  ASSERT_FALSE(pool.has_value());
  EXPECT_EQ(pool.error().code, ErrorCode::kFailure);
  EXPECT_EQ(pool.error().message,
            "TensorPool::create: the memory provider gave no memory or less than 512 bytes");
  EXPECT_EQ(provider->freed, 1);
}

TEST(TensorPoolProvider, HostPoolsTakeNoProvider) {
  TensorPoolConfig config = device_config(std::make_shared<CountingProvider>());
  config.memory = PoolMemory::kHost;
  auto pool = TensorPool::create(config);
  ASSERT_FALSE(pool.has_value());
  EXPECT_EQ(pool.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(pool.error().message,
            "TensorPool::create: only device memory comes from a memory provider");
}

}  // namespace
}  // namespace holoscan
