// Covers the DLPack owners' lifetime: the producer's deleter runs exactly once, or never if null.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack.hpp"
#include "holoscan/make_tensor.hpp"
#include "support/counting_producer.hpp"

namespace holoscan {
namespace {

using test::CountingProducer;
using test::TensorSpec;

static_assert(!std::is_copy_constructible_v<DLManagedMemoryBufferVersioned>);
static_assert(!std::is_copy_assignable_v<DLManagedMemoryBufferVersioned>);
static_assert(!std::is_copy_constructible_v<DLManagedMemoryBuffer>);
static_assert(!std::is_copy_assignable_v<DLManagedMemoryBuffer>);
static_assert(std::is_base_of_v<TensorMemoryReference, DLManagedMemoryBufferVersioned>);
static_assert(std::is_base_of_v<TensorMemoryReference, DLManagedMemoryBuffer>);

TEST(BufferLifetime, VersionedDeleterRunsOnceOnDestruction) {
  CountingProducer producer;
  DLManagedTensorVersioned* managed = producer.make_versioned();
  {
    const DLManagedMemoryBufferVersioned buffer(managed);
    EXPECT_EQ(buffer.managed_tensor(), managed);
    EXPECT_EQ(producer.deleter_calls(), 0);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_EQ(producer.last_deleter_thread(), std::this_thread::get_id());
}

TEST(BufferLifetime, LegacyDeleterRunsOnceOnDestruction) {
  CountingProducer producer;
  DLManagedTensor* managed = producer.make_legacy();
  {
    const DLManagedMemoryBuffer buffer(managed);
    EXPECT_EQ(buffer.managed_tensor(), managed);
    EXPECT_EQ(producer.deleter_calls(), 0);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_EQ(producer.last_deleter_thread(), std::this_thread::get_id());
}

TEST(BufferLifetime, NullSelfOwnsNothing) {
  {
    const DLManagedMemoryBufferVersioned versioned(nullptr);
    const DLManagedMemoryBuffer legacy(nullptr);
    EXPECT_EQ(versioned.managed_tensor(), nullptr);
    EXPECT_EQ(legacy.managed_tensor(), nullptr);
  }
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

TEST(BufferLifetime, NullDeleterIsNeverCalled) {
  CountingProducer producer;
  TensorSpec spec;
  spec.null_deleter = true;
  DLManagedTensorVersioned* versioned = producer.make_versioned(spec);
  DLManagedTensor* legacy = producer.make_legacy(spec);
  ASSERT_EQ(versioned->deleter, nullptr);
  ASSERT_EQ(legacy->deleter, nullptr);
  {
    const DLManagedMemoryBufferVersioned versioned_buffer(versioned);
    const DLManagedMemoryBuffer legacy_buffer(legacy);
  }
  EXPECT_EQ(producer.deleter_calls(), 0);
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

TEST(BufferLifetime, DestroyedThroughSharedPtrToBase) {
  CountingProducer producer;
  std::shared_ptr<TensorMemoryReference> versioned =
      std::make_shared<DLManagedMemoryBufferVersioned>(producer.make_versioned());
  std::shared_ptr<TensorMemoryReference> legacy =
      std::make_shared<DLManagedMemoryBuffer>(producer.make_legacy());
  std::shared_ptr<TensorMemoryReference> second_owner = versioned;
  versioned.reset();
  EXPECT_EQ(producer.deleter_calls(), 0);
  second_owner.reset();
  EXPECT_EQ(producer.deleter_calls(), 1);
  legacy.reset();
  EXPECT_EQ(producer.deleter_calls(), 2);
}

TEST(BufferLifetime, EachBufferRunsItsOwnDeleter) {
  CountingProducer first;
  CountingProducer second;
  {
    const DLManagedMemoryBufferVersioned a(first.make_versioned());
    const DLManagedMemoryBufferVersioned b(second.make_versioned());
    const DLManagedMemoryBuffer c(second.make_legacy());
  }
  EXPECT_EQ(first.deleter_calls(), 1);
  EXPECT_EQ(second.deleter_calls(), 2);
}

TEST(BufferLifetime, DestroyedOnAnotherThreadRunsDeleterThere) {
  CountingProducer producer;
  auto buffer = std::make_unique<DLManagedMemoryBufferVersioned>(producer.make_versioned());
  std::thread::id destroyer;
  std::thread thread([&buffer, &destroyer] {
    destroyer = std::this_thread::get_id();
    buffer.reset();
  });
  thread.join();
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_EQ(producer.last_deleter_thread(), destroyer);
}

TEST(DeferredRelease, FlushWithNothingPendingReturns) {
  EXPECT_EQ(pending_deferred_releases(), 0u);
  flush_deferred_releases();
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

TEST(DeferredRelease, HostOnlyBuffersDeferNothing) {
  CountingProducer producer;
  { const DLManagedMemoryBufferVersioned buffer(producer.make_versioned()); }
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_EQ(pending_deferred_releases(), 0u);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// Runs `body` on a thread whose stack is `bytes` long, so that a recursion as deep as the chain
// would overflow it (and end the process) long before it would overflow the main thread's.
void run_on_a_small_stack(std::size_t bytes, const std::function<void()>& body) {
  pthread_attr_t attributes;
  ASSERT_EQ(pthread_attr_init(&attributes), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attributes, bytes), 0);
  pthread_t thread;
  auto run = [](void* argument) -> void* {
    (*static_cast<const std::function<void()>*>(argument))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attributes, run, const_cast<std::function<void()>*>(&body)),
            0);
  ASSERT_EQ(pthread_join(thread, nullptr), 0);
  pthread_attr_destroy(&attributes);
}

constexpr std::size_t kSmallStack = 512 * 1024;
constexpr int kChainLinks = 50000;

// An export imported again, its import exported again, and so on (round trips through another
// framework): each import's owner owns the export before it, which holds the owner before that.
// Dropping the last Tensor releases the whole chain; each link's release set off the next inline,
// one nest of stack frames per link, and overflowed the stack (tens of thousands of links on an
// 8 MiB stack, a few thousand on 1 MiB).
TEST(BufferLifetime, ALongChainOfReimportedExportsIsReleasedWithoutDeepRecursion) {
  CountingProducer producer;
  run_on_a_small_stack(kSmallStack, [&] {
    auto first = make_tensor_from_dlpack_versioned(producer.make_versioned());
    ASSERT_TRUE(first.has_value());
    Tensor last = std::move(*first);
    for (int link = 0; link < kChainLinks; ++link) {
      auto exported = last.to_dlpack_versioned();
      ASSERT_TRUE(exported.has_value());
      auto again = make_tensor_from_dlpack_versioned(*exported);
      ASSERT_TRUE(again.has_value());
      last = std::move(*again);
    }
    EXPECT_EQ(producer.deleter_calls(), 0);
    last = Tensor();
    EXPECT_EQ(producer.deleter_calls(), 1);
  });
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

// The same through make_tensor: each release function keeps the Tensor before it.
TEST(BufferLifetime, ALongChainOfReleaseFunctionsIsReleasedWithoutDeepRecursion) {
  CountingProducer producer;
  int releases = 0;
  run_on_a_small_stack(kSmallStack, [&] {
    auto first = make_tensor_from_dlpack_versioned(producer.make_versioned());
    ASSERT_TRUE(first.has_value());
    Tensor last = std::move(*first);
    for (int link = 0; link < kChainLinks; ++link) {
      auto wrapped =
          make_tensor({2, 3}, DLDataType{kDLFloat, 32, 1}, {}, MemoryStorageType::kSystem,
                      last.data(), [&releases, before = last](void*) {
                        ++releases;
                        return expected<void, Error>{};
                      });
      ASSERT_TRUE(wrapped.has_value());
      last = std::move(*wrapped);
    }
    last = Tensor();
    EXPECT_EQ(releases, kChainLinks);
    EXPECT_EQ(producer.deleter_calls(), 1);
  });
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

// Releases run at once on a thread before nested ones wait (kInlineReleaseDepth).
constexpr int kInlineDepth = 16;

// Release functions of the chain below entered so far.
int chain_releases_entered = 0;

// A chain of `links` make_tensor owners over `data`, each release function keeping the Tensor
// before it; `after_drop(depth)` runs in each once it dropped the one before (depth 1 is the last
// link's release, the first to run). Returns the last link.
Tensor chain_of_releases(float* data, int links, std::function<void(int)> after_drop) {
  chain_releases_entered = 0;
  auto after = std::make_shared<std::function<void(int)>>(std::move(after_drop));
  Tensor last;
  for (int link = 0; link < links; ++link) {
    auto wrapped = make_tensor({2}, DLDataType{kDLFloat, 32, 1}, {}, MemoryStorageType::kSystem,
                               data, [after, before = last](void*) mutable {
                                 const int depth = ++chain_releases_entered;
                                 before = Tensor();  // the next link's release: nested here
                                 (*after)(depth);
                                 return expected<void, Error>{};
                               });
    EXPECT_TRUE(wrapped.has_value());
    last = std::move(*wrapped);
  }
  return last;
}

// Releases nested past the inline depth wait for the innermost running one; a release that
// called exit() there never returned to it, and the waiting ones (the rest of the chain, with
// their producers' deleters) never ran: 16 of 20. A chain dropped later on that thread (an exit
// handler, a static destructor) then found the depth exit() left and waited for ever too.
int later_chain_released = 0;
Tensor later_chain;  // dropped by an exit handler that runs after the library's

TEST(BufferLifetime, ReleasesWaitingInAChainRunWhenAReleaseCallsExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::atexit([] {
          std::fprintf(stderr, "released %d, later %d\n", chain_releases_entered,
                       later_chain_released);
          std::fflush(stderr);
        });
        static float data[2] = {};
        later_chain = chain_of_releases(data, 20, [](int) { ++later_chain_released; });
        std::atexit([] { later_chain = Tensor(); });
        Tensor last = chain_of_releases(data, 20, [](int depth) {
          if (depth == kInlineDepth) {
            std::exit(3);
          }
        });
        last = Tensor();
      },
      ::testing::ExitedWithCode(3), "released 40, later 20");  // both chains whole
}

// A child forked by a release 16 deep inherited the releases waiting for it and ran them too: the
// parent's deleters ran twice, once in a process that must not touch their memory through CUDA.
TEST(BufferLifetime, AChildForkedInsideAChainRunsNoneOfItsWaitingReleases) {
  float data[2] = {};
  pid_t child = -1;
  Tensor last = chain_of_releases(data, 20, [&](int depth) {
    if (depth == kInlineDepth) {
      child = ::fork();
    }
  });
  last = Tensor();
  if (child == 0) {
    ::_exit(chain_releases_entered == kInlineDepth ? 0 : chain_releases_entered);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "releases the child entered: " << WEXITSTATUS(status);
  EXPECT_EQ(chain_releases_entered, 20);
}

}  // namespace
}  // namespace holoscan
