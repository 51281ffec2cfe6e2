// Holoscan 5.0-era code that includes only <holoscan/memory/memory_storage_type.hpp> gets
// MemoryStorageType; code that includes only <holoscan/memory/tensor_storage.hpp> gets
// make_tensor, wrap_memory and TensorByteStridesView, in their C++20 span forms when compiled as
// C++20 (syntax only).
#ifdef HOLOSCAN_DLPACK_STORAGE_TYPE_ONLY
#include <holoscan/memory/memory_storage_type.hpp>

constexpr holoscan::MemoryStorageType kWhere = holoscan::MemoryStorageType::kCudaManaged;
static_assert(static_cast<int>(kWhere) == 3);
#else
#include <holoscan/memory/tensor_storage.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>
#if __cplusplus >= 202002L
#include <span>
#endif

holoscan::expected<void, holoscan::Error> wrap_then_make(holoscan::Tensor& tensor, void* data) {
  const std::array<std::int64_t, 2> shape{2, 3};
#if __cplusplus >= 202002L
  const std::span<const std::int64_t> extents(shape);
#else
  const std::vector<std::int64_t> extents(shape.begin(), shape.end());
#endif
  const holoscan::TensorByteStridesView compact = std::nullopt;
  auto wrapped = holoscan::wrap_memory(tensor, extents, DLDataType{kDLFloat, 32, 1}, compact,
                                       holoscan::MemoryStorageType::kSystem, data, {}, -1);
  if (!wrapped) {
    return wrapped;
  }
  auto made = holoscan::make_tensor(extents, DLDataType{kDLFloat, 32, 1}, compact,
                                    holoscan::MemoryStorageType::kSystem, data,
                                    holoscan::TensorMemoryRelease{});
  if (!made) {
    return holoscan::forward_error(std::move(made));
  }
  return {};
}
#endif
