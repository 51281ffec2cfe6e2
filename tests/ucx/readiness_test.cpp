// A send leaves only once its tensor's readiness point passed, with the fake CUDA runtime
// playing the GPU: the "producer" writes the bytes after send() returned and before its stream
// completes, so a send that went early would carry stale bytes, which the receiver refuses.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "holoscan/make_tensor.hpp"
#include "support/allocation_hooks.hpp"
#include "support/counting_producer.hpp"
#include "support/fake_cuda.hpp"
#include "ucx/series.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

constexpr int kPatienceMs = 20000;

// Progresses for `duration`, collecting results.
void hold_for(SeriesSender& sender, std::chrono::milliseconds duration) {
  const auto until = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < until) {
    sender.drain();
  }
}

TEST(UcxReadiness, ASendLeavesOnlyOnceItsReadinessPointPassed) {
  FakeCudaScope cuda;
  auto [worker, receiver, peer] = connect_receiver(16, {"count=1"});
  ASSERT_NE(peer, 0u);
  SeriesSender sender(worker, peer, 1);
  const auto layout = ucx_series::layout(0);
  auto tensor = sender.pool->allocate(layout.shape, layout.dtype);
  ASSERT_TRUE(tensor);
  void* data = tensor->data();
  const auto bytes = static_cast<std::size_t>(tensor->nbytes());
  std::memset(data, 0, bytes);  // stale until the producer's work completes
  cudaStream_t producer = cuda->create_stream(0);
  cuda->launch(producer);
  ASSERT_TRUE(tensor->set_readiness_stream(producer));
  auto sequence = worker.send(peer, *tensor);
  ASSERT_TRUE(sequence) << to_string(sequence.error());
  tensor = {};  // the worker's claim is the only one now
  hold_for(sender, std::chrono::milliseconds(200));
  EXPECT_TRUE(sender.delivered.empty() && sender.failed.empty());
  EXPECT_EQ(worker.waiting(), 1u);
  EXPECT_EQ(worker.stats().readiness_waits, 1u);
  EXPECT_EQ(sender.pool->available_blocks(), 0u) << "the claim is held while the send waits";
  ucx_series::fill(0, data, bytes);  // the producer's kernel writes...
  cuda->complete(producer);          // ...and finishes
  sender.sent.push_back(*sequence);
  ASSERT_TRUE(sender.finish(kPatienceMs));
  ASSERT_EQ(sender.delivered.size(), 1u);
  EXPECT_EQ(wait_peer(receiver, kPatienceMs, &worker), 0) << "the receiver got stale bytes";
  EXPECT_EQ(sender.pool->available_blocks(), 1u);
}

TEST(UcxReadiness, ARefusedReadinessWaitRefusesTheSendAndKeepsNothing) {
  FakeCudaScope cuda;
  auto [worker, receiver, peer] = connect_receiver(16, {"count=0"});
  ASSERT_NE(peer, 0u);
  SeriesSender sender(worker, peer, 1);
  {
    auto tensor = sender.pool->allocate({16}, DLDataType{kDLFloat, 32, 1});
    ASSERT_TRUE(tensor);
    cudaStream_t producer = cuda->create_stream(0);
    cuda->launch(producer);
    ASSERT_TRUE(tensor->set_readiness_stream(producer));
    cuda->fail_next(CudaEntry::kStreamWaitEvent, cudaErrorInvalidResourceHandle);
    auto refused = worker.send(peer, *tensor);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::kFailure);
    EXPECT_NE(refused.error().message.find("cudaStreamWaitEvent"), std::string::npos)
        << refused.error().message;
    EXPECT_EQ(refused.error().provenance,
              static_cast<std::uint64_t>(cudaErrorInvalidResourceHandle));
    EXPECT_EQ(worker.in_flight(), 0u);
    cuda->complete(producer);
  }
  EXPECT_EQ(sender.pool->available_blocks(), 1u);
  // A query that fails ends the send as failed, naming the call.
  {
    auto tensor = sender.pool->allocate({16}, DLDataType{kDLFloat, 32, 1});
    ASSERT_TRUE(tensor);
    cudaStream_t producer = cuda->create_stream(0);
    cuda->launch(producer);
    ASSERT_TRUE(tensor->set_readiness_stream(producer));
    cuda->fail_next(CudaEntry::kEventQuery, cudaErrorLaunchFailure, 1000);
    auto sequence = worker.send(peer, *tensor);
    ASSERT_TRUE(sequence);
    sender.sent.push_back(*sequence);
    ASSERT_TRUE(sender.finish(kPatienceMs));
    ASSERT_EQ(sender.failed.size(), 1u);
    EXPECT_EQ(sender.failed[0].second.code, ErrorCode::kFailure);
    EXPECT_NE(sender.failed[0].second.message.find("cudaEventQuery"), std::string::npos)
        << sender.failed[0].second.message;
    cuda->clear_faults();
    cuda->complete(producer);
  }
  EXPECT_EQ(sender.pool->available_blocks(), 1u);
  ::kill(receiver, SIGKILL);
  (void)wait_peer(receiver, kPatienceMs);
}

// The context's members are public: a view rewritten by hand while its send waits for readiness
// (a shape past the memory, another reference in the context) changes nothing sent. The message
// is the view given to send(), header and payload alike, and the memory it was sent from stays
// until UCX is done with it; it went at once with the reference, and the payload was read past
// it, when the send kept only a Tensor over the context and read the view when it was posted.
TEST(UcxReadiness, AViewRewrittenWhileItsSendWaitsChangesNothingSent) {
  FakeCudaScope cuda;
  LinkedWorkers sides;
  ASSERT_TRUE(sides.link.client) << to_string(sides.link.client.error());
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {16};
  auto imported = make_tensor_from_dlpack_versioned(producer.make_versioned(spec));
  ASSERT_TRUE(imported) << to_string(imported.error());
  auto* values = static_cast<float*>(imported->data());
  for (int i = 0; i < 16; ++i) {
    values[i] = static_cast<float>(i) + 0.5F;
  }
  cudaStream_t stream = cuda->create_stream(0);
  cuda->launch(stream);
  ASSERT_TRUE(imported->set_readiness_stream(stream));
  auto sent = sides.client.send(*sides.link.client, *imported);
  ASSERT_TRUE(sent) << to_string(sent.error());
  DLManagedTensorContext& context = *imported->dl_ctx();
  context.dl_shape[0] = std::int64_t{1} << 20;
  context.memory_reference = std::make_shared<TensorMemoryReference>();
  *imported = Tensor();
  EXPECT_EQ(producer.deleter_calls(), 0) << "the memory went while its send waited";
  cuda->complete(stream);
  std::optional<ucx::Received> received;
  const auto start = std::chrono::steady_clock::now();
  while (!received && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    (void)sides.client.progress();
    auto got = sides.receiver.receive(1);
    ASSERT_TRUE(got) << to_string(got.error());
    if (*got) {
      received = std::move(**got);
    }
  }
  ASSERT_TRUE(received) << "nothing arrived";
  ASSERT_EQ(received->tensor.shape(), std::vector<std::int64_t>{16});
  const auto* landed = static_cast<const float*>(received->tensor.data());
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(landed[i], static_cast<float>(i) + 0.5F) << "element " << i;
  }
  std::optional<ucx::SendResult> result;
  while (!result && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    (void)sides.client.progress();
    (void)sides.receiver.progress();
    result = sides.client.next_send_result();
  }
  ASSERT_TRUE(result) << "the send never ended";
  EXPECT_TRUE(result->outcome.has_value());
  flush_deferred_releases();  // its readiness point made the release a deferred one
  EXPECT_EQ(producer.deleter_calls(), 1) << "the memory was kept past the send";
}

// One attempt on a fresh in-process connection: tensor 0 sent while its readiness query keeps
// failing and the producer never finishes, with the allocation after the first `skip` of send()
// and the rounds after it failing; whether one failed. Whatever fails, the tensor never leaves
// before its readiness passed: it ends failed (once, if send() gave it a number), never delivered,
// and the receiver gets nothing.
bool unready_send_with_failing_allocation(std::uint64_t skip) {
  FakeCudaScope cuda;
  LinkedWorkers sides;
  EXPECT_TRUE(sides.link.client);
  if (!sides.link.client) {
    return false;
  }
  SeriesSender sender(sides.client, *sides.link.client, 1);
  const auto layout = ucx_series::layout(0);
  auto tensor = sender.pool->allocate(layout.shape, layout.dtype);
  EXPECT_TRUE(tensor);
  if (!tensor) {
    return false;
  }
  cudaStream_t producer = cuda->create_stream(0);
  cuda->launch(producer);  // never completed below: the readiness never passes
  EXPECT_TRUE(tensor->set_readiness_stream(producer));
  cuda->fail_next(CudaEntry::kEventQuery, cudaErrorLaunchFailure, 1u << 30);
  std::optional<expected<std::uint64_t, Error>> sent;
  std::uint64_t failed = 0;
  {
    FailingAllocations failing(skip);
    try {
      sent.emplace(sides.client.send(*sides.link.client, *tensor));
    } catch (...) {
    }
    for (int i = 0; i < 5; ++i) {
      try {
        (void)sides.client.progress();
      } catch (...) {
      }
    }
    failed = failing.failed();
  }
  tensor = {};
  std::vector<ucx::SendResult> results;
  std::uint64_t received = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
    auto got = sides.receiver.receive(0);
    received += got && *got && (*got)->tensor ? 1 : 0;
    (void)sides.client.progress();
    while (auto result = sides.client.next_send_result()) {
      results.push_back(std::move(*result));
    }
  }
  SCOPED_TRACE("allocation " + std::to_string(skip));
  EXPECT_EQ(received, 0u) << "the tensor left before its readiness passed";
  for (const ucx::SendResult& result : results) {
    EXPECT_FALSE(result.outcome.has_value()) << "reported delivered";
  }
  EXPECT_EQ(results.size(), sent && *sent ? 1u : 0u);
  cuda->clear_faults();
  cuda->complete(producer);
  return failed != 0;
}

TEST(UcxReadiness, AQueryThatFailsOutOfMemoryNeverSendsTheTensorEarly) {
  for_each_failing_allocation(unready_send_with_failing_allocation);
}

// A send held for its readiness must be polled (no fd announces the GPU passing the point), and a
// wait of the worker (accept(), receive()) does so, but only if it sees the held send when it
// decides how to sleep: a send() made by another thread while the wait was asleep on the fd left
// it asleep to its deadline, and the tensor, ready long before, left only then (4 s here).
TEST(UcxReadiness, ASendHeldBesideASleepingWaitLeavesOnceReady) {
  FakeCudaScope cuda;
  ucx::WorkerConfig config;
  config.spin_us = 0;
  auto receiver = make_worker();
  auto client = make_worker(config);
  const auto link = connect_in_process(receiver, client);
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  auto pool = TensorPool::create({PoolMemory::kHost, 0, ucx_series::kMaxBytes, 1});
  ASSERT_TRUE(pool);
  auto tensor = ucx_series::pooled(**pool, 0);
  ASSERT_TRUE(tensor);
  cudaStream_t producer = cuda->create_stream(0);
  cuda->launch(producer);
  ASSERT_TRUE(tensor->set_readiness_stream(producer));
  constexpr int kSleepMs = 4000;
  std::thread sleeper([&] { EXPECT_FALSE(client.accept(kSleepMs)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // asleep on the client's fd
  ASSERT_TRUE(client.send(*link.client, *tensor));
  ASSERT_EQ(client.waiting(), 1u);
  cuda->complete(producer);  // the point passes: only a poll can tell
  const auto ready = std::chrono::steady_clock::now();
  std::optional<ucx::Received> received;
  while (!received && std::chrono::steady_clock::now() - ready < std::chrono::seconds(10)) {
    auto got = receiver.receive(1);
    ASSERT_TRUE(got) << to_string(got.error());
    if (*got) {
      received = std::move(**got);
    }
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - ready)
                          .count();
  sleeper.join();
  ASSERT_TRUE(received) << "the tensor never left";
  EXPECT_EQ(ucx_series::check(0, received->tensor), "");
  EXPECT_LT(waited, kSleepMs / 2) << "ms before the ready tensor left";
}

// Progresses `sender` and asks `receiver` until it hands out a tensor or `patience` has passed.
std::optional<ucx::Received> receive_within(ucx::Worker& receiver, ucx::Worker& sender,
                                            std::chrono::milliseconds patience) {
  const auto until = std::chrono::steady_clock::now() + patience;
  while (std::chrono::steady_clock::now() < until) {
    EXPECT_TRUE(sender.progress());
    auto got = receiver.receive(1);
    EXPECT_TRUE(got) << to_string(got.error());
    if (got && *got) {
      return std::move(**got);
    }
  }
  return std::nullopt;
}

// A send whose readiness point has not passed holds back its own peer's later sends only: a
// tensor for another peer, ready, leaves at once (each peer's readiness waits are ordered on a
// stream of its own, not on one the sends of every peer share).
TEST(UcxReadiness, ASendWaitingForItsPointNeverHoldsBackAnotherPeersReadyTensor) {
  FakeCudaScope cuda;
  auto first = make_worker();
  auto second = make_worker();
  auto client = make_worker();
  const auto to_first = connect_in_process(first, client);
  const auto to_second = connect_in_process(second, client);
  ASSERT_TRUE(to_first.client) << to_string(to_first.client.error());
  ASSERT_TRUE(to_second.client) << to_string(to_second.client.error());
  auto pool = TensorPool::create({PoolMemory::kHost, 0, ucx_series::kMaxBytes, 2});
  ASSERT_TRUE(pool);
  const auto layout = ucx_series::layout(0);
  auto slow = (*pool)->allocate(layout.shape, layout.dtype);
  auto quick = (*pool)->allocate(layout.shape, layout.dtype);
  ASSERT_TRUE(slow && quick);
  ucx_series::fill(0, slow->data(), static_cast<std::size_t>(slow->nbytes()));
  ucx_series::fill(0, quick->data(), static_cast<std::size_t>(quick->nbytes()));
  cudaStream_t slow_producer = cuda->create_stream(0);
  cudaStream_t quick_producer = cuda->create_stream(0);
  cuda->launch(slow_producer);
  cuda->launch(quick_producer);
  ASSERT_TRUE(slow->set_readiness_stream(slow_producer));
  ASSERT_TRUE(quick->set_readiness_stream(quick_producer));
  ASSERT_TRUE(client.send(*to_first.client, *slow));
  ASSERT_TRUE(client.send(*to_second.client, *quick));
  cuda->complete(quick_producer);  // the second peer's tensor is ready, the first's is not

  auto received = receive_within(second, client, std::chrono::seconds(10));
  ASSERT_TRUE(received) << "a ready tensor waited for another peer's readiness point";
  EXPECT_EQ(ucx_series::check(0, received->tensor), "");
  EXPECT_EQ(client.waiting(), 1u);
  EXPECT_FALSE(receive_within(first, client, std::chrono::milliseconds(200)))
      << "a tensor left before its readiness point passed";

  cuda->complete(slow_producer);
  received = receive_within(first, client, std::chrono::seconds(10));
  ASSERT_TRUE(received) << "the first peer's tensor never left";
  EXPECT_EQ(ucx_series::check(0, received->tensor), "");
  EXPECT_EQ(client.waiting(), 0u);
}

// Sends held for their readiness, each tried with every one of its allocations failing in turn
// until one goes through: the peer's queue takes a new block now and then, and a send refused
// there had armed its readiness first, leaving its event taken and a wait counted for a send
// that never was. Every refusal is kResourceExhausted and counts nothing.
TEST(UcxReadiness, ASendRefusedForWantOfMemoryCountsNoReadinessWait) {
  FakeCudaScope cuda;
  constexpr std::size_t kSends = 80;  // past the first block of the peer's queue (64 sends)
  ucx::WorkerConfig config;
  config.window = kSends + 1;
  ucx::Worker receiver = make_worker(config);
  ucx::Worker client = make_worker(config);
  const InProcessLink link = connect_in_process(receiver, client);
  ASSERT_TRUE(link.client);
  SeriesSender sender(client, *link.client, 1);
  auto tensor = sender.pool->allocate({16}, DLDataType{kDLFloat, 32, 1});
  ASSERT_TRUE(tensor);
  cudaStream_t producer = cuda->create_stream(0);
  cuda->launch(producer);  // completed only at the end: every send stays held
  ASSERT_TRUE(tensor->set_readiness_stream(producer));
  std::uint64_t accepted = 0;
  std::uint64_t refused = 0;
  for (std::size_t i = 0; i < kSends; ++i) {
    for (std::uint64_t skip = 0;; ++skip) {
      std::optional<expected<std::uint64_t, Error>> sent;
      {
        FailingAllocations failing(skip);
        try {
          sent.emplace(client.send(*link.client, *tensor));
        } catch (...) {
          ADD_FAILURE() << "an exception escaped send()";
        }
      }
      ASSERT_TRUE(sent.has_value());
      if (*sent) {
        ++accepted;
        break;
      }
      ++refused;
      EXPECT_EQ(sent->error().code, ErrorCode::kResourceExhausted) << sent->error().message;
      ASSERT_LT(skip, 1000u) << "a send kept failing";
    }
    ASSERT_EQ(client.stats().readiness_waits, accepted) << "after send " << i;
    ASSERT_EQ(client.waiting(), accepted);
  }
  EXPECT_GT(refused, kSends) << "every send was refused at least once";
  cuda->complete(producer);
  std::uint64_t received = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kPatienceMs);
  while (received < accepted && std::chrono::steady_clock::now() < deadline) {
    auto got = receiver.receive(0);
    received += got && *got && (*got)->tensor ? 1 : 0;
    (void)client.progress();
    sender.drain();
  }
  EXPECT_EQ(received, accepted) << "a held send never left once its readiness passed";
}

// A memory reference with a readiness contract whose wait throws (a caller's hook).
class ThrowingReadiness : public TensorMemoryReference {
 public:
  bool has_readiness_stream_contract() const noexcept override { return true; }
  expected<void, Error> synchronize_for_consumer(cudaStream_t /*consumer*/) override {
    throw std::runtime_error("a hook that throws");
  }
};

// A send whose readiness wait threw was left queued, unarmed and uncounted (queued before the
// arm): the next round posted it as if ready, and the next send took its sequence number.
TEST(UcxReadiness, ASendWhoseReadinessHookThrowsLeavesNothingQueued) {
  FakeCudaScope cuda;
  LinkedWorkers sides;
  ASSERT_TRUE(sides.link.client);
  std::vector<float> values(16, 1.0f);
  auto tensor = make_tensor({16}, DLDataType{kDLFloat, 32, 1}, {}, MemoryStorageType::kSystem,
                            values.data(), std::make_shared<ThrowingReadiness>());
  ASSERT_TRUE(tensor.has_value()) << tensor.error().message;
  EXPECT_THROW((void)sides.client.send(*sides.link.client, *tensor), std::runtime_error);
  EXPECT_EQ(sides.client.in_flight(), 0u) << "the refused send stayed queued";
  EXPECT_EQ(sides.client.waiting(), 0u);
  EXPECT_EQ(sides.client.stats().readiness_waits, 0u);
  for (int i = 0; i < 50; ++i) {
    (void)sides.client.progress();
    auto got = sides.receiver.receive(0);
    ASSERT_TRUE(got.has_value());
    EXPECT_FALSE(got->has_value()) << "a send refused by its hook reached the receiver";
  }
}

}  // namespace
}  // namespace holoscan::test
