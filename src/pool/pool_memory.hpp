#pragma once
// The memory of a TensorPool: one allocation that every block of the pool lies in, freed when the
// last block's reference lets go of it. Host pools take pageable host memory, device pools
// cudaMalloc unless their config names a PoolMemoryProvider.
#include <cstddef>
#include <memory>

#include "holoscan/expected.hpp"
#include "holoscan/pool_memory.hpp"
#include "holoscan/tensor_pool.hpp"

namespace holoscan::detail {

/** @brief At least `bytes` of the memory `config` asks for (its bytes() may round them up). */
expected<std::unique_ptr<PoolAllocation>, Error> allocate_pool_memory(
    const TensorPoolConfig& config, std::size_t bytes);

}  // namespace holoscan::detail
