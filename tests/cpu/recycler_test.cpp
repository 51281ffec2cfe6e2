// Covers the free lists behind imports and exports (src/recycler.hpp): what a thread keeps goes to
// the shared list when the thread ends, a full thread list spills to it, and a recycled context
// takes whatever shape the next import has.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "holoscan/tensor.hpp"
#include "dlpack/recycler.hpp"
#include "support/counting_producer.hpp"
#include "support/tensor_helpers.hpp"

namespace holoscan {
namespace {

using test::CountingProducer;
using test::import_or_die;
using test::TensorSpec;

// Objects of a kind of their own per test (the caches are per kind), counted as they are freed.
template <int kTest>
struct CountedKind {
  static inline std::atomic<int> released{0};
  static void release(void* object) noexcept {
    ++released;
    delete static_cast<int*>(object);
  }
};

template <class Cache>
int take_all() {
  int taken = 0;
  while (void* object = Cache::take()) {
    delete static_cast<int*>(object);
    ++taken;
  }
  return taken;
}

#if HOLOSCAN_DLPACK_RECYCLE
TEST(Recycler, WhatAThreadKeptGoesToTheSharedListAsItEnds) {
  using Kind = CountedKind<1>;
  using Cache = detail::PointerCache<Kind>;
  constexpr int kObjects = 5;
  std::thread([] {
    for (int i = 0; i < kObjects; ++i) {
      Cache::give(new int(i));
    }
  }).join();
  EXPECT_EQ(take_all<Cache>(), kObjects);  // none was lost with the thread, none freed
  EXPECT_EQ(Kind::released.load(), 0);
}

TEST(Recycler, AFullThreadListSpillsToTheSharedList) {
  using Kind = CountedKind<2>;
  using Cache = detail::PointerCache<Kind>;
  constexpr int kObjects = static_cast<int>(Cache::kLocal) + 1;
  std::atomic<bool> spilled{false};
  std::atomic<bool> done{false};
  std::thread giver([&] {
    for (int i = 0; i < kObjects; ++i) {
      Cache::give(new int(i));
    }
    spilled = true;
    while (!done) {
      std::this_thread::yield();  // alive: what it keeps stays with it
    }
  });
  while (!spilled) {
    std::this_thread::yield();
  }
  EXPECT_EQ(take_all<Cache>(), static_cast<int>(Cache::kBatch));
  done = true;
  giver.join();
  EXPECT_EQ(take_all<Cache>(), kObjects - static_cast<int>(Cache::kBatch));
  EXPECT_EQ(Kind::released.load(), 0);
}

// A block given back on a thread after its list was closed (by a thread_local destroyed later
// than the list's closer) goes to the shared list instead of a list nobody reads.
TEST(Recycler, WhatComesBackAfterTheThreadsEndGoesToTheSharedList) {
  using Kind = CountedKind<3>;
  using Cache = detail::PointerCache<Kind>;
  struct GivesAtExit {
    ~GivesAtExit() { Cache::give(new int(0)); }
  };
  std::thread([] {
    thread_local GivesAtExit late;  // made first, so destroyed after the list's closer
    (void)&late;
    Cache::give(new int(1));
  }).join();
  EXPECT_EQ(take_all<Cache>(), 2);
  EXPECT_EQ(Kind::released.load(), 0);
}

// A thread whose first give comes from a thread_local destructor, as the thread ends, opens its
// list then and still closes it: nothing stays in a list that dies with the thread.
TEST(Recycler, AListFirstOpenedAsTheThreadEndsIsClosedToo) {
  using Kind = CountedKind<4>;
  using Cache = detail::PointerCache<Kind>;
  constexpr int kObjects = 5;
  struct GivesAtExit {
    ~GivesAtExit() {
      for (int i = 0; i < kObjects; ++i) {
        Cache::give(new int(i));
      }
    }
  };
  std::thread([] {
    thread_local GivesAtExit only;
    (void)&only;
  }).join();
  EXPECT_EQ(take_all<Cache>(), kObjects);
  EXPECT_EQ(Kind::released.load(), 0);
}
#endif

TEST(Recycler, RecycledContextsTakeTheNextImportsShape) {
  CountingProducer producer;
  TensorSpec four;
  four.shape = {2, 3, 4, 5};
  TensorSpec two;
  two.shape = {7, 6};
  two.strides = std::vector<std::int64_t>{1, 7};
  for (int round = 0; round < 3; ++round) {
    {
      const Tensor tensor = import_or_die(producer, four);
      EXPECT_EQ(tensor.shape(), (std::vector<std::int64_t>{2, 3, 4, 5}));
      EXPECT_EQ(tensor.dl_ctx()->dl_strides, (std::vector<std::int64_t>{60, 20, 5, 1}));
    }
    {
      const Tensor tensor = import_or_die(producer, two);
      EXPECT_EQ(tensor.shape(), (std::vector<std::int64_t>{7, 6}));
      EXPECT_EQ(tensor.dl_ctx()->dl_shape.size(), 2u);
      EXPECT_EQ(tensor.dl_ctx()->dl_strides, (std::vector<std::int64_t>{1, 7}));
    }
  }
  EXPECT_EQ(producer.deleter_calls(), 6);
}

// A context whose vectors were grown by hand is not kept with that room: the free lists are
// bounded in count, and so must be what each kept context holds.
TEST(Recycler, AContextGrownByHandIsNotKeptWithItsRoom) {
  constexpr std::size_t kGrown = std::size_t{1} << 20;
  CountingProducer producer;
  for (int round = 0; round < 2; ++round) {
    Tensor tensor = import_or_die(producer);
    DLManagedTensorContext& context = *tensor.dl_ctx();
    EXPECT_LT(context.dl_shape.capacity(), kGrown);
    EXPECT_LT(context.dl_strides.capacity(), kGrown);
    context.dl_shape.reserve(kGrown);
    context.dl_strides.reserve(kGrown);
    context.tensor.dl_tensor.shape = context.dl_shape.data();
    context.tensor.dl_tensor.strides = context.dl_strides.data();
  }  // the next import on this thread takes the context given back last, when it is kept
  EXPECT_EQ(producer.deleter_calls(), 2);
}

}  // namespace
}  // namespace holoscan
