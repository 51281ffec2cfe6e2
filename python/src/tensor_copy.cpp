// Host copies of host tensors, element by element (a compact innermost dimension at once), into
// memory the copy owns. No Python object is involved, so the deleter may run on any thread.
#include "tensor_copy.hpp"

#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include <holoscan/dlpack_utils.hpp>

namespace nb = nanobind;

namespace holoscan::python {
namespace {

// DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (DLPack >= 1.1; a 1.0 header lacks the macro).
constexpr std::uint64_t kSubBytePadded = std::uint64_t{1} << 2;
constexpr std::align_val_t kAlignment{256};  // DLPack's advice for data pointers

struct HostCopy {
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // compact, in elements
  std::byte* bytes = nullptr;

  HostCopy() = default;
  HostCopy(const HostCopy&) = delete;
  HostCopy& operator=(const HostCopy&) = delete;
  ~HostCopy() { ::operator delete[](bytes, kAlignment); }

  static void delete_versioned(DLManagedTensorVersioned* self) noexcept {
    delete static_cast<HostCopy*>(self->manager_ctx);
  }
  static void delete_legacy(DLManagedTensor* self) noexcept {
    delete static_cast<HostCopy*>(self->manager_ctx);
  }
};

bool packed_sub_byte(const Tensor& tensor) noexcept {
  const DLDataType dtype = tensor.dtype();
  return (dtype.bits * dtype.lanes) % 8 != 0 && (tensor.flags() & kSubBytePadded) == 0;
}

std::vector<std::int64_t> element_strides(const Tensor& tensor) {
  const DLTensor& view = tensor.dl_tensor();
  std::vector<std::int64_t> strides(static_cast<std::size_t>(view.ndim), 1);
  if (view.strides != nullptr) {
    strides.assign(view.strides, view.strides + view.ndim);
    return strides;
  }
  for (std::int32_t i = view.ndim - 1; i > 0; --i) {
    strides[i - 1] = strides[i] * view.shape[i];
  }
  return strides;
}

// Row-major walk over every element; an innermost dimension of stride 1 goes in one memcpy.
void copy_strided(const Tensor& tensor, std::byte* out) {
  const std::vector<std::int64_t> shape = tensor.shape();
  const std::vector<std::int64_t> strides = element_strides(tensor);
  const auto item = static_cast<std::int64_t>(tensor.itemsize());
  const auto* base = static_cast<const std::byte*>(tensor.data());
  const std::size_t ndim = shape.size();
  const std::int64_t run = ndim > 0 && strides[ndim - 1] == 1 ? shape[ndim - 1] : 1;
  const std::size_t outer_dims = run > 1 ? ndim - 1 : ndim;
  std::vector<std::int64_t> index(ndim, 0);
  for (std::int64_t done = 0; done < tensor.size(); done += run) {
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < ndim; ++d) {
      offset += index[d] * strides[d];
    }
    std::memcpy(out, base + offset * item, static_cast<std::size_t>(run * item));
    out += run * item;
    for (std::size_t d = outer_dims; d-- > 0;) {  // next index, last counted dimension first
      if (++index[d] < shape[d]) {
        break;
      }
      index[d] = 0;
    }
  }
}

HostCopy* make_copy(const Tensor& tensor) {
  if (packed_sub_byte(tensor) && !tensor.is_contiguous()) {
    throw nb::buffer_error(
        "copy: packed sub-byte elements can be copied only from a contiguous tensor");
  }
  auto copy = std::make_unique<HostCopy>();
  copy->shape = tensor.shape();
  copy->strides.assign(copy->shape.size(), 1);
  for (std::size_t i = copy->shape.size(); i > 1; --i) {
    copy->strides[i - 2] = copy->strides[i - 1] * copy->shape[i - 1];
  }
  const auto bytes = static_cast<std::size_t>(tensor.nbytes());
  copy->bytes = static_cast<std::byte*>(::operator new[](bytes > 0 ? bytes : 1, kAlignment));
  if (tensor.size() > 0) {
    if (tensor.is_contiguous()) {
      std::memcpy(copy->bytes, tensor.data(), bytes);
    } else {
      copy_strided(tensor, copy->bytes);
    }
  }
  return copy.release();
}

DLTensor copy_view(HostCopy& copy, const Tensor& tensor) {
  DLTensor view{};
  view.data = copy.bytes;
  view.device = DLDevice{kDLCPU, 0};
  view.ndim = static_cast<std::int32_t>(copy.shape.size());
  view.dtype = tensor.dtype();
  view.shape = copy.shape.empty() ? nullptr : copy.shape.data();
  view.strides = copy.strides.empty() ? nullptr : copy.strides.data();
  return view;
}

}  // namespace

bool host_copy_supported(const Tensor& tensor, DLDevice target) noexcept {
  const int source = tensor.device().device_type;
  return (source == kDLCPU || source == kDLCUDAHost) && target.device_type == kDLCPU &&
         target.device_id == 0;
}

DLManagedTensorVersioned* copy_to_host_versioned(const Tensor& tensor) {
  HostCopy* copy = make_copy(tensor);
  DLManagedTensorVersioned& managed = copy->versioned;
  managed.version =
      DLPackVersion{HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR, HOLOSCAN_DLPACK_IMPL_VERSION_MINOR};
  managed.flags = DLPACK_FLAG_BITMASK_IS_COPIED | (tensor.flags() & kSubBytePadded);
  managed.manager_ctx = copy;
  managed.deleter = &HostCopy::delete_versioned;
  managed.dl_tensor = copy_view(*copy, tensor);
  return &managed;
}

DLManagedTensor* copy_to_host_legacy(const Tensor& tensor) {
  if ((tensor.flags() & kSubBytePadded) != 0) {
    throw nb::buffer_error(
        "copy: a legacy DLPack capsule cannot say that sub-byte elements are padded; pass "
        "max_version=(1, 1) or later");
  }
  HostCopy* copy = make_copy(tensor);
  copy->legacy.manager_ctx = copy;
  copy->legacy.deleter = &HostCopy::delete_legacy;
  copy->legacy.dl_tensor = copy_view(*copy, tensor);
  return &copy->legacy;
}

}  // namespace holoscan::python
