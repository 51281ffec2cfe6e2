// The other process of the UCX tests. It always connects to the test's listener on 127.0.0.1.
//
//   holoscan_dlpack_ucx_peer send port=P count=N [window=W]
//       sends tensors 0..N-1 of the series from a 4-block host pool; exits 0 when all N were
//       delivered, 4 otherwise (count=0: sends until killed).
//   holoscan_dlpack_ucx_peer receive port=P count=N [go_fd=F] [hold_after=H]
//       (after a byte arrives on fd F) receives N tensors and checks each against the series;
//       exits 0 when all are right, 5 otherwise (count=0: receives until killed). With H, stops
//       receiving after H tensors and only progresses until killed.
//   holoscan_dlpack_ucx_peer raw port=P
//       sends the malformed cases by hand (malformed_cases.hpp) and checks the Acks; exits 0
//       when each refusal came back with its code, 6 otherwise.
//   holoscan_dlpack_ucx_peer burst port=P count=N messages=M [refused=R]
//       sends N small tensors by hand (sequence R refused, burst_cases()); exits 0 when every
//       one was answered with its code in exactly M Ack messages, 6 when one was not, 7 when
//       the answers took another number of messages.
//   holoscan_dlpack_ucx_peer flood port=P count=N allowed=A [code=C] [extra=E] [paced=1]
//       sends N small tensors by hand without waiting for any answer (a peer that ignores its
//       window; paced=1: each once the one before was answered), then E more (1) once all N were
//       answered; exits 0 when the first A and the E were delivered and the others refused with
//       ErrorCode C (kBackpressured), 6 otherwise.
//   holoscan_dlpack_ucx_peer acker port=P count=N
//       takes N tensor messages (answering none), then confirms all of them with one Ack and
//       the first again with a second one; exits 0 when the N came as sequences 1..N, 6 else.
//   holoscan_dlpack_ucx_peer carrier port=P
//       sends tensor 1, takes the tensor the test sends back, then sends a tensor refused for
//       its dtype whose header confirms that one; exits 0 when tensor 1's confirmation came in
//       the returning tensor's header, 6 when it came in none, 7 when it came as an Ack too,
//       8 when the refusal's Ack did not come.
//   holoscan_dlpack_ucx_peer reclaimed port=P
//       sends tensor 1 and takes one tensor back; exits 0 when tensor 1 was confirmed by an Ack
//       (the test's first tensor back, which carried the confirmation, failed inside UCX) and
//       the tensor that came confirmed nothing, 6 when no confirmation came, 7 when it came in
//       a tensor's header.
//   holoscan_dlpack_ucx_peer early port_fd=F [hello_after=MS] [linger=MS]
//       listens on the loopback by hand and writes its port to fd F; takes one connection and
//       sends it tensor 1 before answering its Hello, answers the Hello MS after it came (without
//       hello_after: never), then progresses until the connection goes or `linger` ms (10000)
//       passed; exits 0 when tensor 1 was confirmed delivered, 9 when it was not, 6 on failure.
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "holoscan/tensor_pool.hpp"
#include "holoscan/ucx.hpp"
#include "ucx/malformed_cases.hpp"
#include "ucx/raw_peer.hpp"
#include "ucx/series.hpp"

namespace {

using holoscan::ErrorCode;
namespace ucx = holoscan::ucx;
namespace series = holoscan::test::ucx_series;

std::map<std::string, std::string> parse(int argc, char** argv) {
  std::map<std::string, std::string> options;
  for (int i = 2; i < argc; ++i) {
    const std::string word = argv[i];
    const auto equals = word.find('=');
    options[word.substr(0, equals)] = equals == std::string::npos ? "" : word.substr(equals + 1);
  }
  return options;
}

std::uint64_t number(const std::map<std::string, std::string>& options, const char* key,
                     std::uint64_t fallback) {
  auto found = options.find(key);
  return found == options.end() ? fallback : std::strtoull(found->second.c_str(), nullptr, 10);
}

int fail(int code, const std::string& why) {
  std::fprintf(stderr, "ucx peer: %s\n", why.c_str());
  return code;
}

// Counts the results that came; prints each failure.
void drain(ucx::Worker& worker, std::uint64_t& ended, std::uint64_t& delivered) {
  (void)worker.progress();
  while (auto result = worker.next_send_result()) {
    ++ended;
    if (result->outcome) {
      ++delivered;
    } else {
      std::fprintf(stderr, "ucx peer: send %llu failed: %s\n",
                   static_cast<unsigned long long>(result->sequence),
                   holoscan::to_string(result->outcome.error()).c_str());
    }
  }
}

int send_series(ucx::Worker& worker, ucx::PeerId peer, std::uint64_t count) {
  auto pool = holoscan::TensorPool::create({holoscan::PoolMemory::kHost, 0, series::kMaxBytes, 4});
  if (!pool) {
    return fail(3, pool.error().message);
  }
  std::uint64_t ended = 0;
  std::uint64_t delivered = 0;
  for (std::uint64_t k = 0; count == 0 || k < count; ++k) {
    const auto layout = series::layout(k);
    auto tensor = (*pool)->allocate(layout.shape, layout.dtype);
    for (; !tensor && tensor.error().code == ErrorCode::kResourceExhausted;
         tensor = (*pool)->allocate(layout.shape, layout.dtype)) {
      drain(worker, ended, delivered);
    }
    if (!tensor) {
      return fail(3, tensor.error().message);
    }
    series::fill(k, tensor->data(), static_cast<std::size_t>(tensor->nbytes()));
    auto sent = worker.send(peer, *tensor);
    for (; !sent && sent.error().code == ErrorCode::kBackpressured;
         sent = worker.send(peer, *tensor)) {
      drain(worker, ended, delivered);
    }
    if (!sent) {
      return fail(3, holoscan::to_string(sent.error()));
    }
  }
  while (ended < count) {
    drain(worker, ended, delivered);
  }
  return delivered == count ? 0 : 4;
}

bool wait_for_go(ucx::Worker& worker, int fd) {
  pollfd entry{fd, POLLIN, 0};
  while (poll(&entry, 1, 0) == 0) {
    (void)worker.progress();  // keep the connection serviced while holding everything back
    usleep(100);
  }
  char byte = 0;
  return read(fd, &byte, 1) == 1;
}

int receive_series(ucx::Worker& worker, std::uint64_t count, int go_fd, std::uint64_t hold_after) {
  if (go_fd >= 0 && !wait_for_go(worker, go_fd)) {
    return fail(5, "no go");
  }
  for (std::uint64_t k = 0; count == 0 || k < count; ++k) {
    while (hold_after != 0 && k == hold_after) {
      (void)worker.progress();  // land what comes, hand nothing out: the sender's window fills
      usleep(100);
    }
    auto received = worker.receive(20000);
    if (!received || !*received) {
      return fail(5, !received ? holoscan::to_string(received.error()) : "nothing came");
    }
    if ((*received)->sequence != k + 1) {
      return fail(5, "sequence " + std::to_string((*received)->sequence) + " where " +
                         std::to_string(k + 1) + " was due");
    }
    if (auto wrong = series::check(k, (*received)->tensor); !wrong.empty()) {
      return fail(5, wrong);
    }
  }
  return 0;
}

// 0 when every case that asked for an answer got one with its code; 6 (each miss reported) else.
int check_answers(const std::vector<holoscan::test::WireCase>& cases,
                  const std::map<std::uint64_t, std::uint32_t>& acks) {
  int status = 0;
  for (const auto& c : cases) {
    if (!c.reply) {
      continue;
    }
    auto found = acks.find(c.acked_as);
    if (found == acks.end() || found->second != static_cast<std::uint32_t>(c.code)) {
      status = fail(6, "\"" + c.name + "\" (" + std::to_string(c.acked_as) +
                           "): no Ack with code " + std::to_string(static_cast<int>(c.code)));
    }
  }
  return status;
}

int send_raw(std::uint16_t port) {
  holoscan::test::RawPeer raw(port);
  if (!raw.ok()) {
    return fail(6, "no raw connection");
  }
  const auto cases = holoscan::test::wire_cases();
  std::set<std::uint64_t> answered;  // the Acks name these (0 for every unnamed tensor)
  std::size_t unnamed = 0;           // Acks naming 0: one per such tensor
  for (const auto& c : cases) {
    if (!raw.send(static_cast<unsigned>(ucx::MessageId::kTensor), c.header, c.data, c.reply)) {
      return fail(6, "sending \"" + c.name + "\" failed");
    }
    if (c.reply) {
      answered.insert(c.acked_as);
      unnamed += c.acked_as == 0 ? 1 : 0;
    }
  }
  const auto& acks = raw.wait_acks(answered.size(), 20000, unnamed);
  if (raw.unnamed_acks() != unnamed) {
    return fail(6, std::to_string(raw.unnamed_acks()) + " Acks named sequence 0, " +
                       std::to_string(unnamed) + " expected");
  }
  return check_answers(cases, acks);
}

int send_burst(std::uint16_t port, std::uint64_t count, std::uint64_t refused,
               std::uint64_t messages) {
  holoscan::test::RawPeer raw(port);
  if (!raw.ok()) {
    return fail(6, "no raw connection");
  }
  const auto cases = holoscan::test::burst_cases(count, refused);
  for (const auto& c : cases) {
    if (!raw.send(static_cast<unsigned>(ucx::MessageId::kTensor), c.header, c.data, c.reply)) {
      return fail(6, "sending \"" + c.name + "\" failed");
    }
  }
  if (int status = check_answers(cases, raw.wait_acks(cases.size(), 20000)); status != 0) {
    return status;
  }
  if (raw.ack_messages() != messages) {
    return fail(7, std::to_string(count) + " tensors answered in " +
                       std::to_string(raw.ack_messages()) + " Ack messages, " +
                       std::to_string(messages) + " expected");
  }
  return 0;
}

int flood(std::uint16_t port, std::uint64_t count, std::uint64_t allowed, ErrorCode code,
          std::uint64_t extra, bool paced) {
  holoscan::test::RawPeer raw(port);
  if (!raw.ok()) {
    return fail(6, "no raw connection");
  }
  auto cases = holoscan::test::burst_cases(count + extra, 0);
  for (std::uint64_t i = allowed; i < count; ++i) {
    cases[i].code = code;
  }
  const auto tensor = static_cast<unsigned>(ucx::MessageId::kTensor);
  for (std::uint64_t i = 0; i < count + extra; ++i) {
    if (!raw.send(tensor, cases[i].header, cases[i].data)) {
      return fail(6, "sending tensor " + std::to_string(i + 1) + " failed");
    }
    const std::uint64_t answered = paced && i >= allowed && i < count ? i + 1 : 0;
    if (answered != 0 && raw.wait_acks(answered, 20000).size() != answered) {
      return fail(6, "tensor " + std::to_string(i + 1) + " was not answered");
    }
    if (i + 1 == count && raw.wait_acks(count, 20000).size() != count) {
      return fail(6, "not every tensor of the flood was answered");
    }
  }
  return check_answers(cases, raw.wait_acks(count + extra, 20000));
}

int acknowledge_run(std::uint16_t port, std::uint64_t count) {
  holoscan::test::RawPeer raw(port);
  if (!raw.ok()) {
    return fail(6, "no raw connection");
  }
  const auto& sequences = raw.wait_tensors(count, 20000);
  for (std::uint64_t i = 0; i < count; ++i) {
    if (i >= sequences.size() || sequences[i] != i + 1) {
      return fail(6, "tensor " + std::to_string(i + 1) + " did not come in order");
    }
  }
  const std::string run = ucx::encode(ucx::Ack{1, ErrorCode::kSuccess, {}, count});
  const std::string again = ucx::encode(ucx::Ack{1, ErrorCode::kSuccess, {}, 1});
  const auto ack = static_cast<unsigned>(ucx::MessageId::kAck);
  const bool sent = raw.send(ack, {run.begin(), run.end()}, {}) &&
                    raw.send(ack, {again.begin(), again.end()}, {});
  return sent ? 0 : fail(6, "sending the Acks failed");
}

int carry_answers(std::uint16_t port) {
  holoscan::test::RawPeer raw(port);
  if (!raw.ok()) {
    return fail(6, "no raw connection");
  }
  const auto tensor = static_cast<unsigned>(ucx::MessageId::kTensor);
  const auto first = holoscan::test::burst_cases(1, 0).front();
  if (!raw.send(tensor, first.header, first.data) || raw.wait_tensors(1, 20000).size() != 1) {
    return fail(6, "tensor 1 did not come back");
  }
  if (raw.wait_acks(1, 200).count(1) == 0 || raw.carried_answers() != 1) {
    return fail(6, "the returning tensor did not confirm tensor 1");
  }
  if (raw.ack_messages() != 0) {
    return fail(7, "tensor 1 was confirmed by an Ack as well");
  }
  // Sequence 2, refused for its dtype, confirming the test's tensor 1.
  auto second = holoscan::test::refused_with_answer(2, ucx::AnsweredRun{1, 1});
  if (!raw.send(tensor, second.header, second.data)) {
    return fail(8, "sending tensor 2 failed");
  }
  const auto& acks = raw.wait_acks(2, 20000);
  const auto refusal = acks.find(2);
  if (refusal == acks.end() || refusal->second != static_cast<std::uint32_t>(second.code)) {
    return fail(8, "tensor 2 was not refused with its code");
  }
  return 0;
}

int reclaimed_answer(std::uint16_t port) {
  holoscan::test::RawPeer raw(port);
  if (!raw.ok()) {
    return fail(6, "no raw connection");
  }
  const auto first = holoscan::test::burst_cases(1, 0).front();
  if (!raw.send(static_cast<unsigned>(ucx::MessageId::kTensor), first.header, first.data)) {
    return fail(6, "sending tensor 1 failed");
  }
  if (raw.wait_acks(1, 20000).count(1) == 0) {
    return fail(6, "tensor 1 was never confirmed");
  }
  if (raw.wait_tensors(1, 20000).size() != 1) {
    return fail(6, "no tensor came back");
  }
  if (raw.carried_answers() != 0 || raw.ack_messages() != 1) {
    return fail(7, "tensor 1 was confirmed in a tensor's header");
  }
  return 0;
}

// A listener whose tensor reaches the connecting worker before the answer its connect() waits for.
int early_tensor(int port_fd, std::uint64_t hello_after_ms, std::uint64_t linger_ms) {
  holoscan::test::RawPeer raw;
  const std::string port = std::to_string(raw.listening_port()) + "\n";
  if (raw.listening_port() == 0 ||
      write(port_fd, port.data(), port.size()) != static_cast<ssize_t>(port.size())) {
    return fail(6, "not listening");
  }
  close(port_fd);
  if (!raw.accept(20000)) {
    return fail(6, "nobody connected");
  }
  const auto first = holoscan::test::burst_cases(1, 0).front();
  if (!raw.send(static_cast<unsigned>(ucx::MessageId::kTensor), first.header, first.data)) {
    return fail(6, "sending tensor 1 failed");
  }
  if (hello_after_ms != 0 && raw.wait_hellos(1, 20000) == 1) {
    raw.progress_for(static_cast<int>(hello_after_ms));
    const auto hello = ucx::encode(ucx::Hello{});
    if (!raw.send(static_cast<unsigned>(ucx::MessageId::kHello), {hello.begin(), hello.end()},
                  {})) {
      return fail(6, "answering the Hello failed");
    }
  }
  raw.progress_for(static_cast<int>(linger_ms));
  const auto& acks = raw.wait_acks(1, 0);
  const auto answer = acks.find(1);
  return answer != acks.end() && answer->second == 0 ? 0 : 9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    return fail(2, "usage: holoscan_dlpack_ucx_peer send|receive|raw port=P ...");
  }
  const std::string role = argv[1];
  const auto options = parse(argc, argv);
  const auto port = static_cast<std::uint16_t>(number(options, "port", 0));
  if (role == "raw") {
    return send_raw(port);
  }
  if (role == "acker") {
    return acknowledge_run(port, number(options, "count", 8));
  }
  if (role == "carrier") {
    return carry_answers(port);
  }
  if (role == "reclaimed") {
    return reclaimed_answer(port);
  }
  if (role == "early") {
    return early_tensor(static_cast<int>(number(options, "port_fd", 0)),
                        number(options, "hello_after", 0), number(options, "linger", 10000));
  }
  if (role == "flood") {
    return flood(port, number(options, "count", 8), number(options, "allowed", 4),
                 static_cast<ErrorCode>(number(options, "code", 8)), number(options, "extra", 1),
                 number(options, "paced", 0) != 0);
  }
  if (role == "burst") {
    return send_burst(port, number(options, "count", 8), number(options, "refused", 0),
                      number(options, "messages", 1));
  }
  ucx::WorkerConfig config;
  config.window = number(options, "window", 8);
  auto worker = ucx::Worker::create(config);
  if (!worker) {
    return fail(2, worker.error().message);
  }
  auto peer = worker->connect("127.0.0.1", port, 10000);
  if (!peer) {
    return fail(2, peer.error().message);
  }
  const std::uint64_t count = number(options, "count", 0);
  if (role == "send") {
    return send_series(*worker, *peer, count);
  }
  if (role == "receive") {
    const auto go_fd = options.count("go_fd") != 0 ? static_cast<int>(number(options, "go_fd", 0))
                                                   : -1;
    return receive_series(*worker, count, go_fd, number(options, "hold_after", 0));
  }
  return fail(2, "unknown role " + role);
}
