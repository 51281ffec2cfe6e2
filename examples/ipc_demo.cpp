// Cross-process tensors end to end: a producer process publishes tensors from a shareable pool to
// consumer processes (this same binary, started again with a role), each of which checks every
// value on the GPU. Readiness and reuse are ordered with interprocess events: the consumers ask
// for each tensor's readiness before they take it, and the producer reuses a block once its
// consumers' release events completed; no process blocks its host thread on the GPU while tensors
// flow (the count is printed).
//
//   holoscan_dlpack_ipc_demo [demo|roundtrip|pipeline|floor|pipeline_floor] [count=N]
//                            [elements=N] [blocks=N] [spin=1] [readiness=gpu] [ctest=1]
//
// demo       one producer, two consumers, every tensor to both (default: 10^4 tensors)
// roundtrip  one consumer; each tensor waits for its Release before the next (RESULT line:
//            microseconds per export + import + release; trace=PREFIX adds the median of each
//            stage on both sides, TRACE lines)
// pipeline   producer -> relay (adds one into its own pool) -> sink (RESULT line: tensors/s;
//            trace=PREFIX adds the median of each stage of the three processes)
//            (spin=1, roundtrip and pipeline: importers ask receive(0) until a tensor comes
//            instead of sleeping in receive(), as the spinning floor polls its socket;
//            readiness=gpu: importers made with ReadinessWait::kOnGpu, whose consumers' streams
//            wait on the exporter's event, instead of the default kOnHost)
// floor      the round trip's floor by hand: a socket ping-pong of the library's frames plus one
//            event record and one wait per side (spin=1: poll without sleeping; fd=0: no
//            descriptor with each Publish; kernels=0: no kernel on either side)
// pipeline_floor  the pipeline's floor by hand: three processes, per tensor and hop a socket
//            record each way, one event record and one wait per side, the same kernels, `blocks`
//            in flight per hop (spin, fd and kernels as for floor; host_wait=1: each event is
//            waited for by asking it from the host until it completed, not by a stream)
//
// Without a CUDA device it says so and exits 0 (77 with ctest=1, which CTest reads as a skip).
#include <cuda_runtime_api.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <holoscan/ipc.hpp>

#include "ipc/busy_time.hpp"
#include "ipc/finish_stamps.hpp"
#include "ipc/floor.hpp"
#include "ipc/host_blocks.hpp"
#include "ipc/pipeline_floor.hpp"
#include "ipc/roles.hpp"
#include "ipc/spawn.hpp"

namespace {

namespace ipc = holoscan::ipc;
using Clock = std::chrono::steady_clock;

constexpr int kChildTimeoutMs = 10 * 60 * 1000;
constexpr long kWarmUp = ipc_demo::kWarmUpTensors;

struct Words {
  std::string mode = "demo";
  std::map<std::string, std::string> values;
  long get(const std::string& key, long fallback) const {
    const auto found = values.find(key);
    return found == values.end() ? fallback : std::strtol(found->second.c_str(), nullptr, 10);
  }
};

Words parse(int argc, char** argv) {
  Words words;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    const auto equals = word.find('=');
    if (equals == std::string::npos) {
      words.mode = word;
    } else {
      words.values[word.substr(0, equals)] = word.substr(equals + 1);
    }
  }
  return words;
}

ipc_demo::FloorOptions floor_options(const Words& words) {
  ipc_demo::FloorOptions options;
  options.spin = words.get("spin", 0) != 0;
  options.send_fd = words.get("fd", 1) != 0;
  options.kernels = words.get("kernels", 1) != 0;
  options.host_wait = words.get("host_wait", 0) != 0;
  return options;
}

std::string self_path() {
  char path[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<std::size_t>(n)) : std::string();
}

std::vector<std::string> shape_words(const ipc_demo::RunShape& shape) {
  std::vector<std::string> words{"count=" + std::to_string(shape.count),
                                 "elements=" + std::to_string(shape.elements),
                                 "blocks=" + std::to_string(shape.blocks)};
  if (!shape.trace.empty()) {
    words.push_back("trace=" + shape.trace);
  }
  if (shape.spin) {
    words.push_back("spin=1");
  }
  if (shape.readiness == holoscan::ipc::ReadinessWait::kOnGpu) {
    words.push_back("readiness=gpu");
  }
  return words;
}

// A child running `role` with `in` (and `out`, for a relay) as its channel ends; a consumer
// writes the moment it finished to `done` (if given).
pid_t start(const std::string& role, const ipc_demo::RunShape& shape, int in, int out = -1,
            const std::string& extra = "", int done = -1) {
  std::vector<std::string> words = shape_words(shape);
  words.push_back("role=" + role);
  words.push_back("in_fd=" + std::to_string(in));
  std::vector<int> inherited{in};
  if (out >= 0) {
    words.push_back("out_fd=" + std::to_string(out));
    inherited.push_back(out);
  }
  if (done >= 0) {
    words.push_back("done_fd=" + std::to_string(done));
    inherited.push_back(done);
  }
  if (!extra.empty()) {
    words.push_back(extra);
  }
  return ipc_demo::spawn(self_path(), words, inherited);
}

// The producer's side of one run: the children, the exporter, the produce loop and the report.
class Run {
 public:
  explicit Run(const ipc_demo::RunShape& shape)
      : shape_(shape),
        trace_(shape.trace.empty() ? std::string() : shape.trace + ".producer", shape.count) {}

  // Starts a consumer (or relay) whose other end this process exports to.
  bool connect(const std::string& role, const std::string& extra = "", int out = -1) {
    auto ends = ipc::Channel::pair();
    if (!ends) {
      return false;
    }
    const pid_t pid = start(role, shape_, ends->second.fd(), out, extra,
                            role == "consumer" ? done_fd() : -1);
    if (pid < 0) {
      return false;
    }
    children_.push_back(pid);
    consumers_ += role == "consumer" ? 1 : 0;
    auto peer = exporter_->add_peer(std::move(ends->first), 60000);
    if (!peer) {
      std::fprintf(stderr, "ipc demo: %s did not connect: %s\n", role.c_str(),
                   peer.error().message.c_str());
      return false;
    }
    peers_.push_back(*peer);
    return true;
  }

  // Starts a child that no channel of this process reaches (the sink of a pipeline), which
  // writes to done_fd() when it finished.
  bool add_consumer(pid_t pid) {
    children_.push_back(pid);
    ++consumers_;
    return pid > 0;
  }

  // Where the consumers write when they finished (see ipc_demo::FinishStamps).
  int done_fd() const { return finish_.write_fd(); }

  bool set_up() {
    auto exporter = ipc::Exporter::create();
    auto pool = ipc_demo::make_pool(shape_);
    if (!exporter || !pool ||
        cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) != cudaSuccess) {
      std::fprintf(stderr, "ipc demo: setup failed: %s\n",
                   !exporter ? exporter.error().message.c_str()
                   : !pool   ? pool.error().message.c_str()
                             : "cudaStreamCreateWithFlags");
      return false;
    }
    exporter_.emplace(std::move(*exporter));
    pool_ = std::move(*pool);
    return finish_.open();
  }

  // Produces every tensor. The clock runs from the end of the warm-up to the last Release seen
  // (one at a time) or to the last consumer's last check, as torch.multiprocessing's side is timed
  // (ipc_bench.py): not to the children's exit, whose CUDA teardown is no part of the stream.
  bool run(bool one_at_a_time) {
    const long warm_up = std::min(kWarmUp, shape_.count);
    if (!ipc_demo::produce(*exporter_, peers_, *pool_, stream_, shape_, 0, warm_up, one_at_a_time,
                           &trace_)) {
      return false;
    }
    const std::uint64_t blocks_before = ipc_demo::host_blocks();
    const auto start_time = Clock::now();
    ipc_demo::BusyMeter busy;
    busy.start();
    bool produced = ipc_demo::produce(*exporter_, peers_, *pool_, stream_, shape_, warm_up,
                                      shape_.count, one_at_a_time, &trace_);
    const auto produced_time = Clock::now();
    busy.report(stdout, "producer", shape_.count - warm_up);
    produced = produced && ipc_demo::drain(*exporter_);
    host_blocks_ = ipc_demo::host_blocks() - blocks_before;
    bool children_ok = true;
    for (pid_t pid : children_) {
      children_ok &=
          ipc_demo::wait_exit(pid, kChildTimeoutMs, [&] { (void)exporter_->poll(); }) == 0;
    }
    const auto exit_time = Clock::now();
    const std::optional<Clock::time_point> finished = finish_.latest(consumers_);
    const auto end_time = one_at_a_time ? produced_time : finished.value_or(exit_time);
    seconds_ = std::chrono::duration<double>(end_time - start_time).count();
    exit_seconds_ = std::chrono::duration<double>(exit_time - start_time).count();
    timed_ = shape_.count - warm_up;
    if (!shape_.trace.empty() && trace_.write()) {
      if (one_at_a_time) {
        ipc_demo::print_round_trip_stages(stdout, shape_.trace, warm_up);
      } else {
        ipc_demo::print_pipeline_stages(stdout, shape_.trace, warm_up);
      }
    }
    return produced && children_ok;
  }

  double seconds() const { return seconds_; }
  // From the end of the warm-up to the children's exit.
  double exit_seconds() const { return exit_seconds_; }
  long timed() const { return timed_; }
  std::uint64_t host_blocks() const { return host_blocks_; }

 private:
  ipc_demo::RunShape shape_;
  ipc_demo::StageTrace trace_;
  std::optional<ipc::Exporter> exporter_;
  std::shared_ptr<holoscan::TensorPool> pool_;
  cudaStream_t stream_ = nullptr;
  std::vector<ipc::PeerId> peers_;
  std::vector<pid_t> children_;
  std::uint64_t host_blocks_ = 0;
  double seconds_ = 0;
  double exit_seconds_ = 0;
  long timed_ = 0;
  ipc_demo::FinishStamps finish_;
  int consumers_ = 0;  // children that write to finish_
};

int run_demo(const ipc_demo::RunShape& shape) {
  Run run(shape);
  if (!run.set_up() || !run.connect("consumer") || !run.connect("consumer")) {
    return 1;
  }
  const bool ok = run.run(/*one_at_a_time=*/false);
  std::printf(
      "ipc demo: %ld tensors of %lld bytes, each to 2 consumer processes: %.0f tensors/s "
      "(%.0f hand-offs/s) after a %ld-tensor warm-up; producer host blocks on the hot path: %llu\n",
      shape.count, static_cast<long long>(shape.elements * 4), run.timed() / run.seconds(),
      2 * run.timed() / run.seconds(), kWarmUp, static_cast<unsigned long long>(run.host_blocks()));
  std::printf("ipc demo: %s\n",
              ok && run.host_blocks() == 0 ? "every value verified, PASS" : "FAIL");
  return ok && run.host_blocks() == 0 ? 0 : 1;
}

int run_roundtrip(const ipc_demo::RunShape& shape) {
  Run run(shape);
  if (!run.set_up() || !run.connect("consumer")) {
    return 1;
  }
  const bool ok = run.run(/*one_at_a_time=*/true);
  std::printf(
      "RESULT mode=roundtrip count=%ld elements=%lld us_per_tensor=%.2f host_blocks=%llu "
      "spin=%d ok=%d\n",
      run.timed(), static_cast<long long>(shape.elements), 1e6 * run.seconds() / run.timed(),
      static_cast<unsigned long long>(run.host_blocks()), shape.spin ? 1 : 0, ok ? 1 : 0);
  return ok ? 0 : 1;
}

int run_pipeline(const ipc_demo::RunShape& shape) {
  Run run(shape);
  auto link = ipc::Channel::pair();  // relay -> sink
  if (!link || !run.set_up()) {
    return 1;
  }
  if (!run.add_consumer(start("consumer", shape, link->second.fd(), -1, "offset=1", run.done_fd())) ||
      !run.connect("relay", "", link->first.fd())) {
    return 1;
  }
  { auto closing = std::move(*link); }  // this process's copies; the children keep theirs
  const bool ok = run.run(/*one_at_a_time=*/false);
  std::printf(
      "RESULT mode=pipeline count=%ld elements=%lld tensors_per_s=%.0f host_blocks=%llu "
      "spin=%d ok=%d tensors_per_s_to_exit=%.0f\n",
      run.timed(), static_cast<long long>(shape.elements), run.timed() / run.seconds(),
      static_cast<unsigned long long>(run.host_blocks()), shape.spin ? 1 : 0, ok ? 1 : 0,
      run.timed() / run.exit_seconds());
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Words words = parse(argc, argv);
  ipc_demo::RunShape shape;
  shape.count = words.get("count", shape.count);
  shape.elements = words.get("elements", shape.elements);
  shape.blocks = static_cast<std::size_t>(words.get("blocks", static_cast<long>(shape.blocks)));
  shape.delay_us = static_cast<std::uint64_t>(words.get("delay_us", 0));
  shape.spin = words.get("spin", 0) != 0;
  if (const auto readiness = words.values.find("readiness"); readiness != words.values.end()) {
    if (readiness->second != "host" && readiness->second != "gpu") {
      std::fprintf(stderr, "ipc demo: readiness must be host or gpu, not %s\n",
                   readiness->second.c_str());
      return 2;
    }
    shape.readiness = readiness->second == "host" ? holoscan::ipc::ReadinessWait::kOnHost
                                                  : holoscan::ipc::ReadinessWait::kOnGpu;
  }
  if (const auto trace = words.values.find("trace"); trace != words.values.end()) {
    shape.trace = trace->second;
  }
  const auto role = words.values.find("role");
  if (role != words.values.end()) {
    const int in = static_cast<int>(words.get("in_fd", -1));
    if (role->second == "consumer") {
      return ipc_demo::consume(in, shape, static_cast<std::uint32_t>(words.get("offset", 0)),
                               static_cast<int>(words.get("done_fd", -1)));
    }
    if (role->second == "relay") {
      return ipc_demo::relay(in, static_cast<int>(words.get("out_fd", -1)), shape);
    }
    if (role->second == "floor") {
      return ipc_demo::floor_peer(in, shape, floor_options(words));
    }
    if (role->second == "floor_relay") {
      return ipc_demo::pipeline_floor_relay(in, static_cast<int>(words.get("out_fd", -1)), shape,
                                            floor_options(words));
    }
    if (role->second == "floor_sink") {
      return ipc_demo::pipeline_floor_sink(in, static_cast<int>(words.get("done_fd", -1)), shape,
                                           floor_options(words));
    }
    std::fprintf(stderr, "ipc demo: unknown role %s\n", role->second.c_str());
    return 2;
  }
  int devices = 0;
  if (const cudaError_t status = cudaGetDeviceCount(&devices);
      status != cudaSuccess || devices == 0) {
    std::printf("ipc demo: no CUDA device here (cudaGetDeviceCount: %s); nothing to run\n",
                status != cudaSuccess ? cudaGetErrorName(status) : "0 devices");
    return words.get("ctest", 0) != 0 ? 77 : 0;
  }
  ipc_demo::count_host_blocks();
  if (words.mode == "demo") {
    return run_demo(shape);
  }
  if (words.mode == "roundtrip") {
    return run_roundtrip(shape);
  }
  if (words.mode == "pipeline") {
    return run_pipeline(shape);
  }
  if (words.mode == "floor") {
    return ipc_demo::run_floor(self_path(), shape, floor_options(words));
  }
  if (words.mode == "pipeline_floor") {
    return ipc_demo::run_pipeline_floor(self_path(), shape, floor_options(words));
  }
  std::fprintf(stderr,
               "ipc demo: unknown mode %s (demo, roundtrip, pipeline, floor or pipeline_floor)\n",
               words.mode.c_str());
  return 2;
}
