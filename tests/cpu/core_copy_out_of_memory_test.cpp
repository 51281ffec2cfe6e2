// Covers the core's copies, conversions and wrappers out of host memory, with every allocation
// failing from the n-th on: each returns its result or its error (kResourceExhausted when the heap
// refused), never an exception, and nothing is leaked or released twice.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "dlpack/recycler.hpp"
#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack_utils.hpp"
#include "holoscan/make_tensor.hpp"
#include "holoscan/tensor.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/allocation_sweep.hpp"
#include "support/counting_producer.hpp"
#include "support/gtest_printers.hpp"
#include "support/tensor_helpers.hpp"

namespace holoscan {
namespace {

// A release function that counts its calls in `*count` (a plain pointer: copies of the function,
// made as the sweep retries, count into the same place).
TensorMemoryRelease counting_release(int* count) {
  return [count](void*) -> expected<void, Error> {
    ++*count;
    return {};
  };
}

using test::CountingProducer;
using test::import_or_die;
using test::TensorSpec;

// What one attempt saw: whether an exception escaped, and the error code if it was refused.
struct Outcome {
  std::optional<bool> threw;
  std::optional<ErrorCode> refused;
};

// Runs `attempt` with every allocation failing after the first `skip`, for skip = 0, 1, ...
// until one ran without a failure. Each refusal must be `allowed` or kResourceExhausted; the
// last attempt's outcome is returned.
Outcome sweep(const std::function<void(Outcome&)>& attempt,
              std::optional<ErrorCode> allowed = std::nullopt) {
  Outcome outcome;
  test::sweep_allocations([&] { outcome = Outcome{}; }, [&] { attempt(outcome); },
                          [&](std::uint64_t skip) {
                            EXPECT_TRUE(outcome.threw.has_value());
                            EXPECT_FALSE(outcome.threw.value_or(true))
                                << "an exception escaped with " << skip << " allocations allowed";
                            if (outcome.refused.has_value() &&
                                *outcome.refused != ErrorCode::kResourceExhausted) {
                              EXPECT_EQ(outcome.refused, allowed)
                                  << "with " << skip << " allocations allowed";
                            }
                          });
  return outcome;
}

// Calls `call` (returning some expected), noting whether it threw or was refused.
template <class Call>
void attempt_call(Outcome& outcome, Call&& call) {
  try {
    auto result = call();
    outcome.threw = false;
    if (!result) {
      outcome.refused = result.error().code;
    }
  } catch (...) {
    outcome.threw = true;
  }
}

TEST(CoreCopyOutOfMemory, HostCopyNeverThrows) {
  CountingProducer producer;
  {
    const Tensor source = import_or_die(producer);
    const Outcome last = sweep(
        [&](Outcome& outcome) { attempt_call(outcome, [&] { return source.copy(nullptr); }); });
    EXPECT_FALSE(last.refused.has_value());
    sweep([&](Outcome& outcome) {
      attempt_call(outcome, [&] { return source.copy_to(DLDevice{kDLCPU, 0}, nullptr); });
    });
    const Tensor empty;
    sweep([&](Outcome& outcome) { attempt_call(outcome, [&] { return empty.copy(nullptr); }); },
          ErrorCode::kInvalidArgument);
    sweep(
        [&](Outcome& outcome) {
          attempt_call(outcome, [&] { return source.copy_to(DLDevice{kDLOpenCL, 0}, nullptr); });
        },
        ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(CoreCopyOutOfMemory, CopyToHostNeverThrows) {
  CountingProducer producer;
  {
    const Tensor source = import_or_die(producer);  // 2 x 3 float32
    std::vector<float> out(6);
    for (const bool async : {false, true}) {
      for (const std::size_t bytes : {out.size() * sizeof(float), std::size_t{4}}) {
        const Outcome last = sweep(
            [&](Outcome& outcome) {
              attempt_call(outcome, [&] {
                return async ? source.copy_to_host_async(out.data(), bytes, nullptr)
                             : source.copy_to_host(out.data(), bytes, nullptr);
              });
            },
            ErrorCode::kInvalidArgument);
        EXPECT_EQ(last.refused.has_value(), bytes == 4);
      }
    }
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

#if HOLOSCAN_DLPACK_RECYCLE
// Pool control blocks come from the heap under AddressSanitizer: the sweep would count them.
TEST(CoreCopyOutOfMemory, CopyToHostPoolNeverThrowsAndGivesItsBlockBack) {
  CountingProducer producer;
  TensorPoolConfig config;
  config.memory = PoolMemory::kHost;
  config.block_bytes = 256;
  config.block_count = 2;
  auto pool = TensorPool::create(config);
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  {
    const Tensor source = import_or_die(producer);
    sweep([&](Outcome& outcome) {
      attempt_call(outcome, [&] { return source.copy_to(**pool, nullptr); });
    });
    EXPECT_EQ((*pool)->available_blocks(), 2u);
    TensorSpec spec;
    spec.dtype = DLDataType{kDLFloat, 64, 1};
    spec.shape = {64};  // 512 bytes: more than a block holds
    const Tensor large = import_or_die(producer, spec);
    sweep(
        [&](Outcome& outcome) {
          attempt_call(outcome, [&] { return large.copy_to(**pool, nullptr); });
        },
        ErrorCode::kInvalidArgument);
    EXPECT_EQ((*pool)->available_blocks(), 2u);
  }
  EXPECT_EQ(producer.deleter_calls(), 2);
}
#endif

TEST(CoreCopyOutOfMemory, MutableDataRefusalNeverThrows) {
  CountingProducer producer;
  {
    const Tensor empty_source;
    Tensor empty = empty_source;
    sweep([&](Outcome& outcome) { attempt_call(outcome, [&] { return empty.mutable_data(); }); },
          ErrorCode::kInvalidArgument);
    Tensor read_only = import_or_die(producer);  // an import has read-only authority
    sweep(
        [&](Outcome& outcome) { attempt_call(outcome, [&] { return read_only.mutable_data(); }); },
        ErrorCode::kPermissionDenied);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(CoreCopyOutOfMemory, SynchronizeRefusalsNeverThrow) {
  CountingProducer producer;
  {
    const Tensor empty;
    const Tensor host = import_or_die(producer);  // no readiness contract
    for (const Tensor* tensor : {&empty, &host}) {
      const std::optional<ErrorCode> allowed =
          tensor == &empty ? ErrorCode::kInvalidArgument : ErrorCode::kNotImplemented;
      sweep(
          [&](Outcome& outcome) {
            attempt_call(outcome, [&] { return tensor->synchronize_for_host(); });
          },
          allowed);
      sweep(
          [&](Outcome& outcome) {
            attempt_call(outcome, [&] { return tensor->synchronize_for_consumer_stream(nullptr); });
          },
          allowed);
    }
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// Their successes allocate nothing: only the refusals are swept.
TEST(CoreCopyOutOfMemory, DtypeConversionRefusalsNeverThrow) {
  for (const char* typestr : {"not a type string at all", "<f3"}) {
    sweep(
        [&](Outcome& outcome) {
          attempt_call(outcome, [&] { return dldatatype_from_typestr(typestr); });
        },
        ErrorCode::kInvalidArgument);
  }
  const DLDataType dtype{kDLFloat, 24, 3};
  sweep([&](Outcome& outcome) { attempt_call(outcome, [&] { return numpy_dtype(dtype); }); },
        ErrorCode::kInvalidArgument);
}

// Its success allocates nothing: only the refusals (each field out of its range) are swept.
TEST(CoreCopyOutOfMemory, ReleaseThreadOptionsRefusalsNeverThrow) {
  const ReleaseThreadOptions before = release_thread_options();
  ReleaseThreadOptions no_interval;
  no_interval.poll_interval = std::chrono::microseconds(0);
  ReleaseThreadOptions endless_drain;
  endless_drain.exit_drain = std::chrono::hours(25);
  for (const ReleaseThreadOptions& options : {no_interval, endless_drain}) {
    sweep(
        [&](Outcome& outcome) {
          attempt_call(outcome, [&] { return set_release_thread_options(options); });
        },
        ErrorCode::kInvalidArgument);
  }
  const ReleaseThreadOptions after = release_thread_options();
  EXPECT_EQ(after.poll_interval, before.poll_interval);  // refused: nothing changed
  EXPECT_EQ(after.exit_drain, before.exit_drain);
}

class PlainOwner final : public TensorMemoryReference {};

// The arguments are made before the failures are armed: an empty shape and a release that fits
// std::function's inline room are copied without the heap.
TEST(CoreCopyOutOfMemory, MakeTensorNeverThrows) {
  std::vector<float> memory(1);
  const std::shared_ptr<TensorMemoryReference> owner = std::make_shared<PlainOwner>();
  const DLDataType kFloat32{kDLFloat, 32, 1};
  for (void* data : {static_cast<void*>(memory.data()), static_cast<void*>(nullptr)}) {
    const std::optional<ErrorCode> allowed =
        data == nullptr ? std::optional<ErrorCode>(ErrorCode::kInvalidArgument) : std::nullopt;
    sweep(
        [&](Outcome& outcome) {
          attempt_call(outcome, [&] {
            return make_tensor({}, kFloat32, {}, MemoryStorageType::kSystem, data, owner);
          });
        },
        allowed);
    sweep(
        [&](Outcome& outcome) {
          attempt_call(outcome, [&] {
            return make_tensor({}, kFloat32, {}, MemoryStorageType::kSystem, data, owner, 0);
          });
        },
        allowed);
    int released = 0;
    int accepted = 0;
    const TensorMemoryRelease release = counting_release(&released);
    sweep(
        [&](Outcome& outcome) {
          attempt_call(outcome, [&] {
            auto tensor = make_tensor({}, kFloat32, {}, MemoryStorageType::kSystem, data, release);
            accepted += tensor.has_value() ? 1 : 0;
            return tensor;
          });
        },
        allowed);
    flush_deferred_releases();
    EXPECT_EQ(released, accepted);  // once per Tensor made, never for a refusal
  }
  sweep(
      [&](Outcome& outcome) {
        attempt_call(outcome, [&] {
          return make_tensor({}, kFloat32, {}, MemoryStorageType::kSystem, memory.data(),
                             std::shared_ptr<TensorMemoryReference>());
        });
      },
      ErrorCode::kInvalidArgument);
}

// A refusal leaves the target as it was and never calls the release; each success calls it once.
TEST(CoreCopyOutOfMemory, WrapMemoryNeverThrows) {
  std::vector<float> memory(1);
  const DLDataType kFloat32{kDLFloat, 32, 1};
  int released = 0;
  int accepted = 0;
  const TensorMemoryRelease release = counting_release(&released);
  for (void* data : {static_cast<void*>(memory.data()), static_cast<void*>(nullptr)}) {
    const std::optional<ErrorCode> allowed =
        data == nullptr ? std::optional<ErrorCode>(ErrorCode::kInvalidArgument) : std::nullopt;
    Tensor target;
    sweep(
        [&](Outcome& outcome) {
          attempt_call(outcome, [&] {
            const void* before = target.data();
            auto wrapped =
                wrap_memory(target, {}, kFloat32, {}, MemoryStorageType::kSystem, data, release, 0);
            accepted += wrapped.has_value() ? 1 : 0;
            EXPECT_EQ(target.data(), wrapped.has_value() ? data : before);
            return wrapped;
          });
        },
        allowed);
  }
  flush_deferred_releases();
  EXPECT_EQ(released, accepted);  // once per wrap that took the memory, never for a refusal
}

}  // namespace
}  // namespace holoscan
