#pragma once
/**
 * @file
 * @brief Memory for TensorPools whose tensors go to other processes: providers for
 *        TensorPoolConfig::memory_provider whose blocks an Exporter shares without asking the
 *        driver per tensor, and which importers map once per allocation.
 */
#include <memory>

#include "holoscan/pool_memory.hpp"

namespace holoscan::ipc {

/**
 * @brief VMM device memory (cuMemCreate with the POSIX file descriptor handle type), exported
 *        once as a file descriptor that every export lends; importers map it read-only where the
 *        driver allows.
 */
HOLOSCAN_DLPACK_API std::shared_ptr<PoolMemoryProvider> shareable_pool_memory();

/**
 * @brief cudaMalloc device memory whose legacy cudaIpcMemHandle_t is asked for once, at the first
 *        export; for drivers or containers where VMM file descriptors cannot be passed.
 */
HOLOSCAN_DLPACK_API std::shared_ptr<PoolMemoryProvider> cuda_ipc_pool_memory();

}  // namespace holoscan::ipc
