#pragma once
/**
 * @file
 * @brief make_tensor and wrap_memory: a Tensor over memory someone else owns, as Holoscan 5.0's
 *        non-allocating overloads declare them, with MemoryStorageType and TensorByteStridesView.
 */
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <vector>
#if __cplusplus >= 202002L
#include <span>
#endif

#include <dlpack/dlpack.h>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/memory_storage_type.hpp"
#include "holoscan/tensor.hpp"
#include "holoscan/tensor_memory_reference.hpp"

namespace holoscan {

/**
 * @brief The byte strides given to make_tensor, or none for compact row-major strides.
 *
 * A borrowed view (it copies nothing): the strides must outlive the call. Built from
 * `std::nullopt` (or `{}`) for compact strides, from a `std::vector` or `std::array` of
 * `int64_t`, from a pointer and a count, and under C++20 from a `std::span<const int64_t>` or an
 * `std::optional` of one.
 */
class HOLOSCAN_DLPACK_API TensorByteStridesView {
 public:
  /** @brief No strides: the tensor is compact and row-major. */
  constexpr TensorByteStridesView() noexcept = default;
  /** @brief No strides: the tensor is compact and row-major. */
  constexpr TensorByteStridesView(std::nullopt_t /*none*/) noexcept {}  // NOLINT: implicit
  /** @brief `count` byte strides at `strides`. */
  constexpr TensorByteStridesView(const std::int64_t* strides, std::size_t count) noexcept
      : data_(strides), size_(count), has_value_(true) {}
  /** @brief The byte strides in `strides`. */
  TensorByteStridesView(const std::vector<std::int64_t>& strides) noexcept  // NOLINT: implicit
      : TensorByteStridesView(strides.data(), strides.size()) {}
  /** @brief The byte strides in `strides`. */
  template <std::size_t N>
  constexpr TensorByteStridesView(  // NOLINT: implicit, as from a span
      const std::array<std::int64_t, N>& strides) noexcept
      : TensorByteStridesView(strides.data(), N) {}
#if __cplusplus >= 202002L
  /** @brief The byte strides in `strides` (C++20). */
  constexpr TensorByteStridesView(  // NOLINT: implicit, as Holoscan 5.0's
      std::span<const std::int64_t> strides) noexcept
      : TensorByteStridesView(strides.data(), strides.size()) {}
  /** @brief The byte strides in `strides`, or none (C++20). */
  constexpr TensorByteStridesView(  // NOLINT: implicit, as Holoscan 5.0's
      std::optional<std::span<const std::int64_t>> strides) noexcept {
    if (strides.has_value()) {
      *this = TensorByteStridesView(strides->data(), strides->size());
    }
  }
#endif

  /** @brief Whether strides were given. */
  constexpr bool has_value() const noexcept { return has_value_; }
  /** @brief The first stride (null when none were given). */
  constexpr const std::int64_t* data() const noexcept { return data_; }
  /** @brief How many strides were given. */
  constexpr std::size_t size() const noexcept { return size_; }

 private:
  const std::int64_t* data_ = nullptr;
  std::size_t size_ = 0;
  bool has_value_ = false;
};

/**
 * @brief A Tensor over `data`, which `owner` keeps alive: no allocation of the elements, writer
 *        authority, this build's DLPack version and no flags.
 *
 * `byte_strides` are in bytes (none: compact row-major) and must be non-negative multiples of
 * itemsize(); they become DLPack element strides. The device follows `storage_type`: kSystem is
 * kDLCPU, kHost kDLCUDAHost, kCudaManaged kDLCUDAManaged (device 0), kDevice kDLCUDA on `device`,
 * or on the device cudaPointerGetAttributes names when `device` is negative. The layout is then
 * checked as an import is (ndim, dtype, extents, sizes, strides and the addressed span in int64).
 * Every rejection is kInvalidArgument and keeps nothing: "make_tensor pointer is null",
 * "make_tensor memory reference is null", "Tensor byte strides must be non-negative", "Tensor
 * byte strides must be divisible by item size", "Unsupported tensor memory storage type",
 * "Tensor storage type does not match the CUDA pointer memory type" (Holoscan 5.0's messages),
 * or the field an import would name.
 */
HOLOSCAN_DLPACK_API expected<Tensor, Error> make_tensor(
    std::vector<std::int64_t> shape, DLDataType dtype, TensorByteStridesView byte_strides,
    MemoryStorageType storage_type, void* data, std::shared_ptr<TensorMemoryReference> owner,
    int device);

/** @brief make_tensor with device -1 (kDevice memory takes the pointer's device). */
HOLOSCAN_DLPACK_API expected<Tensor, Error> make_tensor(
    std::vector<std::int64_t> shape, DLDataType dtype, TensorByteStridesView byte_strides,
    MemoryStorageType storage_type, void* data, std::shared_ptr<TensorMemoryReference> owner);

/** @brief How make_tensor gives back memory it wraps: called once with the data pointer. */
using TensorMemoryRelease = std::function<expected<void, Error>(void*)>;

/**
 * @brief make_tensor whose owner calls `release(data)` exactly once, after the last Tensor and
 *        export are gone and the GPU passed every deallocation and readiness point recorded on
 *        the tensor (possibly on the library's release thread: `release` must not assume the
 *        caller's thread). A failure it returns (or an exception it throws) is contained as a
 *        DLPack deleter's is: reported on stderr and counted in failed_releases(), since nobody
 *        is left to receive it. A null `release` releases nothing. A rejection keeps nothing and
 *        never calls `release`: the memory stays the caller's.
 */
HOLOSCAN_DLPACK_API expected<Tensor, Error> make_tensor(std::vector<std::int64_t> shape,
                                                        DLDataType dtype,
                                                        TensorByteStridesView byte_strides,
                                                        MemoryStorageType storage_type, void* data,
                                                        TensorMemoryRelease release);

/**
 * @brief Points `tensor` at `data`, as make_tensor with a release function would build it, on
 *        `device` (a negative one, -1 by default as Holoscan 5.0's `Allocator::kUnknownDeviceId`:
 *        kDevice memory takes the pointer's device, as make_tensor's).
 *
 * On success `tensor` holds a new context with writer authority, and its former context goes as
 * by assignment (other Tensors over it keep it); `release(data)` runs exactly once, after the
 * last Tensor and export over the new context are gone and the GPU passed every point recorded
 * on it, never under a lock of the library; a failure it returns, or an exception it throws, is
 * reported on stderr and counted in failed_releases(). A null `release` releases nothing. A
 * rejection leaves `tensor` untouched and never calls `release`: the memory stays the caller's.
 * Rejections are make_tensor's, kInvalidArgument, "wrap_memory: ..." but for a null `data`:
 * "wrap_memory pointer is null" (Holoscan 5.0's message).
 */
HOLOSCAN_DLPACK_API expected<void, Error> wrap_memory(Tensor& tensor,
                                                      std::vector<std::int64_t> shape,
                                                      DLDataType dtype,
                                                      TensorByteStridesView byte_strides,
                                                      MemoryStorageType storage_type, void* data,
                                                      TensorMemoryRelease release, int device = -1);

#if __cplusplus >= 202002L
/** @brief make_tensor with the shape in a span, as Holoscan 5.0 declares it (C++20). */
inline expected<Tensor, Error> make_tensor(std::span<const std::int64_t> shape, DLDataType dtype,
                                           TensorByteStridesView byte_strides,
                                           MemoryStorageType storage_type, void* data,
                                           std::shared_ptr<TensorMemoryReference> owner,
                                           int device) {
  return make_tensor(std::vector<std::int64_t>(shape.begin(), shape.end()), dtype, byte_strides,
                     storage_type, data, std::move(owner), device);
}

/** @brief make_tensor with the shape in a span, as Holoscan 5.0 declares it (C++20). */
inline expected<Tensor, Error> make_tensor(std::span<const std::int64_t> shape, DLDataType dtype,
                                           TensorByteStridesView byte_strides,
                                           MemoryStorageType storage_type, void* data,
                                           std::shared_ptr<TensorMemoryReference> owner) {
  return make_tensor(std::vector<std::int64_t>(shape.begin(), shape.end()), dtype, byte_strides,
                     storage_type, data, std::move(owner));
}

/** @brief make_tensor with the shape in a span, as Holoscan 5.0 declares it (C++20). */
inline expected<Tensor, Error> make_tensor(std::span<const std::int64_t> shape, DLDataType dtype,
                                           TensorByteStridesView byte_strides,
                                           MemoryStorageType storage_type, void* data,
                                           TensorMemoryRelease release) {
  return make_tensor(std::vector<std::int64_t>(shape.begin(), shape.end()), dtype, byte_strides,
                     storage_type, data, std::move(release));
}

/** @brief wrap_memory with the shape in a span, as Holoscan 5.0 declares it (C++20). */
inline expected<void, Error> wrap_memory(Tensor& tensor, std::span<const std::int64_t> shape,
                                         DLDataType dtype, TensorByteStridesView byte_strides,
                                         MemoryStorageType storage_type, void* data,
                                         TensorMemoryRelease release, int device = -1) {
  return wrap_memory(tensor, std::vector<std::int64_t>(shape.begin(), shape.end()), dtype,
                     byte_strides, storage_type, data, std::move(release), device);
}

// A braced shape ({}, a 0-d tensor; {2, 3}) or an initializer_list converts to both the vector and
// the span above, neither better: these take it first, as 5.0's span-only overloads do.

/** @brief make_tensor with a braced shape (C++20: chosen over the vector and span forms). */
inline expected<Tensor, Error> make_tensor(std::initializer_list<std::int64_t> shape,
                                           DLDataType dtype, TensorByteStridesView byte_strides,
                                           MemoryStorageType storage_type, void* data,
                                           std::shared_ptr<TensorMemoryReference> owner,
                                           int device) {
  return make_tensor(std::vector<std::int64_t>(shape), dtype, byte_strides, storage_type, data,
                     std::move(owner), device);
}

/** @brief make_tensor with a braced shape (C++20: chosen over the vector and span forms). */
inline expected<Tensor, Error> make_tensor(std::initializer_list<std::int64_t> shape,
                                           DLDataType dtype, TensorByteStridesView byte_strides,
                                           MemoryStorageType storage_type, void* data,
                                           std::shared_ptr<TensorMemoryReference> owner) {
  return make_tensor(std::vector<std::int64_t>(shape), dtype, byte_strides, storage_type, data,
                     std::move(owner));
}

/** @brief make_tensor with a braced shape (C++20: chosen over the vector and span forms). */
inline expected<Tensor, Error> make_tensor(std::initializer_list<std::int64_t> shape,
                                           DLDataType dtype, TensorByteStridesView byte_strides,
                                           MemoryStorageType storage_type, void* data,
                                           TensorMemoryRelease release) {
  return make_tensor(std::vector<std::int64_t>(shape), dtype, byte_strides, storage_type, data,
                     std::move(release));
}

/** @brief wrap_memory with a braced shape (C++20: chosen over the vector and span forms). */
inline expected<void, Error> wrap_memory(Tensor& tensor, std::initializer_list<std::int64_t> shape,
                                         DLDataType dtype, TensorByteStridesView byte_strides,
                                         MemoryStorageType storage_type, void* data,
                                         TensorMemoryRelease release, int device = -1) {
  return wrap_memory(tensor, std::vector<std::int64_t>(shape), dtype, byte_strides, storage_type,
                     data, std::move(release), device);
}
#endif

}  // namespace holoscan
