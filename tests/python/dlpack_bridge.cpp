// A C ABI over holoscan-dlpack for ctypes: import, inspect, order and export DLPack tensors from
// Python, so that the tests can round-trip real PyTorch and CuPy tensors.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <holoscan/deferred_release.hpp>
#include <holoscan/stream_tracked_reference.hpp>
#include <holoscan/tensor.hpp>
#include <memory>
#include <new>
#include <string>

namespace {

using holoscan::Tensor;

void write_error(char* buffer, std::size_t size, const std::string& message) {
  if (buffer == nullptr || size == 0) {
    return;
  }
  const std::size_t n = message.size() < size - 1 ? message.size() : size - 1;
  std::memcpy(buffer, message.data(), n);
  buffer[n] = '\0';
}

std::string describe(const holoscan::Error& error) {
  return std::string(holoscan::error_code_name(error.code)) + ": " + error.message;
}

// Python passes streams as integers: 1 and 2 are the CUDA runtime's own values of
// cudaStreamLegacy and cudaStreamPerThread, so the handle converts unchanged.
cudaStream_t to_stream(std::uintptr_t stream) { return reinterpret_cast<cudaStream_t>(stream); }

const Tensor* tensor_of(const void* handle) { return static_cast<const Tensor*>(handle); }
Tensor* tensor_of(void* handle) { return static_cast<Tensor*>(handle); }

}  // namespace

extern "C" {

/** @brief Imports a DLManagedTensorVersioned (ownership passes); a Tensor handle or null. */
void* hdl_import_versioned(void* managed, char* error, std::size_t error_size) {
  auto imported =
      holoscan::make_tensor_from_dlpack_versioned(static_cast<DLManagedTensorVersioned*>(managed));
  if (!imported) {
    write_error(error, error_size, describe(imported.error()));
    return nullptr;
  }
  auto* handle = new (std::nothrow) Tensor(std::move(*imported));
  if (handle == nullptr) {
    write_error(error, error_size, "out of host memory");
  }
  return handle;
}

/** @brief Drops a handle from hdl_import_versioned. */
void hdl_release(void* handle) { delete tensor_of(handle); }

/** @brief Address of the first element. */
std::uintptr_t hdl_data(const void* handle) {
  return reinterpret_cast<std::uintptr_t>(tensor_of(handle)->data());
}

/** @brief Number of dimensions. */
std::int32_t hdl_ndim(const void* handle) { return tensor_of(handle)->ndim(); }

/** @brief Copies up to `capacity` extents into `shape`; returns ndim. */
std::int32_t hdl_shape(const void* handle, std::int64_t* shape, std::int32_t capacity) {
  const auto extents = tensor_of(handle)->shape();
  for (std::int32_t i = 0; i < capacity && i < static_cast<std::int32_t>(extents.size()); ++i) {
    shape[i] = extents[static_cast<std::size_t>(i)];
  }
  return static_cast<std::int32_t>(extents.size());
}

/** @brief DLPACK_FLAG_BITMASK_* bits kept from the import. */
std::uint64_t hdl_flags(const void* handle) { return tensor_of(handle)->flags(); }

/** @brief Device type and id as DLPack numbers them. */
void hdl_device(const void* handle, std::int32_t* type, std::int32_t* id) {
  const DLDevice device = tensor_of(handle)->device();
  *type = static_cast<std::int32_t>(device.device_type);
  *id = device.device_id;
}

/** @brief DLPack dtype code, bits and lanes. */
void hdl_dtype(const void* handle, std::int32_t* code, std::int32_t* bits, std::int32_t* lanes) {
  const DLDataType dtype = tensor_of(handle)->dtype();
  *code = dtype.code;
  *bits = dtype.bits;
  *lanes = dtype.lanes;
}

/** @brief Handle claims on the memory now (Tensors plus live exports); -1 if not counted. */
std::int64_t hdl_handle_claims(const void* handle) {
  const auto* tracked = dynamic_cast<const holoscan::StreamTrackedReference*>(
      tensor_of(handle)->memory_reference().get());
  return tracked != nullptr ? tracked->handle_claims() : -1;
}

/** @brief Records the readiness point on `stream`; 1 on success. */
int hdl_set_readiness_stream(void* handle, std::uintptr_t stream) {
  return tensor_of(handle)->set_readiness_stream(to_stream(stream)) ? 1 : 0;
}

/** @brief Orders `stream` after readiness; 0 on success, else the ErrorCode and a message. */
int hdl_synchronize_for_consumer(void* handle, std::uintptr_t stream, char* error,
                                 std::size_t error_size) {
  auto synced = tensor_of(handle)->synchronize_for_consumer(to_stream(stream));
  if (synced) {
    return 0;
  }
  write_error(error, error_size, describe(synced.error()));
  return static_cast<int>(synced.error().code);
}

/** @brief Records a deallocation point on `stream`; 1 on success. */
int hdl_set_deallocation_stream(void* handle, std::uintptr_t stream) {
  return tensor_of(handle)->set_deallocation_stream(to_stream(stream)) ? 1 : 0;
}

/** @brief A new DLManagedTensorVersioned owning a reference to the memory; null on failure. */
void* hdl_to_dlpack_versioned(const void* handle, char* error, std::size_t error_size) {
  auto exported = tensor_of(handle)->export_dlpack_versioned();
  if (!exported) {
    write_error(error, error_size, describe(exported.error()));
    return nullptr;
  }
  return *exported;
}

/** @brief Runs the deleter of an export nobody consumed (a capsule destructor's job). */
void hdl_delete_versioned(void* managed) {
  auto* tensor = static_cast<DLManagedTensorVersioned*>(managed);
  if (tensor != nullptr && tensor->deleter != nullptr) {
    tensor->deleter(tensor);
  }
}

/** @brief Waits for every deferred release. */
void hdl_flush_deferred_releases() { holoscan::flush_deferred_releases(); }

/** @brief Deferred releases not yet run. */
std::size_t hdl_pending_deferred_releases() { return holoscan::pending_deferred_releases(); }

}  // extern "C"
