// Compiles against every public header of the core without CUDA's headers, checks that no
// internal header is installed and that headers and library agree on the version, then imports
// and exports a tensor.
#include <holoscan/core/domain/dlpack.hpp>
#include <holoscan/core/domain/tensor.hpp>
#include <holoscan/core/errors.hpp>
#include <holoscan/core/expected.hpp>
#include <holoscan/cuda_handles.hpp>
#include <holoscan/cuda_stream_sync.hpp>
#include <holoscan/deferred_release.hpp>
#include <holoscan/dlpack.hpp>
#include <holoscan/dlpack_context.hpp>
#include <holoscan/dlpack_utils.hpp>
#include <holoscan/errors.hpp>
#include <holoscan/event_pool.hpp>
#include <holoscan/expected.hpp>
#include <holoscan/export.hpp>
#include <holoscan/make_tensor.hpp>
#include <holoscan/pool_memory.hpp>
#include <holoscan/stream_tracked_reference.hpp>
#include <holoscan/tensor.hpp>
#include <holoscan/tensor_memory_reference.hpp>
#include <holoscan/tensor_pool.hpp>
#include <holoscan/version.hpp>

#if defined(__CUDA_RUNTIME_API_H__) || defined(__DRIVER_TYPES_H__)
#error "a public header pulled in a CUDA header"
#endif
#if __has_include(<holoscan/detail/abi.hpp>) || __has_include(<holoscan/detail/stream_state.hpp>)
#error "holoscan/detail/ (internal headers) is visible to consumers"
#endif

#include <cstdio>
#include <cstring>

int main() {
  static float data[6] = {0, 1, 2, 3, 4, 5};
  static std::int64_t shape[2] = {2, 3};
  static int deleted = 0;
  static DLManagedTensorVersioned managed{};
  managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  managed.deleter = [](DLManagedTensorVersioned*) { ++deleted; };
  managed.dl_tensor.data = data;
  managed.dl_tensor.device = {kDLCPU, 0};
  managed.dl_tensor.ndim = 2;
  managed.dl_tensor.dtype = {kDLFloat, 32, 1};
  managed.dl_tensor.shape = shape;
  {
    auto tensor = holoscan::make_tensor_from_dlpack_versioned(&managed);
    if (!tensor || tensor->size() != 6) { return 1; }
    auto exported = tensor->to_dlpack_versioned();
    if (!exported) { return 2; }
    (*exported)->deleter(*exported);
  }
  std::printf("consumer: holoscan-dlpack %s (headers %s); deleter ran %d time(s)\n",
              holoscan::dlpack_version(), HOLOSCAN_DLPACK_VERSION_STRING, deleted);
  if (std::strcmp(holoscan::dlpack_version(), HOLOSCAN_DLPACK_VERSION_STRING) != 0) {
    return 4;
  }
  return deleted == 1 ? 0 : 3;
}
