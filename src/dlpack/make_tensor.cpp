#include "holoscan/make_tensor.hpp"

#include <memory>
#include <new>
#include <string>
#include <utility>

#include "dlpack/context_access.hpp"
#include "dlpack/dlpack_validate.hpp"
#include "dlpack/owner_by_holds.hpp"
#include "dlpack/released_memory.hpp"
#include "dlpack/tensor_view.hpp"
#include "holoscan/dlpack_utils.hpp"

namespace holoscan {
namespace {

// Every message names the function the caller called: `who`, make_tensor or wrap_memory.
Error invalid(const char* who, const std::string& what) {
  return Error{ErrorCode::kInvalidArgument, std::string(who) + ": " + what, 0};
}

// The device the memory lives on, as Holoscan 5.0 maps the storage type.
expected<DLDevice, Error> device_of(MemoryStorageType storage_type, void* data, int device,
                                    const char* who) {
  switch (storage_type) {
    case MemoryStorageType::kHost:
      return DLDevice{kDLCUDAHost, 0};
    case MemoryStorageType::kSystem:
      return DLDevice{kDLCPU, 0};
    case MemoryStorageType::kCudaManaged:
      return DLDevice{kDLCUDAManaged, 0};
    case MemoryStorageType::kDevice:
      break;
    default:
      return make_unexpected(invalid(who, "Unsupported tensor memory storage type " +
                                              std::to_string(static_cast<int>(storage_type))));
  }
  if (device >= 0) {
    return DLDevice{kDLCUDA, device};
  }
  auto located = dldevice_from_pointer(data);
  if (!located) {
    return located;
  }
  if (located->device_type != kDLCUDA) {
    return make_unexpected(
        invalid(who,
                "Tensor storage type does not match the CUDA pointer memory type (kDevice, but the "
                "pointer's memory is DLDeviceType " +
                    std::to_string(located->device_type) + ")"));
  }
  return located;
}

// Byte strides to DLPack element strides: each a non-negative multiple of the item size.
expected<std::vector<std::int64_t>, Error> element_strides(TensorByteStridesView byte_strides,
                                                           std::size_t ndim, DLDataType dtype,
                                                           const char* who) {
  std::vector<std::int64_t> strides;
  if (!byte_strides.has_value()) {
    return strides;
  }
  if (ndim > 0 && byte_strides.size() == ndim && byte_strides.data() == nullptr) {
    return make_unexpected(invalid(who, "Tensor byte strides pointer is null (byte_strides has " +
                                            std::to_string(ndim) + " strides and no data)"));
  }
  if (byte_strides.size() != ndim) {
    // 5.0's sentence first (its strided_size_bytes), then ours.
    return make_unexpected(invalid(who,
                                   "Tensor stride rank does not match shape rank (byte_strides "
                                   "has " +
                                       std::to_string(byte_strides.size()) +
                                       " strides for a shape of " + std::to_string(ndim) + ")"));
  }
  const auto item = static_cast<std::int64_t>(dlpack_dtype_item_size_bytes(dtype));
  strides.resize(ndim);
  for (std::size_t i = 0; i < ndim; ++i) {
    const std::int64_t bytes = byte_strides.data()[i];
    const std::string which = "strides[" + std::to_string(i) + "] is " + std::to_string(bytes);
    if (bytes < 0) {
      return make_unexpected(
          invalid(who, "Tensor byte strides must be non-negative (" + which + ")"));
    }
    if (bytes % item != 0) {
      return make_unexpected(invalid(who, "Tensor byte strides must be divisible by item size " +
                                              std::to_string(item) + " (" + which + ")"));
    }
    strides[i] = bytes / item;
  }
  return strides;
}

// The checked context of a view over `data`, without an owner yet.
expected<std::shared_ptr<DLManagedTensorContext>, Error> wrap(
    std::vector<std::int64_t>& shape, DLDataType dtype, TensorByteStridesView byte_strides,
    MemoryStorageType storage_type, void* data, int device, const char* who) {
  // Where 5.0 refuses the same thing, its sentence comes first (its item_size check, and its
  // validate_shape's below), then the field, as an import names it.
  if (auto valid = detail::validate_dtype(dtype, who); !valid) {
    if (dtype.bits == 0 || dtype.lanes == 0) {
      return make_unexpected(invalid(who, std::string("Tensor dtype has zero-sized elements (") +
                                              (dtype.bits == 0 ? "dtype.bits" : "dtype.lanes") +
                                              " is 0)"));
    }
    return forward_error(std::move(valid));
  }
  if (shape.size() > static_cast<std::size_t>(kMaxTensorDims)) {
    return make_unexpected(invalid(who, "ndim " + std::to_string(shape.size()) +
                                            " is outside [0, " + std::to_string(kMaxTensorDims) +
                                            "]"));
  }
  auto strides = element_strides(byte_strides, shape.size(), dtype, who);
  if (!strides) {
    return forward_error(std::move(strides));
  }
  auto located = device_of(storage_type, data, device, who);
  if (!located) {
    return forward_error(std::move(located));
  }
  DLTensor view{};
  view.data = data;
  view.device = *located;
  view.ndim = static_cast<std::int32_t>(shape.size());
  view.dtype = dtype;
  view.shape = shape.empty() ? nullptr : shape.data();
  view.strides = strides->empty() ? nullptr : strides->data();
  // The same layout rules as an import: what make_tensor builds, every consumer can read.
  detail::LayoutFacts facts;
  if (detail::check_dl_tensor(view, 0, facts) != detail::LayoutFault::kNone) {
    if (facts.fault == detail::LayoutFault::kExtent) {  // 5.0's validate_shape sentence first
      return make_unexpected(invalid(who, "Tensor shape dimensions must be non-negative (shape[" +
                                              std::to_string(facts.index) + "] is " +
                                              std::to_string(shape[facts.index]) + ")"));
    }
    return make_unexpected(detail::dl_tensor_error(facts, view, who));
  }
  auto context = std::make_shared<DLManagedTensorContext>();
  detail::assign_view(
      *context, view, 0,
      DLPackVersion{HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR, HOLOSCAN_DLPACK_IMPL_VERSION_MINOR});
  detail::ContextAccess::mark_checked(*context);  // checked above
  return context;
}

// Called from a catch of std::bad_alloc: the message needs the heap too, and is left out when
// even that is refused.
expected<Tensor, Error> out_of_memory(const char* who) {
  Error error{ErrorCode::kResourceExhausted, {}, 0};
  try {
    error.message = std::string(who) + ": out of host memory (the caller keeps the memory)";
  } catch (const std::bad_alloc&) {  // NOLINT(bugprone-empty-catch): the code says it all
  }
  return make_unexpected(std::move(error));
}

// How the context says what keeps its memory (a ContextAccess::mark_memory_lives_* function).
using MarkOwner = void (*)(DLManagedTensorContext& context) noexcept;

// A Tensor over `data` owned by `make_owner()` (make_tensor and wrap_memory), marked by `mark`.
// The owner is made last, once nothing else can fail: until then a rejection leaves the memory
// with the caller (a release function is never called then). `missing_owner` is the refusal when
// there is no owner.
template <class MakeOwner>
expected<Tensor, Error> make_owned(std::vector<std::int64_t>& shape, DLDataType dtype,
                                   TensorByteStridesView byte_strides,
                                   MemoryStorageType storage_type, void* data, int device,
                                   const char* who, const char* null_pointer,
                                   const char* missing_owner, MarkOwner mark,
                                   MakeOwner&& make_owner) {
  try {  // the refusals' messages too come from the heap
    if (data == nullptr) {
      return make_unexpected(ErrorCode::kInvalidArgument, null_pointer);
    }
    if (missing_owner != nullptr) {
      return make_unexpected(ErrorCode::kInvalidArgument, missing_owner);
    }
    auto context = wrap(shape, dtype, byte_strides, storage_type, data, device, who);
    if (!context) {
      return forward_error(std::move(context));
    }
    (*context)->memory_reference = make_owner();
    mark(**context);
    return Tensor(std::move(*context));  // noexcept
  } catch (const std::bad_alloc&) {
    return out_of_memory(who);
  }
}

// A Tensor whose owner calls `release(data)` once it is safe.
expected<Tensor, Error> make_released(std::vector<std::int64_t>& shape, DLDataType dtype,
                                      TensorByteStridesView byte_strides,
                                      MemoryStorageType storage_type, void* data,
                                      TensorMemoryRelease release, int device, const char* who,
                                      const char* null_pointer) {
  return make_owned(
      shape, dtype, byte_strides, storage_type, data, device, who, null_pointer, nullptr,
      &detail::ContextAccess::mark_memory_lives_by_holds,
      [&]() -> std::shared_ptr<TensorMemoryReference> {
        // Unwinding drops an owner that adopted nothing: it releases nothing.
        auto owner = detail::OwnerByHolds<detail::ReleasedMemory>::make(
            [](void* memory) noexcept { return new (memory) detail::ReleasedMemory; });
        if (owner == nullptr || !owner->adopt(data, release)) {
          throw std::bad_alloc();
        }
        return owner;
      });
}

}  // namespace

expected<Tensor, Error> make_tensor(std::vector<std::int64_t> shape, DLDataType dtype,
                                    TensorByteStridesView byte_strides,
                                    MemoryStorageType storage_type, void* data,
                                    std::shared_ptr<TensorMemoryReference> owner, int device) {
  const char* missing_owner = owner == nullptr ? "make_tensor memory reference is null" : nullptr;
  return make_owned(shape, dtype, byte_strides, storage_type, data, device, "make_tensor",
                    "make_tensor pointer is null", missing_owner,
                    &detail::ContextAccess::mark_memory_lives_in_reference,
                    [&owner] { return std::move(owner); });
}

expected<Tensor, Error> make_tensor(std::vector<std::int64_t> shape, DLDataType dtype,
                                    TensorByteStridesView byte_strides,
                                    MemoryStorageType storage_type, void* data,
                                    std::shared_ptr<TensorMemoryReference> owner) {
  return make_tensor(std::move(shape), dtype, byte_strides, storage_type, data, std::move(owner),
                     -1);
}

expected<Tensor, Error> make_tensor(std::vector<std::int64_t> shape, DLDataType dtype,
                                    TensorByteStridesView byte_strides,
                                    MemoryStorageType storage_type, void* data,
                                    TensorMemoryRelease release) {
  return make_released(shape, dtype, byte_strides, storage_type, data, std::move(release), -1,
                       "make_tensor", "make_tensor pointer is null");
}

expected<void, Error> wrap_memory(Tensor& tensor, std::vector<std::int64_t> shape, DLDataType dtype,
                                  TensorByteStridesView byte_strides,
                                  MemoryStorageType storage_type, void* data,
                                  TensorMemoryRelease release, int device) {
  auto made = make_released(shape, dtype, byte_strides, storage_type, data, std::move(release),
                            device, "wrap_memory", "wrap_memory pointer is null");
  if (!made) {
    return forward_error(std::move(made));  // `tensor` is untouched
  }
  // The former context goes as by any assignment (other Tensors over it keep it); noexcept.
  tensor = std::move(*made);
  return {};
}

}  // namespace holoscan
