#include "landing_memory.hpp"

#include <cstdlib>
#include <string>

#include "dlpack/dlpack_validate.hpp"  // the core's layout rules (internal)
#include "holoscan/dlpack.hpp"
#include "holoscan/stream_tracked_reference.hpp"

namespace holoscan::ucx::detail {
namespace {

constexpr std::size_t kHostAlignment = 256;

// Owns one host allocation; it is freed once the GPU passed every deallocation point recorded
// on it (a consumer may copy from it on a stream).
class HostAllocation final : public StreamTrackedReference {
 public:
  explicit HostAllocation(void* memory) noexcept : memory_(memory) {}
  ~HostAllocation() override {
    release_when_safe([](void* memory) noexcept { std::free(memory); }, memory_);
  }
  HostAllocation(const HostAllocation&) = delete;
  HostAllocation& operator=(const HostAllocation&) = delete;

 private:
  void* memory_;
};

expected<Tensor, Error> allocate_host(const TensorHeader& h) {
  const std::size_t bytes =
      (static_cast<std::size_t>(h.payload_bytes) + kHostAlignment) / kHostAlignment * kHostAlignment;
  void* const data = std::aligned_alloc(kHostAlignment, bytes);  // never 0 bytes: data non-null
  if (data == nullptr) {
    return make_unexpected(ErrorCode::kResourceExhausted,
                           "ucx receive: no host memory for " + std::to_string(h.payload_bytes) +
                               " bytes");
  }
  std::shared_ptr<DLManagedTensorContext> context;
  try {
    context = std::make_shared<DLManagedTensorContext>();
    context->memory_reference = std::make_shared<HostAllocation>(data);  // owns data from here
  } catch (...) {
    std::free(data);
    return make_unexpected(ErrorCode::kResourceExhausted, "ucx receive: out of host memory");
  }
  try {
    context->dl_shape.assign(h.shape.begin(), h.shape.begin() + h.ndim);
    context->dl_strides.resize(static_cast<std::size_t>(h.ndim));
  } catch (...) {
    return make_unexpected(ErrorCode::kResourceExhausted, "ucx receive: out of host memory");
  }
  holoscan::detail::compact_strides(h.ndim, context->dl_shape.data(), context->dl_strides.data());
  DLManagedTensorVersioned& view = context->tensor;
  view.version = DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  view.flags = 0;  // writable: the receiver owns this memory
  view.dl_tensor.data = data;
  view.dl_tensor.device = DLDevice{kDLCPU, 0};
  view.dl_tensor.ndim = h.ndim;
  view.dl_tensor.dtype = h.dtype;
  view.dl_tensor.shape = context->dl_shape.data();
  view.dl_tensor.strides = context->dl_strides.data();
  view.dl_tensor.byte_offset = 0;
  return Tensor(std::move(context));
}

}  // namespace

expected<Tensor, Error> allocate_landing(const TensorHeader& header,
                                         const std::shared_ptr<TensorPool>& pool,
                                         std::uint64_t max_host_bytes) {
  if (pool != nullptr) {
    return pool->allocate(header.shape.data(), header.ndim, header.dtype);
  }
  if (header.payload_bytes > max_host_bytes) {
    return make_unexpected(ErrorCode::kResourceExhausted,
                           "ucx receive: payload_bytes " + std::to_string(header.payload_bytes) +
                               " exceeds max_receive_bytes " + std::to_string(max_host_bytes));
  }
  return allocate_host(header);
}

bool is_pool_exhausted(const Error& error, const std::shared_ptr<TensorPool>& pool) noexcept {
  return pool != nullptr && error.code == ErrorCode::kResourceExhausted;
}

ucs_memory_type_t memory_type_of(const Tensor& tensor) noexcept {
  switch (tensor.device().device_type) {
    case kDLCUDA:
      return UCS_MEMORY_TYPE_CUDA;
    case kDLCUDAManaged:
      return UCS_MEMORY_TYPE_CUDA_MANAGED;
    case kDLCPU:
    case kDLCUDAHost:
      return UCS_MEMORY_TYPE_HOST;
    default:
      return UCS_MEMORY_TYPE_UNKNOWN;
  }
}

}  // namespace holoscan::ucx::detail
