// Covers the holds an import's owner lives by: each export keeps it alive (without its shared_ptr)
// and counts as a handle claim, no unpaired release ever takes an export's hold, and whichever
// hold goes last, on whichever thread, destroys the owner once.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "holoscan/dlpack.hpp"
#include "support/counting_producer.hpp"
#include "support/tensor_helpers.hpp"

namespace holoscan {
namespace {

using test::CountingProducer;
using test::import_or_die;
using test::TensorSpec;

// Writes 0, 1, 2, ... into the tensor's elements (host int32).
void fill(const Tensor& tensor) {
  auto* values = static_cast<std::int32_t*>(tensor.data());
  for (std::int64_t i = 0; i < tensor.size(); ++i) {
    values[i] = static_cast<std::int32_t>(i);
  }
}

// Whether the exported elements still read 0, 1, 2, ... (AddressSanitizer checks the reads).
bool reads_back(const DLManagedTensorVersioned& exported, std::int64_t count) {
  const auto* values = static_cast<const std::int32_t*>(exported.dl_tensor.data);
  for (std::int64_t i = 0; i < count; ++i) {
    if (values[i] != i) {
      return false;
    }
  }
  return true;
}

TensorSpec int_spec() {
  TensorSpec spec;
  spec.shape = {4, 8};
  spec.dtype = {kDLInt, 32, 1};
  return spec;
}

TEST(ExportHolds, SurplusReleasesNeverTakeAnExportsHold) {
  CountingProducer producer;
  Tensor tensor = import_or_die(producer, int_spec());
  fill(tensor);
  const StreamTrackedReference* owner = test::tracked(tensor).get();
  ASSERT_NE(owner, nullptr);
  expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  EXPECT_EQ(owner->handle_claims(), 2);  // the Tensor's and the export's
  tensor.release_handle();               // the Tensor's own claim, given back early
  tensor.release_handle();               // a caller's bug: counted, takes nothing
  tensor.release_handle();
  EXPECT_EQ(owner->handle_claims(), 1);  // the export's
  EXPECT_EQ(owner->unpaired_releases(), 2u);
  tensor = Tensor();  // its claim is gone already: one more unpaired release
  EXPECT_EQ(owner->unpaired_releases(), 3u);
  EXPECT_EQ(owner->handle_claims(), 1);
  EXPECT_EQ(producer.deleter_calls(), 0);  // the export still reads the producer's memory
  EXPECT_TRUE(reads_back(**exported, 32));
  (*exported)->deleter(*exported);
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// A holder that replaces the context's reference without moving its Tensor's claim leaves that
// claim on the import's owner for good: the owner still goes with its last hold.
TEST(ExportHolds, AClaimLeftBehindNeverKeepsTheOwner) {
  CountingProducer producer;
  Tensor tensor = import_or_die(producer, int_spec());
  fill(tensor);
  expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  tensor.dl_ctx()->memory_reference = std::make_shared<TensorMemoryReference>();
  tensor = Tensor();  // its release goes to the newcomer, a no-op
  EXPECT_EQ(producer.deleter_calls(), 0);
  EXPECT_TRUE(reads_back(**exported, 32));
  (*exported)->deleter(*exported);
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ExportHolds, ALegacyImportsExportOutlivesItsTensors) {
  CountingProducer producer;
  expected<Tensor> imported = make_tensor_from_dlpack(producer.make_legacy(int_spec()));
  ASSERT_TRUE(imported.has_value()) << imported.error().message;
  fill(*imported);
  expected<DLManagedTensorVersioned*> exported = imported->to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  expected<DLManagedTensorVersioned*> second = imported->to_dlpack_versioned();
  ASSERT_TRUE(second.has_value()) << second.error().message;
  *imported = Tensor();
  EXPECT_EQ(producer.deleter_calls(), 0);
  (*second)->deleter(*second);
  EXPECT_EQ(producer.deleter_calls(), 0);
  EXPECT_TRUE(reads_back(**exported, 32));
  (*exported)->deleter(*exported);
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ExportHolds, ATensorMadeAgainFromAnExportKeepsBothOwnersApart) {
  CountingProducer producer;
  Tensor tensor = import_or_die(producer, int_spec());
  fill(tensor);
  expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  expected<Tensor> again = make_tensor_from_dlpack_versioned(*exported);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  tensor = Tensor();
  EXPECT_EQ(producer.deleter_calls(), 0);  // held by the export, which the second import owns
  EXPECT_EQ(static_cast<const std::int32_t*>(again->data())[31], 31);
  *again = Tensor();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// Eight exports given back on eight threads while the main thread drops the last Tensor: the
// owner goes with whichever hold is last, once, and never under a reader.
TEST(ExportHolds, TheLastHoldOnAnyThreadDestroysTheOwnerOnce) {
  constexpr int kRounds = 200;
  constexpr int kExports = 8;
  CountingProducer producer;
  std::atomic<int> unreadable{0};
  for (int round = 0; round < kRounds; ++round) {
    Tensor tensor = import_or_die(producer, int_spec());
    fill(tensor);
    std::vector<DLManagedTensorVersioned*> exports;
    for (int i = 0; i < kExports; ++i) {
      expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
      ASSERT_TRUE(exported.has_value()) << exported.error().message;
      exports.push_back(*exported);
    }
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (DLManagedTensorVersioned* exported : exports) {
      threads.emplace_back([&, exported] {
        ready.fetch_add(1);
        while (ready.load() <= kExports) {
          std::this_thread::yield();  // nine threads on two cores: spinning out slices is slow
        }
        if (!reads_back(*exported, 32)) {
          unreadable.fetch_add(1);
        }
        exported->deleter(exported);
      });
    }
    while (ready.load() < kExports) {
      std::this_thread::yield();
    }
    ready.fetch_add(1);
    tensor = Tensor();
    for (std::thread& thread : threads) {
      thread.join();
    }
    ASSERT_EQ(producer.deleter_calls(), round + 1);
  }
  EXPECT_EQ(unreadable.load(), 0);
}

// Copies and exports of one import on many threads, the exports given back in another order than
// they were taken, every thread's last act a drop: the producer's deleter runs once, at the end.
TEST(ExportHolds, CopiesAndExportsOnManyThreadsReleaseTheImportOnce) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 500;
  CountingProducer producer;
  Tensor shared = import_or_die(producer, int_spec());
  fill(shared);
  std::vector<std::thread> threads;
  std::atomic<int> unreadable{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&unreadable, copy = shared] {
      std::vector<DLManagedTensorVersioned*> held;
      for (int i = 0; i < kPerThread; ++i) {
        Tensor again = copy;  // NOLINT(performance-unnecessary-copy-initialization)
        expected<DLManagedTensorVersioned*> exported = again.to_dlpack_versioned();
        if (exported.has_value()) {
          held.push_back(*exported);
        }
        if (held.size() == 4) {
          for (DLManagedTensorVersioned* one : held) {
            if (!reads_back(*one, 32)) {
              unreadable.fetch_add(1);
            }
            one->deleter(one);
          }
          held.clear();
        }
      }
      for (DLManagedTensorVersioned* one : held) {
        one->deleter(one);
      }
    });
  }
  shared = Tensor();
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(unreadable.load(), 0);
  EXPECT_EQ(producer.deleter_calls(), 1);
}

}  // namespace
}  // namespace holoscan
