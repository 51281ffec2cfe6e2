// Covers the core's out-of-host-memory paths with every allocation failing from the n-th on:
// what never throws returns its error, and nothing is held, leaked or released twice.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "holoscan/tensor.hpp"
#include "support/allocation_sweep.hpp"
#include "support/counting_producer.hpp"
#include "support/gtest_printers.hpp"
#include "support/tensor_helpers.hpp"

namespace holoscan {
namespace {

using test::CountingProducer;
using test::import_or_die;
using test::TensorSpec;
using test::tracked;

// Runs `attempt` with every allocation failing after the first `skip`, for skip = 0, 1, ...
// until one ran without a failure, each after `prepare` (not failing). `attempt` sets whether an
// exception escaped.
void sweep(const std::function<void(std::optional<bool>& threw)>& attempt,
           const std::function<void()>& prepare = [] {}) {
  std::optional<bool> threw;
  test::sweep_allocations(
      [&] {
        prepare();
        threw.reset();
      },
      [&] { attempt(threw); },
      [&](std::uint64_t skip) {
        ASSERT_TRUE(threw.has_value());
        EXPECT_FALSE(*threw) << "an exception escaped with " << skip << " allocations allowed";
      });
}

// An export of `tensor` that must not throw; the owner it returns is deleted at once.
template <class Managed>
void export_without_throwing(const Tensor& tensor,
                             expected<Managed*, Error> (Tensor::*to)() const,
                             std::optional<bool>& threw,
                             std::optional<ErrorCode>& refused) {
  try {
    expected<Managed*, Error> exported = (tensor.*to)();
    threw = false;
    if (exported) {
      (*exported)->deleter(*exported);
    } else {
      refused = exported.error().code;
    }
  } catch (...) {
    threw = true;
  }
}

TEST(CoreOutOfMemory, VersionedExportNeverThrows) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {2, 3, 1, 1, 1, 1, 1, 2, 2};  // past the owner's inline room: the heap is asked
  {
    const Tensor tensor = import_or_die(producer, spec);
    auto reference = tracked(tensor);
    ASSERT_NE(reference, nullptr);
    std::optional<ErrorCode> refused;
    sweep([&](std::optional<bool>& threw) {
      export_without_throwing(tensor, &Tensor::to_dlpack_versioned, threw, refused);
    });
    ASSERT_TRUE(refused.has_value());
    EXPECT_EQ(*refused, ErrorCode::kResourceExhausted);
    EXPECT_EQ(reference->handle_claims(), 1);  // only the Tensor's own claim
    EXPECT_EQ(reference->unpaired_releases(), 0u);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(CoreOutOfMemory, LegacyExportRefusalNeverThrows) {
  CountingProducer producer;
  {
    const Tensor tensor = import_or_die(producer);  // read-only authority: refused
    auto reference = tracked(tensor);
    ASSERT_NE(reference, nullptr);
    std::optional<ErrorCode> refused;
    sweep([&](std::optional<bool>& threw) {
      export_without_throwing(tensor, &Tensor::to_dlpack, threw, refused);
    });
    EXPECT_EQ(reference->handle_claims(), 1);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(CoreOutOfMemory, ExportOfAnEmptyTensorNeverThrows) {
  const Tensor empty;
  std::optional<ErrorCode> refused;
  sweep([&](std::optional<bool>& threw) {
    export_without_throwing(empty, &Tensor::to_dlpack_versioned, threw, refused);
  });
  sweep([&](std::optional<bool>& threw) {
    export_without_throwing(empty, &Tensor::to_dlpack, threw, refused);
  });
}

// An import that must not throw; on success the Tensor is dropped at once.
template <class Managed>
void import_without_throwing(Managed* managed, expected<Tensor, Error> (*import)(Managed*),
                             std::optional<bool>& threw, std::optional<ErrorCode>& refused,
                             bool& imported) {
  try {
    expected<Tensor, Error> tensor = import(managed);
    threw = false;
    imported = imported || tensor.has_value();
    if (!tensor) {
      refused = tensor.error().code;
    }
  } catch (...) {
    threw = true;
  }
}

// Holoscan 5.0's rule: a refused import (out of memory included) leaves the tensor with the
// caller, who frees it; an accepted one is freed by the library, once.
template <class Managed>
void expect_import_never_throws(CountingProducer& producer, Managed* (CountingProducer::*make)(
                                                                 const TensorSpec&),
                                expected<Tensor, Error> (*import)(Managed*),
                                const TensorSpec& spec) {
  const int before = producer.deleter_calls();
  int freed = 0;
  Managed* managed = nullptr;
  bool imported = false;
  const auto finish = [&] {
    if (managed != nullptr && !imported) {
      managed->deleter(managed);  // still the caller's
    }
    freed += managed != nullptr ? 1 : 0;
  };
  sweep(
      [&](std::optional<bool>& threw) {
        std::optional<ErrorCode> refused;
        import_without_throwing(managed, import, threw, refused, imported);
      },
      [&] {
        finish();
        managed = (producer.*make)(spec);
        imported = false;
      });
  finish();
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls() - before, freed);
}

TEST(CoreOutOfMemory, RefusedImportNeverThrows) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {2, -3};  // refused, with a message naming the extent
  expect_import_never_throws(producer, &CountingProducer::make_versioned,
                             &make_tensor_from_dlpack_versioned, spec);
  expect_import_never_throws(producer, &CountingProducer::make_legacy, &make_tensor_from_dlpack,
                             spec);
}

}  // namespace
}  // namespace holoscan
