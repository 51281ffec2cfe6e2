#pragma once
// Holoscan-style forward declarations after this library's headers: they name the tagged
// entities and compile with g++ and clang.
#include <holoscan/core/domain/tensor.hpp>

namespace holoscan {
class Tensor;
struct DLManagedTensorContext;
class TensorMemoryReference;
struct Error;
class RuntimeError;
enum class ErrorCode;
class TensorByteStridesView;
enum class MemoryStorageType;
}  // namespace holoscan

/** @brief Operator code that knows the types only by their forward declarations. */
inline std::int64_t extent_of(const holoscan::Tensor& tensor, int dim) {
  return tensor.shape()[static_cast<std::size_t>(dim)];
}
