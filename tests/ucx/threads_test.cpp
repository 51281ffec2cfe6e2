// One worker used from two threads: a receive() asleep on the worker's fd must wake when another
// thread's progress() lands the tensor it waits for, not sleep on to its deadline (UCX's fd tells
// only the thread that progresses first).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "support/thread_asleep.hpp"
#include "ucx/series.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

// A worker whose waits sleep on its fd at once, without polling first: the path these tests watch.
ucx::Worker make_sleeping_worker() {
  ucx::WorkerConfig config;
  config.spin_us = 0;
  return make_worker(config);
}

TEST(UcxThreads, AReceiverAsleepWakesWhenAnotherThreadProgressLandsItsTensor) {
  constexpr std::uint64_t kCount = 12;
  // Each receive would sleep this long if another thread's round left it asleep: the whole
  // series must take far less than one such wait.
  constexpr int kDeadlineMs = 30000;
  // window=1: the sender waits for each Ack, so every receive finds nothing and goes to sleep.
  auto [pool, worker, peer] = connect_sender(0, {"count=12", "window=1"});
  std::atomic<bool> done{false};
  std::thread progressing([&, &worker = worker] {
    while (!done.load()) {
      (void)worker.progress();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t k = 0; k < kCount; ++k) {
    auto received = worker.receive(kDeadlineMs);
    ASSERT_TRUE(received) << to_string(received.error());
    ASSERT_TRUE(received->has_value()) << "tensor " << k << " did not come";
    EXPECT_EQ(ucx_series::check(k, (*received)->tensor), "");
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(wait_peer(peer, kDeadlineMs, &worker), 0) << "the sender saw a send fail";
  done.store(true);
  progressing.join();
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count(), kDeadlineMs / 2)
      << "ms for the series: a receive slept on after another thread landed its tensor";
}

// Progresses `workers` on a thread of its own, every millisecond, until destroyed.
class Progressing {
 public:
  explicit Progressing(std::vector<ucx::Worker*> workers)
      : thread_([this, workers] {
          while (!done_.load()) {
            for (ucx::Worker* worker : workers) {
              (void)worker->progress();
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }) {}
  ~Progressing() {
    done_.store(true);
    thread_.join();
  }
  Progressing(const Progressing&) = delete;
  Progressing& operator=(const Progressing&) = delete;

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;  // last: starts once done_ is made
};

// CPU time the calling thread has used so far.
std::chrono::nanoseconds thread_cpu_time() {
  timespec now{};
  (void)clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

// A receive() on its own thread waiting up to `wait_ms`, and the CPU time it used meanwhile.
struct IdleReceive {
  std::optional<bool> got;  // whether something came
  std::chrono::nanoseconds cpu{0};
  std::thread thread;  // last: starts once the members it writes are made

  IdleReceive(ucx::Worker& worker, int wait_ms)
      : thread([this, &worker, wait_ms] {
          const auto before = thread_cpu_time();
          auto received = worker.receive(wait_ms);
          cpu = thread_cpu_time() - before;
          got = received && received->has_value();
        }) {}
};

// Receives asleep on one worker while another thread's round does work (here: one of them lands
// the one tensor sent and its Ack goes out) must sleep on afterwards, not wake over and over: the
// two left used seconds of CPU time each when the wake signal stayed readable until every sleeper
// was out of its sleep at once, which never happens while one re-enters before the other leaves.
TEST(UcxThreads, ReceiversAsleepSleepOnAfterAnotherThreadsRoundWakesThem) {
  constexpr int kWaitMs = 5000;
  constexpr auto kMostCpu = std::chrono::seconds(1);  // asleep: milliseconds; spinning: seconds
  ucx::Worker worker = make_sleeping_worker();
  ucx::Worker client = make_worker();
  auto peer = connect_in_process(worker, client).client;
  ASSERT_TRUE(peer) << to_string(peer.error());
  Progressing progressing({&client});
  std::vector<std::unique_ptr<IdleReceive>> receives;
  for (int k = 0; k < 3; ++k) {
    receives.push_back(std::make_unique<IdleReceive>(worker, kWaitMs));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // all asleep (else no wake)
  SeriesSender sender(client, *peer, 1);
  EXPECT_TRUE(sender.send(0));
  int got = 0;
  for (auto& receive : receives) {
    receive->thread.join();
    EXPECT_TRUE(receive->got.has_value()) << "the receive failed";
    got += receive->got.value_or(false) ? 1 : 0;
    EXPECT_TRUE(receive->got.value_or(false) || receive->cpu < kMostCpu)
        << std::chrono::duration_cast<std::chrono::milliseconds>(receive->cpu).count()
        << " ms of CPU time in a receive that found nothing for " << kWaitMs << " ms";
  }
  EXPECT_EQ(got, 1);
}

// A receive asleep with a long deadline learns promptly that its peer closed the connection, also
// while another thread progresses the worker (and so may be the one UCX tells).
TEST(UcxThreads, AReceiverAsleepLearnsPromptlyThatThePeerClosed) {
  constexpr int kDeadlineMs = 30000;
  ucx::Worker worker = make_sleeping_worker();
  ucx::Worker client = make_worker();
  auto peer = connect_in_process(worker, client).client;
  ASSERT_TRUE(peer) << to_string(peer.error());
  Progressing progressing({&worker, &client});
  std::optional<expected<std::optional<ucx::Received>, Error>> received;
  std::chrono::steady_clock::duration waited{};
  std::thread receiving([&] {
    const auto start = std::chrono::steady_clock::now();
    received = worker.receive(kDeadlineMs);
    waited = std::chrono::steady_clock::now() - start;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // asleep
  EXPECT_TRUE(client.disconnect(*peer));
  receiving.join();
  ASSERT_TRUE(received && !*received) << "the receive did not report the closed peer";
  EXPECT_EQ(received->error().code, ErrorCode::kClosed) << to_string(received->error());
  EXPECT_LT(std::chrono::duration_cast<std::chrono::seconds>(waited).count(), kDeadlineMs / 2000)
      << "s until the receive learned that its peer closed";
}

// A connect() learns of the listener's answer promptly while another thread is asleep in a
// receive() on the same worker (either of them may be the one UCX tells).
TEST(UcxThreads, AConnectBesideASleepingReceiveEndsPromptly) {
  constexpr int kReceiveMs = 6000;
  constexpr int kConnectMs = 30000;
  ucx::Worker worker = make_sleeping_worker();
  ucx::Worker listener = make_worker();
  const std::string port = listen_on_loopback(listener);
  Progressing progressing({&listener});
  IdleReceive receive(worker, kReceiveMs);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // asleep
  const auto start = std::chrono::steady_clock::now();
  auto peer = worker.connect("127.0.0.1", static_cast<std::uint16_t>(std::stoi(port)), kConnectMs);
  const auto waited = std::chrono::steady_clock::now() - start;
  receive.thread.join();
  ASSERT_TRUE(peer) << to_string(peer.error());
  EXPECT_LT(std::chrono::duration_cast<std::chrono::seconds>(waited).count(), kReceiveMs / 2000)
      << "s for a connect beside a sleeping receive";
  EXPECT_EQ(receive.got, std::optional<bool>(false));
}

// A disconnect() from a peer that hangs (stopped: its connection stays up, nothing answers) leaves
// the close pending inside UCX for as long as the peer hangs. Counting it as something to poll
// kept every wait of the worker waking every 20 us the whole time (about a quarter of a core,
// for a minute and more here) although what finishes the close (the peer's answer, or its
// connection breaking) comes through the fd. The sends of that peer still end once it is gone.
TEST(UcxThreads, ADisconnectFromAPeerThatHangsLeavesWaitsAsleep) {
  constexpr int kWaitMs = 3000;
  constexpr auto kMostCpu = std::chrono::milliseconds(300);  // asleep: ~10 ms; polling: ~700
  auto [worker, receiver, peer] = connect_receiver(8, {"count=0", "hold_after=2"});
  ASSERT_NE(peer, 0u);
  SeriesSender sender(worker, peer, 12);
  for (std::uint64_t k = 0; k < 6; ++k) {
    ASSERT_TRUE(sender.send(k));
  }
  ASSERT_TRUE(sender.wait_delivered(2, 10000));
  ASSERT_EQ(sender.delivered.size(), 2u);
  ASSERT_EQ(::kill(receiver, SIGSTOP), 0);
  ASSERT_TRUE(worker.disconnect(peer));
  const auto before = thread_cpu_time();
  auto nothing = worker.receive(kWaitMs);
  const auto cpu = thread_cpu_time() - before;
  EXPECT_TRUE(nothing && !*nothing);
  EXPECT_LT(cpu, kMostCpu) << std::chrono::duration_cast<std::chrono::milliseconds>(cpu).count()
                           << " ms of CPU time in a receive() that waited " << kWaitMs << " ms";
  ::kill(receiver, SIGKILL);
  EXPECT_EQ(wait_peer(receiver, 20000, &worker), -1);
  ASSERT_TRUE(sender.finish(20000)) << "a send to the peer never ended";
  EXPECT_EQ(sender.failed.size(), 4u);
  EXPECT_EQ(worker.waiting(), 0u);
}

// A connect() that gets no answer sleeps to its deadline: the Hello it sent stays with UCX the
// whole time, and counting such a message as something to poll for kept the wait (and every other
// wait on the worker) waking every few tens of microseconds instead.
TEST(UcxThreads, AConnectNobodyAnswersSleepsUntilItsDeadline) {
  constexpr int kWaitMs = 6000;
  constexpr auto kMostCpu = std::chrono::milliseconds(300);  // asleep: ~10 ms; polling: ~900
  ucx::Worker worker = make_sleeping_worker();
  SilentListener listener;
  const auto before = thread_cpu_time();
  auto connected = worker.connect("127.0.0.1", listener.port(), kWaitMs);
  const auto cpu = thread_cpu_time() - before;
  ASSERT_FALSE(connected);
  EXPECT_EQ(connected.error().code, ErrorCode::kTimeout) << to_string(connected.error());
  EXPECT_LT(cpu, kMostCpu) << std::chrono::duration_cast<std::chrono::milliseconds>(cpu).count()
                           << " ms of CPU time in a connect that waited " << kWaitMs << " ms";
}

// Destroying a worker while other threads sleep in its waits: each wait wakes and returns, and
// the destructor ends the worker only after they did. They found the worker gone before (the
// destructor did not wait for them) and crashed the process inside UCX's progress.
TEST(UcxThreads, DestroyingTheWorkerWakesTheThreadsAsleepInItsWaits) {
  constexpr int kWaitMs = 30000;
  auto worker = std::make_unique<ucx::Worker>(make_sleeping_worker());
  SilentListener listener;  // the connect() waits for an answer that never comes
  ucx::Worker& shared = *worker;
  std::optional<expected<std::optional<ucx::Received>, Error>> received;
  std::optional<std::optional<ucx::PeerId>> accepted;
  std::optional<expected<ucx::PeerId, Error>> connected;
  // Each thread says who it is before it calls; the destructor may only begin once all three sleep
  // inside (a call that starts after it began would use an object going away).
  std::atomic<pid_t> ids[3] = {0, 0, 0};
  std::thread receiving([&] {
    ids[0] = test::current_thread_id();
    received = shared.receive(-1);
  });
  std::thread accepting([&] {
    ids[1] = test::current_thread_id();
    accepted = shared.accept(kWaitMs);
  });
  std::thread connecting([&] {
    ids[2] = test::current_thread_id();
    connected = shared.connect("127.0.0.1", listener.port(), kWaitMs);
  });
  for (const std::atomic<pid_t>& id : ids) {
    while (id.load() == 0) {
      std::this_thread::yield();
    }
    (void)test::wait_until_asleep(id.load());  // a wait sleeps on the worker's fd
  }
  const auto start = std::chrono::steady_clock::now();
  worker.reset();
  const auto took = std::chrono::steady_clock::now() - start;
  receiving.join();
  accepting.join();
  connecting.join();
  ASSERT_TRUE(received.has_value());
  ASSERT_FALSE(*received) << "a receive() on a worker being destroyed found something";
  EXPECT_EQ(received->error().code, ErrorCode::kClosed);
  EXPECT_EQ(received->error().message, "ucx receive: the worker is being destroyed");
  ASSERT_TRUE(accepted.has_value());
  EXPECT_FALSE(*accepted);
  ASSERT_TRUE(connected.has_value());
  ASSERT_FALSE(*connected) << "a connect() nobody answered succeeded";
  EXPECT_EQ(connected->error().code, ErrorCode::kClosed) << to_string(connected->error());
  EXPECT_EQ(connected->error().message, "ucx connect: the worker is being destroyed");
  EXPECT_LT(took, std::chrono::seconds(5)) << "the destructor waited for the waits' deadlines";
}

// stop() from another thread: the waits under way end at once, and the worker hands out nothing
// more. A tensor sent after stop() returned is neither received here nor reported delivered; it
// ends failed (kClosed) once the stopped worker is destroyed. Python's close() from another
// thread used to leave a receive() serving for the rest of its 100 ms slice: it handed that tensor
// out and confirmed it.
TEST(UcxThreads, StoppingTheWorkerEndsItsWaitsAndHandsOutNothingMore) {
  ucx::WorkerConfig config;
  config.spin_us = 0;
  auto receiver = std::make_unique<ucx::Worker>(make_worker(config));
  auto client = make_worker();
  const auto link = connect_in_process(*receiver, client);
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  std::optional<expected<std::optional<ucx::Received>, Error>> received;
  std::optional<std::optional<ucx::PeerId>> accepted;
  std::atomic<pid_t> ids[2] = {0, 0};
  std::thread receiving([&] {
    ids[0] = test::current_thread_id();
    received = receiver->receive(-1);
  });
  std::thread accepting([&] {
    ids[1] = test::current_thread_id();
    accepted = receiver->accept(30000);
  });
  for (const std::atomic<pid_t>& id : ids) {
    while (id.load() == 0) {
      std::this_thread::yield();
    }
    (void)test::wait_until_asleep(id.load());  // both asleep in their waits
  }
  const auto start = std::chrono::steady_clock::now();
  receiver->stop();
  receiving.join();
  accepting.join();
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(received.has_value());
  ASSERT_FALSE(*received) << "a receive() on a stopped worker found something";
  EXPECT_EQ(received->error().code, ErrorCode::kClosed);
  EXPECT_EQ(received->error().message, "ucx receive: the worker was stopped");
  ASSERT_TRUE(accepted.has_value());
  EXPECT_FALSE(*accepted);
  EXPECT_LT(took, std::chrono::seconds(2)) << "the waits ran on past stop()";

  auto pool = TensorPool::create({PoolMemory::kHost, 0, ucx_series::kMaxBytes, 1});
  ASSERT_TRUE(pool);
  auto tensor = ucx_series::pooled(**pool, 0);
  ASSERT_TRUE(tensor);
  auto sequence = client.send(*link.client, *tensor);
  ASSERT_TRUE(sequence) << to_string(sequence.error());
  for (int i = 0; i < 200; ++i) {  // time enough to land, were anything still taken
    (void)client.progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  auto later = receiver->receive(0);
  ASSERT_FALSE(later) << "a stopped worker handed out a tensor";
  EXPECT_EQ(later.error().message, "ucx receive: the worker was stopped");
  auto progressed = receiver->progress();
  ASSERT_FALSE(progressed);
  EXPECT_EQ(progressed.error().code, ErrorCode::kClosed);
  receiver->stop();  // idempotent
  receiver.reset();
  std::optional<ucx::SendResult> result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!result && std::chrono::steady_clock::now() < deadline) {
    (void)client.progress();
    result = client.next_send_result();
  }
  ASSERT_TRUE(result) << "the send never ended";
  EXPECT_EQ(result->sequence, *sequence);
  ASSERT_FALSE(result->outcome) << "a tensor sent to a stopped worker was reported delivered";
  EXPECT_EQ(result->outcome.error().code, ErrorCode::kClosed) << to_string(result->outcome.error());
}

// A thread asleep in accept() (or in a receive() with a deadline) while another thread takes a
// tensor that had landed with receive(0): the tensor leaves without a progress round, so its
// confirmation is queued, and nothing woke the sleeper to send it. The sender (window 1) learned
// that its tensor was delivered only when the sleeper's wait ran out (4 s here), and a sender
// with a full window waited that long for every tensor.
TEST(UcxThreads, AConfirmationQueuedBesideASleepingWaitGoesOutAtOnce) {
  ucx::WorkerConfig config;
  config.spin_us = 0;
  auto receiver = make_worker(config);
  ucx::WorkerConfig one;
  one.window = 1;
  auto client = make_worker(one);
  const auto link = connect_in_process(receiver, client);
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  auto pool = TensorPool::create({PoolMemory::kHost, 0, ucx_series::kMaxBytes, 2});
  ASSERT_TRUE(pool);
  auto tensor = ucx_series::pooled(**pool, 0);
  ASSERT_TRUE(tensor);
  ASSERT_TRUE(client.send(*link.client, *tensor));
  for (int i = 0; i < 300; ++i) {  // the tensor lands; nobody takes it yet
    (void)client.progress();
    (void)receiver.progress();
  }
  constexpr int kSleepMs = 4000;
  std::thread sleeper([&] { EXPECT_FALSE(receiver.accept(kSleepMs)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // asleep on the worker's fd
  auto received = receiver.receive(0);  // landed already: handed out without a round
  ASSERT_TRUE(received && *received) << "nothing arrived";
  const auto taken = std::chrono::steady_clock::now();
  std::optional<ucx::SendResult> result;
  while (!result && std::chrono::steady_clock::now() - taken < std::chrono::seconds(10)) {
    (void)client.progress();
    result = client.next_send_result();
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - taken)
                          .count();
  sleeper.join();
  ASSERT_TRUE(result) << "the sender never learned that its tensor was delivered";
  EXPECT_TRUE(result->outcome);
  EXPECT_LT(waited, kSleepMs / 2) << "ms before the confirmation went out";
}

}  // namespace
}  // namespace holoscan::test
