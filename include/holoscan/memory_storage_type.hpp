#pragma once
/**
 * @file
 * @brief MemoryStorageType: where memory handed to make_tensor or wrap_memory lives, numbered as
 *        Holoscan (and GXF) number it.
 */

namespace holoscan {

/**
 * @brief Where the memory handed to make_tensor or wrap_memory lives, numbered as Holoscan (and
 *        GXF) number it.
 */
enum class MemoryStorageType {
  kHost = 0,         ///< Page-locked host memory (cudaMallocHost): the tensor reports kDLCUDAHost.
  kDevice = 1,       ///< CUDA device memory: kDLCUDA on the given device, or on the pointer's.
  kSystem = 2,       ///< Pageable host memory (malloc, new, a std::vector): kDLCPU.
  kCudaManaged = 3,  ///< CUDA managed memory (cudaMallocManaged): kDLCUDAManaged.
};

}  // namespace holoscan
