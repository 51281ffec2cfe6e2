// The public API used in ways it does not expect: views written by hand into a context that no
// import would make, an orderly close while the receiver keeps the sender's data inside UCX, and
// calls on a moved-from worker.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "holoscan/dlpack.hpp"
#include "ucx/series.hpp"
#include "ucx/slow_resolver.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<TensorPool> host_pool(std::size_t blocks) {
  auto pool = TensorPool::create({PoolMemory::kHost, 0, ucx_series::kMaxBytes, blocks});
  EXPECT_TRUE(pool);
  return *pool;
}

// A host view of `storage` written by hand: `ndim` extents `shape` (null: none), compact strides.
Tensor hand_written(std::int32_t ndim, const std::vector<std::int64_t>& shape, bool with_shape) {
  static float storage[8] = {};
  auto context = std::make_shared<DLManagedTensorContext>();
  context->dl_shape = shape;
  context->dl_strides.assign(shape.size(), 0);
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    context->dl_strides[i] = stride;
    std::int64_t next = 0;  // past int64 the stride stays (no such view has a compact one)
    stride = shape[i] > 0 && !__builtin_mul_overflow(stride, shape[i], &next) ? next : stride;
  }
  DLTensor& view = context->tensor.dl_tensor;
  view.data = storage;
  view.device = DLDevice{kDLCPU, 0};
  view.ndim = ndim;
  view.dtype = DLDataType{kDLFloat, 32, 1};
  view.shape = with_shape ? context->dl_shape.data() : nullptr;
  view.strides = with_shape ? context->dl_strides.data() : nullptr;
  return Tensor(context);
}

// send() copied a view's extents into the header's arrays of 32 before any check of its own: a
// view written by hand with more dimensions wrote past them (a crash), one with dimensions but no
// shape read through a null pointer (a crash). Each is refused now, and the connection stays
// usable.
TEST(UcxMisuse, AViewWrittenByHandThatNoImportWouldMakeIsRefused) {
  LinkedWorkers sides;
  ASSERT_TRUE(sides.link.client) << to_string(sides.link.client.error());
  const ucx::PeerId peer = *sides.link.client;
  struct Case {
    const char* what;
    Tensor tensor;
  };
  const std::vector<std::int64_t> ones(40, 1);
  Case cases[] = {
      {"40 dimensions", hand_written(40, ones, true)},
      {"33 dimensions",
       hand_written(33, std::vector<std::int64_t>(ones.begin(), ones.begin() + 33), true)},
      {"2 dimensions and no shape", hand_written(2, {2, 4}, false)},
      {"a negative ndim", hand_written(-1, {}, true)},
      {"extents whose product overflows", hand_written(2, {std::int64_t{1} << 62, 4}, true)},
  };
  for (const Case& c : cases) {
    auto sent = sides.client.send(peer, c.tensor);
    ASSERT_FALSE(sent) << c.what;
    EXPECT_EQ(sent.error().code, ErrorCode::kInvalidArgument)
        << c.what << ": " << sent.error().message;
  }
  EXPECT_EQ(sides.client.in_flight(), 0u);
  auto pool = host_pool(1);
  auto tensor = ucx_series::pooled(*pool, 0);
  ASSERT_TRUE(tensor);
  auto sent = sides.client.send(peer, *tensor);
  ASSERT_TRUE(sent) << to_string(sent.error());
  std::optional<ucx::Received> received;
  for (auto start = Clock::now(); !received && Clock::now() - start < std::chrono::seconds(10);) {
    (void)sides.client.progress();
    auto got = sides.receiver.receive(1);
    ASSERT_TRUE(got) << to_string(got.error());
    if (*got) {
      received = std::move(**got);
    }
  }
  ASSERT_TRUE(received);
  EXPECT_EQ(received->sequence, *sent);
  EXPECT_EQ(ucx_series::check(0, received->tensor), "");
}

// Two senders to one receiver: `stalled` sends a tensor far larger than a socket takes at once
// (its worker is then never progressed: a process stopped or hung does the same) and a small one
// behind it; `other` sends one small tensor.
struct StoppedPeer {
  static constexpr std::int64_t kLarge = std::int64_t{32} << 20;

  explicit StoppedPeer(const ucx::WorkerConfig& receiving = {})
      : receiver(make_worker(receiving)),
        stalled_link(connect_in_process(stalled, receiver)),  // the receiver connects
        other_link(connect_in_process(other, receiver)) {}

  // The tensors, filled; false if any could not be made or a link is missing.
  bool make_tensors() {
    auto large_pool = TensorPool::create({PoolMemory::kHost, 0, kLarge, 1});
    auto pool = host_pool(2);
    if (!large_pool || !stalled_link.client || !other_link.client) {
      return false;
    }
    auto large = (*large_pool)->allocate({kLarge}, DLDataType{kDLUInt, 8, 1});
    auto second = pool->allocate(ucx_series::layout(0).shape, ucx_series::layout(0).dtype);
    auto small = pool->allocate(ucx_series::layout(0).shape, ucx_series::layout(0).dtype);
    if (!large || !second || !small) {
      return false;
    }
    std::memset(large->data(), 0x5a, static_cast<std::size_t>(kLarge));
    ucx_series::fill(0, second->data(), static_cast<std::size_t>(second->nbytes()));
    ucx_series::fill(0, small->data(), static_cast<std::size_t>(small->nbytes()));
    first_ = std::move(*large);
    second_ = std::move(*second);
    small_ = std::move(*small);
    return true;
  }

  bool stalled_sends() {
    return stalled.send(stalled_link.listener, first_) &&
           stalled.send(stalled_link.listener, second_);
  }
  bool other_sends() { return static_cast<bool>(other.send(other_link.listener, small_)); }

  // What the receiver hands out within 5 s while only `other` progresses.
  std::optional<ucx::Received> receive_while_stalled() {
    for (auto start = Clock::now(); Clock::now() - start < std::chrono::seconds(5);) {
      (void)other.progress();
      auto got = receiver.receive(1);
      EXPECT_TRUE(got) << to_string(got.error());
      if (got && *got) {
        return std::move(**got);
      }
    }
    return std::nullopt;
  }

  // Progressed again, the stopped peer's two tensors come whole, in its order.
  void expect_the_stalled_tensors_after_all() {
    std::vector<ucx::Received> rest;
    for (auto start = Clock::now();
         rest.size() < 2 && Clock::now() - start < std::chrono::seconds(20);) {
      (void)stalled.progress();
      auto got = receiver.receive(1);
      ASSERT_TRUE(got) << to_string(got.error());
      if (*got) {
        rest.push_back(std::move(**got));
      }
    }
    ASSERT_EQ(rest.size(), 2u);
    EXPECT_EQ(rest[0].tensor.nbytes(), kLarge);
    const auto* bytes = static_cast<const std::uint8_t*>(rest[0].tensor.data());
    EXPECT_EQ(bytes[0], 0x5a);
    EXPECT_EQ(bytes[kLarge - 1], 0x5a);
    EXPECT_EQ(ucx_series::check(0, rest[1].tensor), "");
    EXPECT_LT(rest[0].sequence, rest[1].sequence);
  }

  ucx::Worker receiver;
  ucx::Worker stalled = make_worker();
  ucx::Worker other = make_worker();
  InProcessLink stalled_link;
  InProcessLink other_link;

 private:
  Tensor first_, second_, small_;
};

// A sender that stops mid-rendezvous keeps its tensor landing for as long as it stops. Another
// peer's tensor that landed meanwhile is handed out, not held behind it; the stopped peer's own
// later tensors still wait for its first.
TEST(UcxMisuse, APeerThatStopsMidTransferHoldsBackNoOtherPeersTensor) {
  StoppedPeer peers;
  ASSERT_TRUE(peers.make_tensors());
  ASSERT_TRUE(peers.stalled_sends());
  ASSERT_TRUE(peers.other_sends());
  auto received = peers.receive_while_stalled();
  ASSERT_TRUE(received) << "a peer stopped mid-transfer held back another peer's tensor";
  EXPECT_EQ(received->peer, *peers.other_link.client);
  EXPECT_EQ(ucx_series::check(0, received->tensor), "");
  peers.expect_the_stalled_tensors_after_all();
}

// The same with a receive pool of two blocks: the stopped peer's first tensor takes one while it
// lands, and its second, which cannot be handed out before the first, took the other as soon as
// it arrived, so that the other peer's tensor waited for memory for as long as the peer stopped.
// A tensor held back by its own peer now leaves a block for each other connected peer.
TEST(UcxMisuse, APeerThatStopsMidTransferLeavesAReceivePoolBlockForEachOtherPeer) {
  auto receive_pool = TensorPool::create({PoolMemory::kHost, 0, StoppedPeer::kLarge, 2});
  ASSERT_TRUE(receive_pool);
  ucx::WorkerConfig receiving;
  receiving.receive_pool = *receive_pool;
  StoppedPeer peers(receiving);
  ASSERT_TRUE(peers.make_tensors());
  ASSERT_TRUE(peers.stalled_sends());
  // Both of the stopped peer's tensors arrive (the second in one eager message) before the other
  // peer sends: the second either takes the last block or waits for memory.
  const auto second_placed = [&] {
    return (*receive_pool)->available_blocks() == 0 || peers.receiver.stats().memory_waits > 0;
  };
  for (auto start = Clock::now();
       !second_placed() && Clock::now() - start < std::chrono::seconds(5);) {
    auto got = peers.receiver.receive(1);
    ASSERT_TRUE(got) << to_string(got.error());
    ASSERT_FALSE(*got) << "nothing of the stopped peer can be handed out";
  }
  ASSERT_TRUE(second_placed()) << "the stopped peer's second tensor never arrived";
  EXPECT_EQ((*receive_pool)->available_blocks(), 1u) << "the second took the other peer's block";
  EXPECT_EQ(peers.receiver.stats().memory_waits, 1u);
  // Only the stopped peer's own landing, a UCX event, can let its second tensor go: nothing to
  // poll for, so a wait sleeps on the worker's fd instead of polling for as long as it stops.
  EXPECT_EQ(peers.receiver.waiting(), 0u);
  ASSERT_TRUE(peers.other_sends());
  auto received = peers.receive_while_stalled();
  ASSERT_TRUE(received) << "a peer stopped mid-transfer kept another peer's tensor waiting for "
                           "the receive pool";
  EXPECT_EQ(received->peer, *peers.other_link.client);
  EXPECT_EQ(ucx_series::check(0, received->tensor), "");
  received.reset();  // its block goes back
  peers.expect_the_stalled_tensors_after_all();
}

// A sender that disconnects while its rendezvous tensors wait inside the receiver's UCX for a
// block of an exhausted pool: disconnect() ends each send in flight (kClosed) although the
// receiver keeps its block, and the receiver reports kClosed once and lets go of the waiting data.
TEST(UcxMisuse, ASenderThatDisconnectsWhileItsDataWaitsForTheReceiversMemoryEndsEverySend) {
  auto receive_pool = host_pool(1);
  ucx::WorkerConfig config;
  config.receive_pool = receive_pool;
  auto receiver = make_worker(config);
  auto client = make_worker();
  const auto link = connect_in_process(receiver, client);
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  SeriesSender sender(client, *link.client, 6);
  ASSERT_TRUE(sender.send(2));
  Tensor held;  // the receiver's application keeps the pool's one block
  for (auto start = Clock::now(); !held && Clock::now() - start < std::chrono::seconds(10);) {
    sender.drain();
    auto first = receiver.receive(1);
    ASSERT_TRUE(first) << to_string(first.error());
    if (*first) {
      held = std::move((*first)->tensor);
    }
  }
  ASSERT_TRUE(held);
  for (std::uint64_t k : {7, 12}) {  // rendezvous-sized
    ASSERT_TRUE(sender.send(k));
  }
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (receiver.waiting() < 2 && Clock::now() < deadline) {
    (void)receiver.progress();
    sender.drain();
  }
  ASSERT_EQ(receiver.waiting(), 2u);
  ASSERT_TRUE(client.disconnect(*link.client));
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (sender.delivered.size() + sender.failed.size() < 3 && Clock::now() < until) {
    (void)receiver.progress();
    sender.drain();
  }
  EXPECT_EQ(sender.delivered, std::vector<std::uint64_t>{1});
  ASSERT_EQ(sender.failed.size(), 2u) << "in flight: " << client.in_flight();
  for (const auto& [sequence, error] : sender.failed) {
    EXPECT_EQ(error.code, ErrorCode::kClosed) << error.message;
  }
  EXPECT_EQ(sender.pool->available_blocks(), 6u);
  std::vector<std::string> reported;
  for (const auto later = Clock::now() + std::chrono::seconds(1); Clock::now() < later;) {
    auto got = receiver.receive(10);
    if (!got) {
      reported.push_back(got.error().code == ErrorCode::kClosed ? "kClosed"
                                                                : to_string(got.error()));
    } else if (*got) {
      reported.push_back("tensor " + std::to_string((*got)->sequence));
    }
  }
  EXPECT_EQ(reported, std::vector<std::string>{"kClosed"});
  EXPECT_EQ(receiver.waiting(), 0u);
  held = Tensor();
  EXPECT_EQ(receive_pool->available_blocks(), 1u);
}

// connect() and listen() resolved the address under the worker's mutex, so a resolver that took
// its time (a name server that does not answer: seconds) held every other call of the worker,
// send() (documented never to wait), progress() and the counters among them, for as long.
TEST(UcxMisuse, AResolutionUnderWayHoldsNoOtherCallBack) {
  LinkedWorkers sides;
  ASSERT_TRUE(sides.link.client) << to_string(sides.link.client.error());
  auto pool = host_pool(2);
  const auto layout = ucx_series::layout(0);
  constexpr auto kDelay = std::chrono::milliseconds(1500);
  SlowResolver slow(kDelay);
  for (const bool listening : {false, true}) {
    std::thread resolving([&] {
      if (listening) {
        auto port = sides.client.listen(kSlowName, 0);
        EXPECT_FALSE(port);
        EXPECT_EQ(port.error().code, ErrorCode::kInvalidArgument) << port.error().message;
      } else {
        auto peer = sides.client.connect(kSlowName, 13337, 5000);
        EXPECT_FALSE(peer);
        EXPECT_EQ(peer.error().code, ErrorCode::kInvalidArgument) << peer.error().message;
      }
    });
    const auto started = Clock::now();
    while (slow.resolving() == 0 && Clock::now() - started < std::chrono::seconds(5)) {
      std::this_thread::yield();
    }
    ASSERT_EQ(slow.resolving(), 1) << "the resolution never started";
    auto tensor = pool->allocate(layout.shape, layout.dtype);
    ASSERT_TRUE(tensor);
    ucx_series::fill(0, tensor->data(), static_cast<std::size_t>(tensor->nbytes()));
    const auto before = Clock::now();
    auto sent = sides.client.send(*sides.link.client, *tensor);
    (void)sides.client.progress();
    (void)sides.client.stats();
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - before).count();
    const bool still_resolving = slow.resolving() == 1;
    resolving.join();
    EXPECT_TRUE(sent) << to_string(sent.error());
    EXPECT_TRUE(still_resolving) << "the resolution ended before the calls: the test saw nothing";
    EXPECT_LT(took, 750) << (listening ? "listen()" : "connect()")
                         << "'s resolution held send() for " << took << " ms";
    for (const auto until = Clock::now() + std::chrono::seconds(10);
         sides.client.in_flight() > 0 && Clock::now() < until;) {
      (void)sides.client.progress();
      auto got = sides.receiver.receive(1);
      ASSERT_TRUE(got) << to_string(got.error());
    }
    EXPECT_EQ(sides.client.in_flight(), 0u);
  }
}

// An id that a connect() on another thread has not returned yet is no connection: connected()
// says so, and send() and disconnect() refuse it as unknown (ids count 1, 2, 3, ...: easy to
// guess). send() took it before, and the tensor went out on a connection no call had handed out;
// disconnect() took it too, and the connect() then failed for a reason it was never told.
TEST(UcxMisuse, AnIdThatConnectHasNotReturnedYetIsRefusedAsUnknown) {
  ucx::Worker listener = make_worker();
  const std::string port = listen_on_loopback(listener);
  ASSERT_NE(port, "0");
  ucx::Worker client = make_worker();
  expected<ucx::PeerId, Error> connected = make_unexpected(ErrorCode::kFailure, "not returned");
  std::atomic<bool> returned{false};
  std::thread connecting([&] {
    connected = client.connect("127.0.0.1", static_cast<std::uint16_t>(std::stoi(port)), 20000);
    returned.store(true);
  });
  struct Joined {  // also when an assertion below ends the test early
    std::thread& thread;
    ~Joined() {
      if (thread.joinable()) {
        thread.join();
      }
    }
  } joined{connecting};
  // The listener does not progress yet, so the connect() waits for its answer.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  constexpr ucx::PeerId kGuessed = 1;  // a fresh worker's first id
  EXPECT_FALSE(client.connected(kGuessed));
  auto tensor = host_pool(1)->allocate({4}, DLDataType{kDLFloat, 32, 1});
  ASSERT_TRUE(tensor);
  auto sent = client.send(kGuessed, *tensor);
  ASSERT_FALSE(sent) << "a send on a connection no call had handed out was taken";
  EXPECT_EQ(sent.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(sent.error().message, "ucx send: no peer 1");
  auto disconnected = client.disconnect(kGuessed);
  ASSERT_FALSE(disconnected) << "a disconnect of a connection no call had handed out was taken";
  EXPECT_EQ(disconnected.error().code, ErrorCode::kNotFound);
  // The listener answers the connect() with its rounds, after as before accept() gave the id.
  std::optional<ucx::PeerId> accepted;
  for (const auto until = Clock::now() + std::chrono::seconds(20);
       !returned.load() && Clock::now() < until;) {
    if (auto id = listener.accept(10)) {
      accepted = id;
    }
  }
  connecting.join();
  ASSERT_TRUE(accepted) << "the listener accepted nothing";
  ASSERT_TRUE(connected) << to_string(connected.error());
  EXPECT_EQ(*connected, kGuessed) << "the guess did not name the connect() under way";
  EXPECT_TRUE(client.connected(kGuessed));
  auto sent_now = client.send(kGuessed, *tensor);
  EXPECT_TRUE(sent_now) << to_string(sent_now.error());
}

TEST(UcxMisuse, AMovedFromWorkerRefusesEveryCall) {
  ucx::Worker worker = make_worker();
  ucx::Worker taken(std::move(worker));
  const auto refused = [](const Error& error, const char* call) {
    EXPECT_EQ(error.code, ErrorCode::kInvalidArgument) << call;
    EXPECT_EQ(error.message, std::string("ucx ") + call + ": the worker was moved from");
  };
  auto tensor = host_pool(1)->allocate({4}, DLDataType{kDLFloat, 32, 1});
  ASSERT_TRUE(tensor);
  // NOLINTBEGIN(bugprone-use-after-move): the moved-from worker is what is tested.
  refused(worker.listen("127.0.0.1").error(), "listen");
  refused(worker.connect("127.0.0.1", 1, 10).error(), "connect");
  refused(worker.disconnect(1).error(), "disconnect");
  refused(worker.send(1, *tensor).error(), "send");
  refused(worker.receive(-1).error(), "receive");  // returns at once, never waits
  refused(worker.progress().error(), "progress");
  EXPECT_FALSE(worker.accept(-1));
  EXPECT_FALSE(worker.next_send_result());
  EXPECT_EQ(worker.fd(), -1);
  EXPECT_FALSE(worker.arm());
  EXPECT_EQ(worker.in_flight(), 0u);
  EXPECT_EQ(worker.in_flight(1), 0u);
  EXPECT_EQ(worker.waiting(), 0u);
  EXPECT_FALSE(worker.connected(1));
  EXPECT_EQ(worker.stats().sent, 0u);
  worker = std::move(taken);  // assigning a moved-from worker makes it whole again
  EXPECT_GE(worker.fd(), 0);
  EXPECT_TRUE(worker.progress());
  // NOLINTEND(bugprone-use-after-move)
}

}  // namespace
}  // namespace holoscan::test
