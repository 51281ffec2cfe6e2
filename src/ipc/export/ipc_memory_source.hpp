#pragma once
// Which allocation a tensor's memory lies in and how another process can map it, or, for memory
// that cannot cross a process boundary, a refusal that names the kind of memory.
#include "holoscan/expected.hpp"
#include "holoscan/tensor.hpp"
#include "ipc/export/exportable_memory.hpp"

namespace holoscan::detail {

/**
 * @brief The allocation behind `tensor` with a handle for another process.
 *
 * Blocks of a pool whose memory this library made answer for themselves (shareable_pool_memory()
 * lends its fd, cuda_ipc_pool_memory() its legacy handle). Other memory, blocks of other pools
 * included, is classified by the driver's pointer attributes: cudaMalloc memory
 * travels as a legacy cudaIpcMemHandle_t (kCudaIpc), VMM memory created with the POSIX fd handle
 * type as a fresh fd (kPosixFd). Refused, kInvalidArgument naming the kind: host memory (pageable
 * or pinned), managed memory, device memory CUDA cannot share; kNotImplemented for memory from a
 * stream-ordered pool (cudaMallocAsync).
 */
expected<ExportableAllocation, Error> shareable_allocation(const Tensor& tensor);

}  // namespace holoscan::detail
