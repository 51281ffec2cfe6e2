#pragma once
// The same DLPack input for every import benchmark, the library's and the peers': a managed tensor
// reused across iterations whose deleter only marks it free again, so that only imports are timed.
#include <dlpack/dlpack.h>

#include <array>
#include <cstdint>

namespace holoscan_bench {

/** @brief A 4-D float32 tensor {8, 3, 32, 32} over `data`, with a no-op deleter. */
struct ReusableProducer {
  std::array<std::int64_t, 4> shape{8, 3, 32, 32};
  DLManagedTensorVersioned managed{};

  /** @brief Elements of the tensor. */
  static constexpr std::int64_t kElements = 8 * 3 * 32 * 32;

  /** @brief Describes `data` (kElements floats) on `device`. */
  ReusableProducer(void* data, DLDevice device) {
    managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    managed.deleter = [](DLManagedTensorVersioned*) {};
    managed.dl_tensor.data = data;
    managed.dl_tensor.device = device;
    managed.dl_tensor.ndim = 4;
    managed.dl_tensor.dtype = {kDLFloat, 32, 1};
    managed.dl_tensor.shape = shape.data();
  }
};

/** @brief The producer over host memory, shared by every host import benchmark. */
ReusableProducer& host_producer();

/** @brief The producer over device memory of device 0; null without a CUDA device. */
ReusableProducer* device_producer();

}  // namespace holoscan_bench
