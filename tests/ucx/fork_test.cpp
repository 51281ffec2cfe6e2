// fork() with a worker alive: UCX does not survive it (src/ucx/fork_watch.hpp). A child's copy of
// a worker must leave the parent's connections whole, whatever the child does with it, and a
// child's own UCX, which would never connect, is refused with the reason.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/callback_tensor.hpp"
#include "support/thread_sanitizer.hpp"
#include "ucx/series.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

// Runs `child` in a forked child, which exits with its result; the child's exit status (-1 when
// it did not exit normally).
template <class Child>
int in_child(Child child) {
  const pid_t pid = fork();
  if (pid == 0) {
    _exit(child());
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
    return -1;
  }
  return WEXITSTATUS(status);
}

// Sends tensor `k` of the series from `client` and receives it on `receiver`; "" when it came
// whole, else what went wrong.
std::string one_tensor_across(LinkedWorkers& link, std::uint64_t k) {
  auto pool = TensorPool::create({PoolMemory::kHost, 0, ucx_series::kMaxBytes, 1});
  if (!pool) {
    return "no pool";
  }
  const auto layout = ucx_series::layout(k);
  auto tensor = (*pool)->allocate(layout.shape, layout.dtype);
  if (!tensor) {
    return "no tensor";
  }
  ucx_series::fill(k, tensor->data(), static_cast<std::size_t>(tensor->nbytes()));
  if (auto sent = link.client.send(*link.link.client, *tensor); !sent) {
    return "send: " + to_string(sent.error());
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    (void)link.client.progress();
    auto received = link.receiver.receive(1);
    if (!received) {
      return "receive: " + to_string(received.error());
    }
    if (*received) {
      return ucx_series::check(k, (*received)->tensor);
    }
  }
  return "nothing arrived within 10 s";
}

// The child tears its copies down (as a Python child does at exit, or a C++ one leaving its
// scope). That took the parent's connection apart before: the tensor sent after it never came,
// and UCX aborted the parent when it closed the worker (a UCX handle gone from its epoll set).
TEST(UcxFork, AChildsCopiesGoingAwayLeaveTheParentsConnectionWhole) {
  auto link = std::make_unique<LinkedWorkers>();
  ASSERT_TRUE(link->link.client) << to_string(link->link.client.error());
  ASSERT_EQ(one_tensor_across(*link, 0), "");
  const int child = in_child([&] {
    link.reset();  // the child's copies: both workers, their connection, the listener
    return 0;
  });
  EXPECT_EQ(child, 0);
  EXPECT_EQ(one_tensor_across(*link, 1), "") << "after the child's copies went away";
  EXPECT_TRUE(link->client.connected(*link->link.client));
  link.reset();  // the parent's own teardown, which UCX aborted before
}

// A producer's deleter that forks while a connect() waits (the deleter runs from the wait's
// round, as a send to another peer ends): the child's copy of the connect() returned without
// the answer and then ended the connection it tried, calling the parent's UCX (its endpoint,
// its sockets) from the child. It says kNotSupported now, as every call on a child's copy does.
TEST(UcxFork, AForkFromADeleterDuringConnectLeavesTheParentsUcxAlone) {
#ifdef HDL_THREAD_SANITIZER
  // Two threads of the parent run without pause inside ThreadSanitizer's runtime (allocating,
  // locking) while the fork happens, which TSan does not support: once in CI the child blocked
  // for 20 s with no report, which reads as the hang this test looks for (51 runs here passed,
  // 45 of them beside two busy cores). The default and AddressSanitizer presets run it.
  GTEST_SKIP() << "ThreadSanitizer does not support a fork() while other threads run in it";
#endif
  auto link = std::make_unique<LinkedWorkers>();
  ASSERT_TRUE(link->link.client) << to_string(link->link.client.error());
  SilentListener silent;  // the connect() waits for an answer that never comes
  const pid_t parent = getpid();
  const std::thread::id connecting = std::this_thread::get_id();
  pid_t child = -1;
  bool armed = false;  // only a deleter run by the connect() forks
  bool elsewhere = false;
  {
    auto tensor = make_tensor_from_dlpack_versioned(make_callback_tensor(
        [&] {
          if (armed && std::this_thread::get_id() == connecting) {
            child = fork();  // in the child, the connect() below goes on without its wait
          } else {
            elsewhere = true;
          }
        },
        std::int64_t{4} << 20));  // rendezvous-sized: UCX holds it until the receiver takes it
    ASSERT_TRUE(tensor) << to_string(tensor.error());
    ASSERT_TRUE(link->client.send(*link->link.client, *tensor));
  }
  // The receiver takes the tensor while the connect() waits: its confirmation ends the send in
  // one of the wait's rounds, which runs the deleter.
  std::atomic<bool> done{false};
  std::thread receiving([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    while (!done.load()) {
      (void)link->receiver.receive(20);
    }
  });
  // Another thread of the parent takes the client's mutex over and over: the fork often finds it
  // held, a copy the child must never wait for (it would for ever).
  std::thread asking([&] {
    while (!done.load()) {
      (void)link->client.in_flight();
    }
  });
  armed = true;
  auto connected = link->client.connect("127.0.0.1", silent.port(), 3000);
  armed = false;
  if (getpid() != parent) {
    _exit(!connected && connected.error().code == ErrorCode::kNotSupported &&
                  connected.error().message.rfind("ucx connect: this worker is a forked child's",
                                                  0) == 0
              ? 0
              : 1);
  }
  done.store(true);
  receiving.join();
  asking.join();
  ASSERT_FALSE(elsewhere) << "the deleter ran outside the connect()";
  ASSERT_GT(child, 0) << "the deleter never ran during the connect()";
  int status = 0;
  pid_t reaped = 0;
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
       (reaped = waitpid(child, &status, WNOHANG)) == 0 &&
       std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (reaped != child) {
    ::kill(child, SIGKILL);
    (void)waitpid(child, &status, 0);
    FAIL() << "the child hung in its copy of the connect()";
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's connect() did not say it was a forked copy";
  ASSERT_FALSE(connected);
  EXPECT_EQ(connected.error().code, ErrorCode::kTimeout) << to_string(connected.error());
  EXPECT_EQ(one_tensor_across(*link, 3), "") << "after the child's connect()";
}

// One call drops several sends' claims together (a forced close cancels every send UCX still
// holds for a peer that stopped reading), and the first producer's deleter forks: the child's
// copy of the call went on to run the other deleters of that batch, so each of those producers
// saw its deleter run twice, once in each process. The child now leaves them to the parent.
TEST(UcxFork, AForkFromOneDeleterRunsNoOtherDeleterOfItsBatchInTheChild) {
  auto link = std::make_unique<LinkedWorkers>();
  ASSERT_TRUE(link->link.client) << to_string(link->link.client.error());
  const pid_t parent = getpid();
  const std::thread::id calling = std::this_thread::get_id();
  pid_t child = -1;
  int call = 0;  // the client's calls that may drop claims, counted from 1
  std::vector<int> calls_that_dropped;
  int ran_in_child = 0;
  const auto deleter = [&] {
    if (getpid() != parent) {
      ++ran_in_child;  // the child's copy of a deleter the parent runs too
      return;
    }
    calls_that_dropped.push_back(std::this_thread::get_id() == calling ? call : -1);
    if (child < 0) {
      child = fork();  // in the child, the call goes on with the rest of its batch
    }
  };
  // Rendezvous-sized, to a receiver that never reads: UCX holds both sends until the close.
  for (int i = 0; i < 2; ++i) {
    auto tensor =
        make_tensor_from_dlpack_versioned(make_callback_tensor(deleter, std::int64_t{4} << 20));
    ASSERT_TRUE(tensor) << to_string(tensor.error());
    ASSERT_TRUE(link->client.send(*link->link.client, *tensor));
  }
  ASSERT_TRUE(calls_that_dropped.empty()) << "a send ended before the receiver read it";
  call = 1;
  auto disconnected = link->client.disconnect(*link->link.client);
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       getpid() == parent && calls_that_dropped.size() < 2 &&
       std::chrono::steady_clock::now() < until;) {
    ++call;
    (void)link->client.progress();
  }
  if (getpid() != parent) {
    _exit(ran_in_child == 0 ? 0 : 1);
  }
  EXPECT_TRUE(disconnected) << to_string(disconnected.error());
  ASSERT_GT(child, 0) << "no deleter ran in the client's calls";
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child ran the deleters of the parent's batch";
  ASSERT_EQ(calls_that_dropped.size(), 2u);
  EXPECT_EQ(calls_that_dropped[0], calls_that_dropped[1])
      << "the claims were not dropped by one call (the test shows nothing then)";
  EXPECT_GT(calls_that_dropped[0], 0) << "not by the client's calls";
}

// A child that calls its copy would progress the parent's UCX on the shared sockets: each call is
// refused, and the parent's connection stays whole.
TEST(UcxFork, AChildsCopyRefusesEveryCall) {
  auto link = std::make_unique<LinkedWorkers>();
  ASSERT_TRUE(link->link.client) << to_string(link->link.client.error());
  const int child = in_child([&] {
    auto pool = TensorPool::create({PoolMemory::kHost, 0, 64, 1});
    auto tensor = (*pool)->allocate({4}, DLDataType{kDLFloat, 32, 1});
    const auto refused = [](const Error& error, const char* call) {
      return error.code == ErrorCode::kNotSupported &&
             error.message.rfind(std::string("ucx ") + call + ": this worker is a forked child's",
                                 0) == 0;
    };
    int failures = 0;
    auto sent = link->client.send(*link->link.client, *tensor);
    failures += sent || !refused(sent.error(), "send") ? 1 : 0;
    auto received = link->receiver.receive(100);
    failures += received || !refused(received.error(), "receive") ? 1 : 0;
    auto progressed = link->client.progress();
    failures += progressed || !refused(progressed.error(), "progress") ? 1 : 0;
    auto disconnected = link->client.disconnect(*link->link.client);
    failures += disconnected || !refused(disconnected.error(), "disconnect") ? 1 : 0;
    failures += link->receiver.accept(100) ? 1 : 0;
    failures += link->client.fd() != -1 ? 1 : 0;
    failures += link->client.connected(*link->link.client) ? 1 : 0;
    failures += link->client.is_forked_copy() && link->receiver.is_forked_copy() ? 0 : 1;
    link.reset();
    return failures;
  });
  EXPECT_EQ(child, 0) << "calls the child's copies did not refuse";
  EXPECT_FALSE(link->client.is_forked_copy());
  EXPECT_EQ(one_tensor_across(*link, 2), "");
}

// UCX made in a child of a process with a worker alive never connects (a connect() timed out):
// Worker::create says why instead. A child forked with no worker alive uses UCX as usual.
TEST(UcxFork, AChildForkedWithAWorkerAliveIsRefusedUcxWithTheReason) {
  std::optional<ucx::Worker> alive(make_worker());
  const int with_worker = in_child([] {
    auto made = ucx::Worker::create();
    if (made) {
      return 1;
    }
    const bool said_why = made.error().code == ErrorCode::kNotSupported &&
                          made.error().message.find("forked while its parent had a UCX worker") !=
                              std::string::npos;
    return said_why ? 0 : 2;
  });
  EXPECT_EQ(with_worker, 0) << "1: a worker was made; 2: refused for another reason";
  alive.reset();
  const int without = in_child([] {
    LinkedWorkers link;
    if (!link.link.client) {
      return 1;
    }
    return one_tensor_across(link, 3).empty() ? 0 : 2;
  });
  EXPECT_EQ(without, 0) << "1: no connection; 2: the tensor did not come whole";
}

}  // namespace
}  // namespace holoscan::test
