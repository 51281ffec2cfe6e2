// A listen() that fails after UCX made its listener (ucp_listener_query refused,
// failing_listener_query.cpp): the listener goes with the failure, so that nobody's connection
// is taken on a port the caller was never told of, and listen() can be tried again.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "ucx/failing_listener_query.hpp"
#include "ucx/series.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

constexpr int kPatienceMs = 20000;

// A port another socket holds is a name taken: kDuplicateName, as for a second listener of the
// worker, saying UCX's reason; the worker can still listen elsewhere.
TEST(UcxListen, APortAnotherSocketHoldsIsADuplicateNameAndTheWorkerListensElsewhere) {
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(holder, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(holder, 1), 0);
  ASSERT_EQ(::getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::uint16_t taken = ntohs(address.sin_port);
  ucx::Worker worker = make_worker();
  auto refused = worker.listen("127.0.0.1", taken);
  ASSERT_FALSE(refused) << "listen() took port " << *refused << ", which another socket holds";
  EXPECT_EQ(refused.error().code, ErrorCode::kDuplicateName) << to_string(refused.error());
  EXPECT_NE(refused.error().message.find("ucp_listener_create"), std::string::npos)
      << to_string(refused.error());
  auto elsewhere = worker.listen("127.0.0.1", 0);
  EXPECT_TRUE(elsewhere) << to_string(elsewhere.error());
  ::close(holder);
}

TEST(UcxListen, AListenerWhoseQueryFailsIsDestroyedAndListenWorksAgain) {
  ucx::Worker worker = make_worker();
  expected<std::uint16_t, Error> port = make_unexpected(ErrorCode::kFailure, "not yet");
  std::size_t failed = 0;
  std::uint16_t refused_port = 0;  // where the listener UCX made was bound
  {
    FailingListenerQueries failing(UCS_ERR_NO_RESOURCE);
    port = worker.listen("127.0.0.1", 0);
    failed = failing.failed();
    refused_port = failing.port();
  }
  ASSERT_EQ(failed, 1u);
  ASSERT_FALSE(port) << "listen() gave port " << *port;
  EXPECT_EQ(port.error().code, ErrorCode::kResourceExhausted) << to_string(port.error());
  EXPECT_NE(port.error().message.find("ucp_listener_query"), std::string::npos)
      << to_string(port.error());
  ASSERT_NE(refused_port, 0u);

  // Nobody listens there any more: a connect to it fails, and the worker accepts nothing. The
  // port is held meanwhile, so that no listener of a test running beside this one takes it;
  // where it cannot be held (the listener was not destroyed, say), the check runs all the same.
  const RefusingPort held(refused_port);
  ucx::Worker client = make_worker();
  expected<ucx::PeerId, Error> connected = make_unexpected(ErrorCode::kFailure, "not yet");
  std::atomic<bool> returned{false};
  std::thread connecting([&] {
    connected = client.connect("127.0.0.1", refused_port, 3000);
    returned.store(true);
  });
  std::optional<ucx::PeerId> accepted;
  while (!returned.load()) {
    if (auto id = worker.accept(5)) {
      accepted = id;  // also answers the Hello of a connection it took
    }
  }
  connecting.join();
  EXPECT_FALSE(connected) << "a connection on the port of a failed listen(): peer " << *connected;
  EXPECT_FALSE(accepted) << "the worker accepted peer " << *accepted
                         << " on the port of a failed listen()";

  // listen() again (connect_in_process makes it): a connection comes, and a tensor crosses it.
  const InProcessLink link = connect_in_process(worker, client);
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  ASSERT_NE(link.listener, 0u);
  SeriesSender sender(client, *link.client, 1);
  ASSERT_TRUE(sender.send(0));
  std::optional<ucx::Received> got;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kPatienceMs);
  while ((!got || sender.delivered.empty()) && std::chrono::steady_clock::now() < until) {
    auto received = worker.receive(10);
    ASSERT_TRUE(received) << to_string(received.error());
    if (*received) {
      got = std::move(**received);
    }
    sender.drain();
  }
  ASSERT_TRUE(got) << "the tensor never came";
  EXPECT_EQ(got->peer, link.listener);
  EXPECT_EQ(ucx_series::check(0, got->tensor), "");
  EXPECT_EQ(sender.delivered.size(), 1u) << "the tensor was never confirmed";
}

}  // namespace
}  // namespace holoscan::test
