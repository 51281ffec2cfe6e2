#pragma once
// A test producer of DLPack tensors over host memory that counts its deleter calls.
#include <dlpack/dlpack.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace holoscan::test {

/** @brief What a CountingProducer puts in the managed tensor it builds. */
struct TensorSpec {
  DLPackVersion version{1, 0};                       ///< Versioned tensors only.
  std::uint64_t flags = 0;                           ///< Versioned tensors only.
  std::vector<std::int64_t> shape{2, 3};             ///< Copied into producer-owned storage.
  std::optional<std::int32_t> ndim;                  ///< Defaults to shape.size().
  bool null_shape = false;                           ///< Give a null shape pointer.
  std::optional<std::vector<std::int64_t>> strides;  ///< In elements; none gives null strides.
  DLDataType dtype{kDLFloat, 32, 1};
  DLDevice device{kDLCPU, 0};
  bool null_data = false;         ///< Give a null data pointer (and allocate nothing).
  std::uint64_t byte_offset = 0;  ///< Also added to the bytes allocated.
  bool null_deleter = false;      ///< The producer then frees the tensor in its own destructor.
};

/**
 * @brief Builds DLManagedTensorVersioned and legacy DLManagedTensor objects over host memory.
 *
 * Each tensor, its shape/strides and its data live in one record behind manager_ctx, freed by the
 * deleter. The counters are shared with the records, so a late deleter never touches a dead
 * producer.
 */
class CountingProducer {
 public:
  CountingProducer();
  ~CountingProducer();
  CountingProducer(const CountingProducer&) = delete;
  CountingProducer& operator=(const CountingProducer&) = delete;

  /** @brief A new DLPack >= 1.0 managed tensor; ownership goes to the caller. */
  DLManagedTensorVersioned* make_versioned(const TensorSpec& spec = {});
  /** @brief A new legacy managed tensor (spec.version and spec.flags unused). */
  DLManagedTensor* make_legacy(const TensorSpec& spec = {});

  /** @brief Deleter calls on tensors made by this producer. */
  int deleter_calls() const noexcept;
  /** @brief The thread the last deleter ran on (default-constructed before any). */
  std::thread::id last_deleter_thread() const;

  struct State;
  struct Record;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace holoscan::test
