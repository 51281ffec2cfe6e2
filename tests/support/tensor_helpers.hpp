#pragma once
// Small helpers shared by the CPU tests of Tensor: an import that must succeed, the owner behind a
// tensor, and a writable view of an import.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "dlpack/context_access.hpp"
#include "holoscan/dlpack.hpp"
#include "holoscan/tensor.hpp"
#include "support/counting_producer.hpp"

namespace holoscan::test {

/** @brief Imports a tensor made by `producer` from `spec`; an empty Tensor (and a failure) if
 *         the import is refused. */
inline Tensor import_or_die(CountingProducer& producer, const TensorSpec& spec = {}) {
  expected<Tensor> result = make_tensor_from_dlpack_versioned(producer.make_versioned(spec));
  EXPECT_TRUE(result.has_value()) << result.error().message;
  return result.has_value() ? std::move(*result) : Tensor();
}

/** @brief The library's stream-tracking owner behind `tensor`, or null. */
inline std::shared_ptr<StreamTrackedReference> tracked(const Tensor& tensor) {
  return std::dynamic_pointer_cast<StreamTrackedReference>(tensor.memory_reference());
}

/**
 * @brief A new context with `imported`'s view and memory owner, and writer authority, for the
 *        paths that refuse read-only authority (a legacy export, mutable_data()).
 */
inline Tensor writable_view_of(const Tensor& imported) {
  auto context = std::make_shared<DLManagedTensorContext>(*imported.dl_ctx());
  detail::ContextAccess::restore_writable(*context);
  context->tensor.flags &= ~static_cast<std::uint64_t>(DLPACK_FLAG_BITMASK_READ_ONLY);
  return Tensor(std::move(context));
}

}  // namespace holoscan::test
