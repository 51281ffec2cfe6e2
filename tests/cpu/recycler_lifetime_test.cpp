// Covers the free lists behind imports and exports (src/dlpack/recycler.hpp) where blocks cross
// threads and processes: made on a thread that has ended and dropped on another, dropped while
// the process exits (thread_local and static destructors), used by a forked child, and given
// back only by a thread that never takes (the lists stay bounded).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "dlpack/recycler.hpp"
#include "holoscan/tensor.hpp"
#include "support/counting_producer.hpp"
#include "support/tensor_helpers.hpp"

namespace holoscan {
namespace {

using test::CountingProducer;
using test::import_or_die;
using test::TensorSpec;

// What one thread imports and exports: tensors and the exports of every other one.
struct Made {
  std::vector<Tensor> tensors;
  std::vector<DLManagedTensorVersioned*> exports;
};

Made make_some(CountingProducer& producer, int count) {
  Made made;
  TensorSpec spec;
  spec.shape = {4, 5, 6};
  for (int i = 0; i < count; ++i) {
    made.tensors.push_back(import_or_die(producer, spec));
    if (i % 2 == 0) {
      expected<DLManagedTensorVersioned*> exported = made.tensors.back().to_dlpack_versioned();
      EXPECT_TRUE(exported.has_value());
      made.exports.push_back(exported.value_or(nullptr));
    }
  }
  return made;
}

void drop(Made& made) {
  for (DLManagedTensorVersioned* managed : made.exports) {
    managed->deleter(managed);
  }
  made.exports.clear();
  made.tensors.clear();
}

// Objects of their own kind, counted as they are freed for good.
struct BoundedKind {
  static inline std::atomic<int> released{0};
  static void release(void* object) noexcept {
    ++released;
    delete static_cast<int*>(object);
  }
};

// More than a thread keeps, so that its list spills and is closed with blocks in it.
constexpr int kPerThread = 3 * static_cast<int>(detail::PointerCache<BoundedKind>::kLocal);

TEST(RecyclerLifetime, WhatAnEndedThreadMadeIsDroppedOnOthersAndReused) {
  CountingProducer producer;
  Made made;
  std::thread([&] { made = make_some(producer, kPerThread); }).join();
  Made second;
  std::thread([&] { second = make_some(producer, kPerThread); }).join();
  std::thread([&] { drop(made); }).join();  // a third thread gives the first one's blocks back
  drop(second);
  EXPECT_EQ(producer.deleter_calls(), 2 * kPerThread);
  // The blocks come out again on threads that did not make them, each once.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 8; ++round) {
        Made again = make_some(producer, kPerThread);
        drop(again);
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(producer.deleter_calls(), 2 * kPerThread + 4 * 8 * kPerThread);
}

// A thread that only gives back what another allocated keeps at most its own list and the shared
// one; the rest goes back to the heap at once.
TEST(RecyclerLifetime, AThreadThatOnlyGivesKeepsABoundedNumber) {
  using Cache = detail::PointerCache<BoundedKind>;
  constexpr int kGiven = 4 * static_cast<int>(Cache::kShared);
  constexpr int kKept = static_cast<int>(Cache::kLocal + Cache::kShared);
  std::vector<int*> objects;
  for (int i = 0; i < kGiven; ++i) {
    objects.push_back(new int(i));
  }
  std::atomic<bool> given{false};
  std::atomic<bool> done{false};
  std::thread giver([&] {
    for (int* object : objects) {
      Cache::give(object);
    }
    given = true;
    while (!done) {
      std::this_thread::yield();  // alive: its own list stays with it
    }
  });
  while (!given) {
    std::this_thread::yield();
  }
  EXPECT_GE(BoundedKind::released.load(), kGiven - kKept);
  done = true;
  giver.join();
  int kept = 0;
  while (void* object = Cache::take()) {
    delete static_cast<int*>(object);
    ++kept;
  }
  EXPECT_LE(kept, static_cast<int>(Cache::kShared));
  EXPECT_EQ(kept + BoundedKind::released.load(), kGiven);  // none lost, none freed twice
}

// Tensors and an export dropped as the process exits: by a thread_local destructor of the main
// thread (after its own lists were closed), then by a static destructor, with blocks made on a
// thread that had ended long before.
struct HeldUntilExit {
  CountingProducer producer;
  Made made;
  ~HeldUntilExit() {
    drop(made);
    std::fprintf(stderr, "deleters at exit: %d\n", producer.deleter_calls());
  }
};

struct HeldByTheMainThread {
  Made made;
  ~HeldByTheMainThread() { drop(made); }
};

[[noreturn]] void exit_holding_tensors() {
  thread_local HeldByTheMainThread by_thread;  // made before the thread's lists: destroyed after
  static HeldUntilExit held;
  std::thread([] { held.made = make_some(held.producer, kPerThread); }).join();
  by_thread.made = make_some(held.producer, kPerThread);
  Made dropped_now = make_some(held.producer, kPerThread);
  drop(dropped_now);
  std::exit(0);
}

TEST(RecyclerLifetime, TensorsDroppedWhileTheProcessExits) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(exit_holding_tensors(), ::testing::ExitedWithCode(0),
              "deleters at exit: " + std::to_string(3 * kPerThread) + "\n");
}

// A child forked after the parent kept blocks takes and gives them as its own.
TEST(RecyclerLifetime, AForkedChildUsesWhatItsParentKept) {
  CountingProducer producer;
  Made warm = make_some(producer, kPerThread);
  drop(warm);
  Made held = make_some(producer, kPerThread / 2);  // the parent's, copied into the child
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    CountingProducer own;
    for (int round = 0; round < 8; ++round) {
      Made made = make_some(own, kPerThread);
      drop(made);
    }
    drop(held);
    const bool ok = own.deleter_calls() == 8 * kPerThread &&
                    producer.deleter_calls() == kPerThread + kPerThread / 2;
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  drop(held);
  EXPECT_EQ(producer.deleter_calls(), kPerThread + kPerThread / 2);
}

}  // namespace
}  // namespace holoscan
