// Tensors over UCX between two processes on one host, measured the way ucx_perftest measures the
// transport itself, so that scripts/ucx-bench.sh can put the two side by side in one run:
//
//   holoscan_dlpack_ucx_bench pingpong size=BYTES iters=N [warmup=N] [mem=host|cuda] [ready=1]
//       a tensor there and back (the peer sends the received tensor itself back, from its own
//       receive pool); one-way latency = round trip / 2, as ucx_perftest's ucp_am_lat reports.
//   holoscan_dlpack_ucx_bench stream size=BYTES count=N [warmup=N] [window=W] [mem=host|cuda]
//       a stream of tensors, `window` in flight, each reused from a pool once UCX is done with
//       it and counted when the peer confirmed it; bandwidth as ucx_perftest's ucp_am_bw.
// seconds=S ends the measured part of either after S seconds (the JSON says how many ran), so that
// a slow transport cannot stretch a run of the benchmark script past its time.
//
// Each run starts its peer (this binary, role echo or sink) connected over 127.0.0.1 with the
// same environment (UCX_TLS among it), busy-polls on both sides, and prints one JSON object.
// spin_us=N polls for N µs before a wait sleeps on the worker's fd (default: always polls), so
// that the sleeping path can be measured too.
// ready=1 gives each tensor a readiness contract on an idle stream first (the gate's cost).
// multi=0 turns the workers' stream_bandwidth_hint off (both sides): every send and landing is
// posted for latency, as before the hint.
// device=N puts this process's pools and streams on device N, peer_device=N the peer's (two GPUs).
// verify=1 (stream, mem=cuda; built with the test kernels) writes every tensor with a kernel on a
// producer stream, sends it with that readiness, and has the sink check every element on its own
// stream before its block may be reused: the stream of tensors the two-GPU comparison measures.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "holoscan/tensor_pool.hpp"
#include "holoscan/ucx.hpp"
#include "ipc/spawn.hpp"
#if HOLOSCAN_BENCH_VERIFY
#include "gpu/kernels.hpp"
#endif

namespace {

namespace ucx = holoscan::ucx;
using Clock = std::chrono::steady_clock;
constexpr DLDataType kBytes{kDLUInt, 8, 1};

struct Options {
  std::string role;
  std::map<std::string, std::string> values;
  std::uint64_t number(const char* key, std::uint64_t fallback) const {
    auto found = values.find(key);
    return found == values.end() ? fallback : std::strtoull(found->second.c_str(), nullptr, 10);
  }
  std::string text(const char* key, const char* fallback) const {
    auto found = values.find(key);
    return found == values.end() ? fallback : found->second;
  }
  bool device() const { return text("mem", "host") == "cuda"; }
  int ordinal() const { return static_cast<int>(number("device", 0)); }
  bool verify() const { return number("verify", 0) != 0; }
  // Whether the measured part that started at `start` has run out of time.
  bool out_of_time(Clock::time_point start) const {
    const std::uint64_t seconds = number("seconds", 0);
    return seconds != 0 && Clock::now() - start > std::chrono::seconds(seconds);
  }
};

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "ucx bench: %s\n", why.c_str());
  std::exit(1);
}

std::shared_ptr<holoscan::TensorPool> make_pool(const Options& o, std::size_t blocks) {
  auto pool = holoscan::TensorPool::create(
      {o.device() ? holoscan::PoolMemory::kDevice : holoscan::PoolMemory::kHost, o.ordinal(),
       static_cast<std::size_t>(o.number("size", 4096)), blocks});
  if (!pool) {
    die(pool.error().message);
  }
  return *pool;
}

ucx::Worker make_worker(const Options& o, std::shared_ptr<holoscan::TensorPool> receive_pool,
                        std::size_t window) {
  ucx::WorkerConfig config;
  config.window = window;
  config.receive_pool = std::move(receive_pool);
  config.spin_us = o.number("spin_us", 1000000);  // busy-poll by default, as ucx_perftest does
  config.stream_bandwidth_hint = o.number("multi", 1) != 0;
  auto worker = ucx::Worker::create(config);
  if (!worker) {
    die(worker.error().message);
  }
  return std::move(*worker);
}

// Drops the results (a benchmark that kept none would let them pile up) and counts them.
std::uint64_t drain(ucx::Worker& worker) {
  std::uint64_t ended = 0;
  while (auto result = worker.next_send_result()) {
    if (!result->outcome) {
      die(holoscan::to_string(result->outcome.error()));
    }
    ++ended;
  }
  return ended;
}

holoscan::Tensor next_tensor(ucx::Worker& worker, holoscan::TensorPool& pool, std::uint64_t size,
                             std::uint64_t& ended) {
  for (;;) {
    auto tensor = pool.allocate({static_cast<std::int64_t>(size)}, kBytes);
    if (tensor) {
      return std::move(*tensor);
    }
    (void)worker.progress();
    ended += drain(worker);
  }
}

void send(ucx::Worker& worker, ucx::PeerId peer, const holoscan::Tensor& tensor,
          std::uint64_t& ended) {
  for (;;) {
    auto sent = worker.send(peer, tensor);
    if (sent) {
      return;
    }
    if (sent.error().code != holoscan::ErrorCode::kBackpressured) {
      die(holoscan::to_string(sent.error()));
    }
    (void)worker.progress();
    ended += drain(worker);
  }
}

ucx::Received receive(ucx::Worker& worker) {
  for (;;) {
    auto received = worker.receive(0);
    if (!received) {
      die(holoscan::to_string(received.error()));
    }
    if (*received) {
      return std::move(**received);
    }
  }
}

// What a sink with verify=1 does to each tensor: checks it on its own stream against the pattern
// of its sequence number, and keeps its block from reuse until the check is done. The verdict
// comes at the end, through the exit status.
class Verifier {
 public:
  explicit Verifier(const Options& o) {
#if HOLOSCAN_BENCH_VERIFY
    if (o.verify()) {
      if (cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) != cudaSuccess ||
          cudaMallocManaged(reinterpret_cast<void**>(&result_), sizeof(*result_)) != cudaSuccess) {
        die("verify=1: no stream or result memory");
      }
      *result_ = {};
    }
#else
    if (o.verify()) {
      die("verify=1 needs the test kernels (configure with the GPU tests)");
    }
#endif
  }

  void check(ucx::Received& received) {
#if HOLOSCAN_BENCH_VERIFY
    if (stream_ == nullptr) {
      return;
    }
    holoscan::Tensor& tensor = received.tensor;
    const auto seed = static_cast<std::uint32_t>(received.sequence);
    if (holoscan::test::launch_check(static_cast<const std::uint32_t*>(tensor.data()),
                                     static_cast<std::uint64_t>(tensor.nbytes()) / 4, seed, 0,
                                     result_, stream_) != 0 ||
        !tensor.set_deallocation_stream(stream_)) {
      die("verify=1: the check could not be queued");
    }
#else
    (void)received;
#endif
  }

  // 0 when every element of every tensor held its pattern.
  int verdict() const {
#if HOLOSCAN_BENCH_VERIFY
    if (stream_ != nullptr) {
      (void)cudaStreamSynchronize(stream_);
      if (result_->mismatches != 0) {
        std::fprintf(stderr, "ucx bench: %u mismatched elements\n", result_->mismatches);
        return 3;
      }
    }
#endif
    return 0;
  }

 private:
#if HOLOSCAN_BENCH_VERIFY
  cudaStream_t stream_ = nullptr;
  holoscan::test::CheckResult* result_ = nullptr;
#endif
};

// The other process: sends back (echo) or drops (sink) what comes, until the connection ends.
int serve(const Options& o) {
  const std::size_t window = o.number("window", 16);
  auto worker = make_worker(o, make_pool(o, window + 2), window);
  auto peer = worker.connect("127.0.0.1", static_cast<std::uint16_t>(o.number("port", 0)));
  if (!peer) {
    die(peer.error().message);
  }
  Verifier verifier(o);
  std::uint64_t ended = 0;
  for (;;) {
    auto received = worker.receive(0);
    if (!received) {
      const int verdict = verifier.verdict();
      return received.error().code == holoscan::ErrorCode::kClosed ? verdict : 1;
    }
    if (*received && o.role == "echo") {
      send(worker, *peer, (**received).tensor, ended);
    } else if (*received) {
      verifier.check(**received);
    }
    ended += drain(worker);
  }
}

// Listens, starts the peer with `role`, and returns the connection.
ucx::PeerId start_peer(ucx::Worker& worker, const Options& o, const char* role, pid_t& pid) {
  auto port = worker.listen("127.0.0.1");
  if (!port) {
    die(port.error().message);
  }
  std::vector<std::string> arguments{role, "port=" + std::to_string(*port)};
  for (const auto& [key, value] : o.values) {
    if (key != "device" && key != "peer_device") {
      arguments.push_back(key + "=" + value);
    }
  }
  arguments.push_back("device=" + std::to_string(o.number("peer_device", o.number("device", 0))));
  pid = ipc_demo::spawn("/proc/self/exe", arguments, {});
  auto peer = worker.accept(30000);
  if (!peer) {
    die("the peer did not connect");
  }
  return *peer;
}

// The stream whose work the tensors are said to be ready after: an idle one for ready=1, the
// producer's for verify=1.
cudaStream_t readiness_stream(const Options& o) {
  cudaStream_t stream = nullptr;
  if ((o.number("ready", 0) != 0 || o.verify()) &&
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != 0) {
    die("no CUDA stream for ready=1 or verify=1");
  }
  return stream;
}

// verify=1: writes the pattern of `seed` into `tensor` on `stream` (its readiness comes next).
void fill(holoscan::Tensor& tensor, std::uint64_t seed, cudaStream_t stream) {
#if HOLOSCAN_BENCH_VERIFY
  if (holoscan::test::launch_slow_fill(static_cast<std::uint32_t*>(tensor.data()),
                                       static_cast<std::uint64_t>(tensor.nbytes()) / 4,
                                       static_cast<std::uint32_t>(seed), 0, stream) != 0) {
    die("verify=1: the fill could not be queued");
  }
#else
  (void)tensor, (void)seed, (void)stream;
  die("verify=1 needs the test kernels (configure with the GPU tests)");
#endif
}

// The peer's exit status (a sink with verify=1 reports mismatched data through it).
int finish(ucx::Worker& worker, ucx::PeerId peer, pid_t pid) {
  (void)worker.disconnect(peer);  // the peer sees kClosed and exits
  return ipc_demo::wait_exit(pid, 10000, [&worker] { (void)worker.progress(); });
}

int pingpong(const Options& o) {
  const std::uint64_t size = o.number("size", 4096);
  const std::uint64_t iters = o.number("iters", 10000);
  const std::uint64_t warmup = o.number("warmup", 1000);
  auto worker = make_worker(o, make_pool(o, 8), 16);
  pid_t pid = -1;
  const ucx::PeerId peer = start_peer(worker, o, "echo", pid);
  auto pool = make_pool(o, 1);
  std::uint64_t ended = 0;
  auto tensor = next_tensor(worker, *pool, size, ended);
  const cudaStream_t ready = readiness_stream(o);
  std::vector<double> samples;
  samples.reserve(iters);
  Clock::time_point measured;
  for (std::uint64_t i = 0; i < warmup + iters; ++i) {
    const auto start = Clock::now();
    if (i == warmup) {
      measured = start;
    } else if (i > warmup && o.out_of_time(measured)) {
      break;
    }
    if (ready != nullptr) {
      tensor.set_readiness_stream(ready);
    }
    send(worker, peer, tensor, ended);
    (void)receive(worker);
    if (i >= warmup) {
      samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    ended += drain(worker);
  }
  double total = 0;
  for (double s : samples) {
    total += s;
  }
  std::sort(samples.begin(), samples.end());
  const auto done = static_cast<double>(samples.size());
  std::printf(
      "{\"test\": \"pingpong\", \"size\": %llu, \"mem\": \"%s\", \"ready\": %d, \"iters\": %zu, "
      "\"latency_us\": %.3f, \"latency_p50_us\": %.3f, \"roundtrips_per_s\": %.1f}\n",
      static_cast<unsigned long long>(size), o.device() ? "cuda" : "host", ready != nullptr ? 1 : 0,
      samples.size(), total / done / 2, samples[samples.size() / 2] / 2, done / total * 1e6);
  tensor = {};
  return finish(worker, peer, pid);
}

int stream(const Options& o) {
  const std::uint64_t size = o.number("size", std::uint64_t{1} << 20);
  const std::uint64_t count = o.number("count", 1000);
  const std::uint64_t warmup = o.number("warmup", 100);
  const std::size_t window = o.number("window", 16);
  auto worker = make_worker(o, nullptr, window);
  pid_t pid = -1;
  const ucx::PeerId peer = start_peer(worker, o, "sink", pid);
  auto pool = make_pool(o, window + 1);
  const cudaStream_t ready = readiness_stream(o);
  std::uint64_t ended = 0;
  std::uint64_t sent = 0;
  Clock::time_point start;
  for (std::uint64_t i = 0; i < warmup + count; ++i, ++sent) {
    if (i == warmup) {
      while (ended < warmup) {  // the measured part starts with nothing in flight
        (void)worker.progress();
        ended += drain(worker);
      }
      start = Clock::now();
    } else if (i > warmup && o.out_of_time(start)) {
      break;
    }
    auto tensor = next_tensor(worker, *pool, size, ended);
    if (o.verify()) {
      fill(tensor, i + 1, ready);  // per-peer sequence numbers count from 1: the sink's seed
    }
    if (ready != nullptr) {
      tensor.set_readiness_stream(ready);
    }
    send(worker, peer, tensor, ended);
  }
  while (ended < sent) {
    (void)worker.progress();
    ended += drain(worker);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const std::uint64_t measured = sent - warmup;
  std::printf(
      "{\"test\": \"stream\", \"size\": %llu, \"mem\": \"%s\", \"ready\": %d, \"verify\": %d, "
      "\"count\": %llu, \"window\": %zu, \"bandwidth_MiBps\": %.1f, \"tensors_per_s\": %.1f}\n",
      static_cast<unsigned long long>(size), o.device() ? "cuda" : "host", ready != nullptr ? 1 : 0,
      o.verify() ? 1 : 0,
      static_cast<unsigned long long>(measured), window,
      static_cast<double>(size) * static_cast<double>(measured) / seconds / (1 << 20),
      static_cast<double>(measured) / seconds);
  return finish(worker, peer, pid);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.role = argc > 1 ? argv[1] : "";
  for (int i = 2; i < argc; ++i) {
    const std::string word = argv[i];
    const auto equals = word.find('=');
    o.values[word.substr(0, equals)] = equals == std::string::npos ? "" : word.substr(equals + 1);
  }
  if (cudaSetDevice(o.ordinal()) != cudaSuccess && (o.device() || o.verify())) {
    die("no CUDA device " + std::to_string(o.ordinal()));
  }
  if (o.role == "pingpong") {
    return pingpong(o);
  }
  if (o.role == "stream") {
    return stream(o);
  }
  if (o.role == "echo" || o.role == "sink") {
    return serve(o);
  }
  die("usage: holoscan_dlpack_ucx_bench pingpong|stream size=BYTES ... (see the source)");
}
