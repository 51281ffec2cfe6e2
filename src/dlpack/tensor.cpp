#include "holoscan/tensor.hpp"

#include <algorithm>
#include <new>
#include <string>
#include <utility>

#include "dlpack/context_access.hpp"
#include "dlpack/dlpack_validate.hpp"
#include "dlpack/without_throwing.hpp"

namespace holoscan {
namespace {

const DLTensor kEmptyDLTensor{};

// Holoscan 5.0's sentence for a memory reference without a readiness contract (kNotImplemented),
// read from libholoscan_core.so.5: code matching 5.0's message keeps working.
constexpr const char* kNoReadinessContract =
    "Tensor memory reference does not provide a producer-readiness stream contract; imported "
    "DLPack producers must synchronize through __dlpack__(stream=...) or provide a Holoscan "
    "readiness-aware memory reference (no readiness stream was recorded)";

}  // namespace

// A context whose view is flagged READ_ONLY is read-only from here on, as Holoscan 5.0's
// constructor locks it: clearing the flag later never widens access.
Tensor::Tensor(std::shared_ptr<DLManagedTensorContext> ctx) noexcept : dl_ctx_(std::move(ctx)) {
  if (dl_ctx_ != nullptr) {
    (void)detail::ContextAccess::read_only_once_flagged(*dl_ctx_);
  }
  retain_handle();
}

Tensor::Tensor(const Tensor& other) noexcept : dl_ctx_(other.dl_ctx_) { retain_handle(); }

Tensor& Tensor::operator=(const Tensor& other) noexcept {
  if (this != &other) {
    if (TensorMemoryReference* incoming = other.memory(); incoming != nullptr) {
      incoming->retain_tensor_handle();  // first, so that sharing one memory never dips to zero
    }
    release_handle();
    dl_ctx_ = other.dl_ctx_;
  }
  return *this;
}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    release_handle();
    dl_ctx_ = std::move(other.dl_ctx_);
  }
  return *this;
}

Tensor::~Tensor() { release_handle(); }

void Tensor::retain_handle() const noexcept {
  if (TensorMemoryReference* reference = memory(); reference != nullptr) {
    reference->retain_tensor_handle();
  }
}

void Tensor::release_handle() const noexcept {
  if (TensorMemoryReference* reference = memory(); reference != nullptr) {
    reference->release_tensor_handle();
  }
}

const DLTensor& Tensor::dl_tensor() const noexcept {
  return dl_ctx_ != nullptr ? dl_ctx_->tensor.dl_tensor : kEmptyDLTensor;
}

void* Tensor::data() const noexcept {
  const DLTensor& view = dl_tensor();
  // An offset that would wrap the address space addresses nothing: null, as Holoscan 5.0 gives
  // (only a view written by hand gets here; the layout rules refuse such offsets).
  std::uintptr_t address = 0;
  if (view.data == nullptr || __builtin_add_overflow(reinterpret_cast<std::uintptr_t>(view.data),
                                                     view.byte_offset, &address)) {
    return nullptr;
  }
  return reinterpret_cast<void*>(address);
}

DLDevice Tensor::device() const noexcept { return dl_tensor().device; }
DLDataType Tensor::dtype() const noexcept { return dl_tensor().dtype; }
std::int32_t Tensor::ndim() const noexcept { return dl_tensor().ndim; }
std::uint64_t Tensor::flags() const noexcept { return dl_ctx_ ? dl_ctx_->tensor.flags : 0; }
DLPackVersion Tensor::version() const noexcept {
  return dl_ctx_ ? dl_ctx_->tensor.version : DLPackVersion{};
}

std::int64_t Tensor::size() const noexcept {
  if (dl_ctx_ == nullptr) {
    return 0;
  }
  const DLTensor& view = dl_tensor();
  // A view written by hand that describes no extents (a negative ndim, or no shape for ndim > 0)
  // has no elements, as in Holoscan 5.0: not the one element a scalar has.
  if (view.ndim < 0 || (view.ndim > 0 && view.shape == nullptr)) {
    return 0;
  }
  return detail::element_count(view.ndim, view.shape);
}

std::size_t Tensor::itemsize() const noexcept {
  return static_cast<std::size_t>(dlpack_dtype_item_size_bytes(dtype()));
}

std::int64_t Tensor::nbytes() const noexcept {
  return detail::payload_bytes(size(), dtype(), flags());
}

// The flag is read again at every call (a context can reach a Tensor without its constructor,
// through dl_ctx()), and a flag seen narrows the authority for good.
bool Tensor::is_read_only() const noexcept {
  return dl_ctx_ != nullptr && detail::ContextAccess::read_only_once_flagged(*dl_ctx_);
}

bool Tensor::is_copied() const noexcept { return (flags() & DLPACK_FLAG_BITMASK_IS_COPIED) != 0; }

std::vector<std::int64_t> Tensor::shape() const {
  const DLTensor& view = dl_tensor();
  if (view.shape == nullptr || view.ndim <= 0) {
    return {};
  }
  return std::vector<std::int64_t>(view.shape, view.shape + view.ndim);
}

std::vector<std::int64_t> Tensor::strides() const {
  std::vector<std::int64_t> strides;
  calc_strides(dl_tensor(), strides, /*to_num_elements=*/false);
  return strides;
}

expected<void*, Error> Tensor::mutable_data() & try {
  // Each refusal carries Holoscan 5.0's sentence for it (read from libholoscan_core.so.5), so
  // that code matching 5.0's messages keeps working; ours adds who refused and why.
  if (dl_ctx_ == nullptr) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "Tensor::mutable_data: Tensor context is empty (the Tensor is empty)");
  }
  void* address = data();
  if (address == nullptr) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "Tensor::mutable_data: Tensor data pointer is null");
  }
  if (is_read_only()) {
    return make_unexpected(
        ErrorCode::kPermissionDenied,
        "Tensor::mutable_data: Tensor data is read-only (the Tensor has read-only authority)");
  }
  if (detail::ContextAccess::has_mutable_export(*dl_ctx_)) {
    return make_unexpected(ErrorCode::kPermissionDenied,
                           "Tensor::mutable_data: Tensor data has an active access claim (a "
                           "mutable DLPack export of this Tensor is alive until its deleter runs)");
  }
  return address;
} catch (const std::bad_alloc&) {
  return detail::out_of_memory();
}

bool Tensor::is_contiguous() const noexcept {
  const DLTensor& view = dl_tensor();
  if (view.strides == nullptr || view.shape == nullptr || size() == 0) {
    return true;
  }
  std::int64_t expected_stride = 1;
  for (std::int32_t i = view.ndim; i-- > 0;) {
    if (view.shape[i] != 1 && view.strides[i] != expected_stride) {
      return false;
    }
    if (__builtin_mul_overflow(expected_stride, view.shape[i], &expected_stride)) {
      // Only a view written by hand gets here (the layout rules refuse such extents): no stride
      // further out can be the compact one, so those dimensions must all have one element.
      return std::all_of(view.shape, view.shape + i,
                         [](std::int64_t extent) { return extent == 1; });
    }
  }
  return true;
}

std::shared_ptr<TensorMemoryReference> Tensor::memory_reference() const noexcept {
  return dl_ctx_ != nullptr ? dl_ctx_->memory_reference : nullptr;
}

bool Tensor::set_readiness_stream(cudaStream_t stream) {
  TensorMemoryReference* reference = memory();
  return reference != nullptr && reference->set_readiness_stream(stream);
}

bool Tensor::has_readiness_stream_contract() const noexcept {
  TensorMemoryReference* reference = memory();
  return reference != nullptr && reference->has_readiness_stream_contract();
}

cudaStream_t Tensor::readiness_stream() const noexcept {
  TensorMemoryReference* reference = memory();
  return reference != nullptr ? reference->readiness_stream() : nullptr;
}

expected<void, Error> Tensor::synchronize_for_consumer_stream(cudaStream_t stream) const try {
  if (dl_ctx_ == nullptr) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "Tensor::synchronize_for_consumer_stream: the Tensor is empty");
  }
  if (!has_readiness_stream_contract()) {
    return make_unexpected(
        ErrorCode::kNotImplemented,
        std::string("Tensor::synchronize_for_consumer_stream: ") + kNoReadinessContract);
  }
  return memory()->synchronize_for_consumer(stream);
} catch (const std::bad_alloc&) {
  return detail::out_of_memory();
}

expected<void, Error> Tensor::synchronize_for_host() const try {
  if (dl_ctx_ == nullptr) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "Tensor::synchronize_for_host: the Tensor is empty");
  }
  if (!has_readiness_stream_contract()) {
    return make_unexpected(ErrorCode::kNotImplemented,
                           std::string("Tensor::synchronize_for_host: ") + kNoReadinessContract);
  }
  return memory()->synchronize_for_host();
} catch (const std::bad_alloc&) {
  return detail::out_of_memory();
}

bool Tensor::set_deallocation_stream(cudaStream_t stream) {
  TensorMemoryReference* reference = memory();
  return reference != nullptr && reference->set_deallocation_stream(stream);
}

}  // namespace holoscan
