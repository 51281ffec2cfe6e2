#include "ucx/ucx_test_support.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "ipc/spawn.hpp"
#include "ucx/series.hpp"

namespace holoscan::test {

RefusingPort::RefusingPort(std::uint16_t port) : socket_(::socket(AF_INET, SOCK_STREAM, 0)) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  socklen_t length = sizeof(address);
  if (socket_ >= 0 &&
      ::bind(socket_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(socket_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port_ = ntohs(address.sin_port);
  }
}

RefusingPort::~RefusingPort() {
  if (socket_ >= 0) {
    ::close(socket_);
  }
}
pid_t start_peer(const std::vector<std::string>& arguments, const std::vector<int>& inherited) {
  const pid_t pid = ipc_demo::spawn(HOLOSCAN_DLPACK_UCX_PEER, arguments, inherited);
  EXPECT_GT(pid, 0) << "could not start " << HOLOSCAN_DLPACK_UCX_PEER;
  return pid;
}

pid_t start_gpu_peer(const std::vector<std::string>& arguments) {
#ifdef HOLOSCAN_DLPACK_UCX_GPU_PEER
  const pid_t pid = ipc_demo::spawn(HOLOSCAN_DLPACK_UCX_GPU_PEER, arguments, {});
  EXPECT_GT(pid, 0) << "could not start " << HOLOSCAN_DLPACK_UCX_GPU_PEER;
  return pid;
#else
  ADD_FAILURE() << "this binary was built without the GPU peer";
  (void)arguments;
  return -1;
#endif
}

int wait_peer(pid_t pid, int timeout_ms, ucx::Worker* worker) {
  return ipc_demo::wait_exit(pid, timeout_ms, [worker] {
    if (worker != nullptr) {
      (void)worker->progress();
    }
  });
}

EarlyListener start_early_listener(const std::vector<std::string>& options) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) {
    ADD_FAILURE() << "pipe";
    return {};
  }
  std::vector<std::string> arguments{"early", "port_fd=" + std::to_string(pipe_fds[1])};
  arguments.insert(arguments.end(), options.begin(), options.end());
  EarlyListener listener{start_peer(arguments, {pipe_fds[1]})};
  ::close(pipe_fds[1]);
  std::string text;
  char byte = 0;
  pollfd entry{pipe_fds[0], POLLIN, 0};
  constexpr int kPatienceMs = 20000;
  while (text.find('\n') == std::string::npos && ::poll(&entry, 1, kPatienceMs) == 1 &&
         ::read(pipe_fds[0], &byte, 1) == 1) {
    text.push_back(byte);
  }
  ::close(pipe_fds[0]);
  listener.port = static_cast<std::uint16_t>(std::strtoul(text.c_str(), nullptr, 10));
  EXPECT_NE(listener.port, 0) << "the early listener did not say its port";
  return listener;
}

ucx::Worker make_worker(const ucx::WorkerConfig& config) {
  auto worker = ucx::Worker::create(config);
  if (!worker) {
    ADD_FAILURE() << "ucx::Worker::create: " << to_string(worker.error());
    std::abort();  // every test needs its worker; nothing sensible follows without one
  }
  return std::move(*worker);
}

std::string listen_on_loopback(ucx::Worker& worker) {
  auto port = worker.listen("127.0.0.1", 0);
  EXPECT_TRUE(port) << (port ? "" : to_string(port.error()));
  return port ? std::to_string(*port) : "0";
}

SendingSide connect_receiver(std::size_t window, const std::vector<std::string>& options,
                             const std::vector<int>& inherited) {
  ucx::WorkerConfig config;
  config.window = window;
  SendingSide side{make_worker(config)};
  std::vector<std::string> arguments{"receive", "port=" + listen_on_loopback(side.worker)};
  arguments.insert(arguments.end(), options.begin(), options.end());
  side.receiver = start_peer(arguments, inherited);
  const auto peer = side.worker.accept(20000);
  EXPECT_TRUE(peer) << "the receiver did not connect";
  side.peer = peer.value_or(0);
  return side;
}

ReceivingSide connect_sender(std::size_t pool_blocks, const std::vector<std::string>& options) {
  ucx::WorkerConfig config;
  if (pool_blocks != 0) {
    auto pool = TensorPool::create({PoolMemory::kHost, 0, ucx_series::kMaxBytes, pool_blocks});
    EXPECT_TRUE(pool) << (pool ? "" : to_string(pool.error()));
    config.receive_pool = pool ? *pool : nullptr;
  }
  ReceivingSide side{config.receive_pool, make_worker(config)};
  std::vector<std::string> arguments{"send", "port=" + listen_on_loopback(side.worker)};
  arguments.insert(arguments.end(), options.begin(), options.end());
  side.sender = start_peer(arguments);
  return side;
}

InProcessLink connect_in_process(ucx::Worker& listener, ucx::Worker& client) {
  const std::string port = listen_on_loopback(listener);
  InProcessLink link{make_unexpected(ErrorCode::kFailure, "not connected")};
  std::atomic<bool> answered{false};
  std::thread connecting([&] {
    link.client = client.connect("127.0.0.1", static_cast<std::uint16_t>(std::stoi(port)), 20000);
    answered.store(true);
  });
  link.listener = listener.accept(20000).value_or(0);
  while (!answered.load()) {  // the listener's rounds answer the Hello
    (void)listener.progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  connecting.join();
  if (link.client && link.listener == 0) {
    link.client = make_unexpected(ErrorCode::kFailure, "the listener accepted nobody");
  }
  return link;
}

SilentListener::SilentListener() : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      listen(fd_, 4) != 0 ||
      getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ADD_FAILURE() << "no loopback listener";
    return;
  }
  port_ = ntohs(address.sin_port);
}

SilentListener::~SilentListener() {
  if (fd_ >= 0) {
    close(fd_);
  }
}

SeriesSender::SeriesSender(ucx::Worker& worker, ucx::PeerId peer, std::size_t blocks)
    : worker_(worker), peer_(peer) {
  auto made = TensorPool::create({PoolMemory::kHost, 0, ucx_series::kMaxBytes, blocks});
  EXPECT_TRUE(made) << (made ? "" : to_string(made.error()));
  pool = made ? *made : nullptr;
}

bool SeriesSender::send(std::uint64_t k) {
  const auto layout = ucx_series::layout(k);
  auto tensor = pool->allocate(layout.shape, layout.dtype);
  for (; !tensor && tensor.error().code == ErrorCode::kResourceExhausted;
       tensor = pool->allocate(layout.shape, layout.dtype)) {
    drain();  // a block comes back once UCX is done with it
  }
  if (!tensor) {
    ADD_FAILURE() << to_string(tensor.error());
    return false;
  }
  ucx_series::fill(k, tensor->data(), static_cast<std::size_t>(tensor->nbytes()));
  auto sequence = worker_.send(peer_, *tensor);
  for (; !sequence && sequence.error().code == ErrorCode::kBackpressured;
       sequence = worker_.send(peer_, *tensor)) {
    drain();
  }
  if (!sequence) {
    ADD_FAILURE() << "send of tensor " << k << ": " << to_string(sequence.error());
    return false;
  }
  sent.push_back(*sequence);
  most_in_flight = std::max(most_in_flight, worker_.in_flight(peer_));
  return true;
}

void SeriesSender::drain() {
  (void)worker_.progress();
  while (auto result = worker_.next_send_result()) {
    EXPECT_EQ(result->peer, peer_);
    if (result->outcome) {
      delivered.push_back(result->sequence);
    } else {
      failed.emplace_back(result->sequence, result->outcome.error());
    }
  }
}

bool SeriesSender::finish(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (delivered.size() + failed.size() < sent.size() &&
         std::chrono::steady_clock::now() < deadline) {
    drain();
  }
  return delivered.size() + failed.size() == sent.size();
}

bool SeriesSender::wait_delivered(std::size_t count, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (delivered.size() < count && std::chrono::steady_clock::now() < deadline) {
    drain();
  }
  return delivered.size() >= count;
}

void for_each_failing_allocation(const std::function<bool(std::uint64_t skip)>& attempt) {
  std::uint64_t skip = 0;
  while (attempt(skip) && skip < 200) {
    ++skip;
  }
  EXPECT_GT(skip, 0u) << "no allocation failed: the test saw nothing";
  EXPECT_LT(skip, 200u);
}

}  // namespace holoscan::test
