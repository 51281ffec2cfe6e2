#include "ipc/pipeline_floor.hpp"

#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <vector>

#include "ipc/finish_stamps.hpp"
#include "ipc/floor_parts.hpp"
#include "ipc/ipc_kernels.hpp"
#include "ipc/spawn.hpp"

namespace ipc_demo {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kChildTimeoutMs = 10 * 60 * 1000;

// What one process of the floor holds for its work: the frames' sizes, its options, a stream.
struct Side {
  const RunShape& shape;
  const FloorOptions& options;
  Frames frames;
  cudaStream_t stream = nullptr;
  int lent_fd = -1;  // attached to each Publish, as the library attaches its memory's descriptor

  Side(const RunShape& s, const FloorOptions& o) : shape(s), options(o) {}
  ~Side() {
    if (lent_fd >= 0) {
      (void)::close(lent_fd);
    }
  }
  Side(const Side&) = delete;
  Side& operator=(const Side&) = delete;

  bool set_up() {
    lent_fd = options.send_fd ? ::memfd_create("holoscan-ipc-floor", MFD_CLOEXEC) : -1;
    return library_frames(shape, frames) &&
           check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                      "cudaStreamCreateWithFlags");
  }
};

// The sending end of a hop: block i % blocks is written again only after the Release of tensor
// i - blocks arrived and the stream waits on that block's release event.
struct Outbox {
  int socket = -1;
  EventSet events;  // own: readiness per block; peer: the receiver's release per block
  long sent = 0;
  long released = 0;

  bool open(const Side& side) { return exchange_events(socket, side.shape.blocks, events); }

  // Takes back the oldest block once its Release came; ready to write block `slot()`.
  bool acquire(const Side& side) {
    if (sent - released < static_cast<long>(side.shape.blocks)) {
      return true;
    }
    return take_release(side);
  }
  std::size_t slot(const Side& side) const {
    return static_cast<std::size_t>(sent) % side.shape.blocks;
  }

  // Records the block's readiness on the stream and sends its Publish.
  bool publish(const Side& side) {
    const bool ok =
        check_cuda(cudaEventRecord(events.own[slot(side)], side.stream), "cudaEventRecord") &&
        send_record(socket, side.frames.publish.bytes.data(), side.frames.publish.size,
                    side.lent_fd);
    sent += ok ? 1 : 0;
    return ok;
  }

  // Takes every Release still out, so that no record is left unread when the run ends.
  bool drain(const Side& side) {
    bool ok = true;
    while (ok && released < sent) {
      ok = take_release(side);
    }
    return ok;
  }

 private:
  bool take_release(const Side& side) {
    std::uint8_t record[holoscan::ipc::detail::kMaxFrameBytes];
    const std::size_t block = static_cast<std::size_t>(released) % side.shape.blocks;
    const bool ok = receive_record(socket, record, sizeof(record), side.options.spin) ==
                        static_cast<long>(side.frames.release.size) &&
                    wait_for_event(side.stream, events.peer[block], side.options.host_wait);
    released += ok ? 1 : 0;
    return ok;
  }
};

// The receiving end of a hop: each Publish is waited on through its block's readiness event, and
// released with a record of that block's release event.
struct Inbox {
  int socket = -1;
  EventSet events;  // own: release per block; peer: the sender's readiness per block
  long taken = 0;

  bool open(const Side& side) { return exchange_events(socket, side.shape.blocks, events); }

  // Receives the next Publish and orders the stream after its readiness.
  bool take(const Side& side) {
    std::uint8_t record[holoscan::ipc::detail::kMaxFrameBytes];
    return receive_record(socket, record, sizeof(record), side.options.spin) ==
               static_cast<long>(side.frames.publish.size) &&
           wait_for_event(side.stream, events.peer[slot(side)], side.options.host_wait);
  }
  std::size_t slot(const Side& side) const {
    return static_cast<std::size_t>(taken) % side.shape.blocks;
  }

  // Records the block's release on the stream and sends its Release.
  bool release(const Side& side) {
    const bool ok =
        check_cuda(cudaEventRecord(events.own[slot(side)], side.stream), "cudaEventRecord") &&
        send_record(socket, side.frames.release.bytes.data(), side.frames.release.size, -1);
    taken += ok ? 1 : 0;
    return ok;
  }
};

std::vector<std::string> floor_words(const RunShape& shape, const FloorOptions& options) {
  return {"count=" + std::to_string(shape.count),
          "elements=" + std::to_string(shape.elements),
          "blocks=" + std::to_string(shape.blocks),
          std::string("spin=") + (options.spin ? "1" : "0"),
          std::string("fd=") + (options.send_fd ? "1" : "0"),
          std::string("kernels=") + (options.kernels ? "1" : "0"),
          std::string("host_wait=") + (options.host_wait ? "1" : "0")};
}

std::uint64_t elements(const RunShape& shape) { return static_cast<std::uint64_t>(shape.elements); }

}  // namespace

int run_pipeline_floor(const std::string& self, const RunShape& shape,
                       const FloorOptions& options) {
  int to_relay[2] = {-1, -1};
  int to_sink[2] = {-1, -1};
  FinishStamps finish;
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, to_relay) != 0 ||
      ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, to_sink) != 0 || !finish.open()) {
    std::perror("ipc pipeline floor: socketpair");
    return 1;
  }
  std::vector<std::string> relay_words = floor_words(shape, options);
  relay_words.insert(relay_words.end(), {"role=floor_relay", "in_fd=" + std::to_string(to_relay[1]),
                                         "out_fd=" + std::to_string(to_sink[0])});
  std::vector<std::string> sink_words = floor_words(shape, options);
  sink_words.insert(sink_words.end(), {"role=floor_sink", "in_fd=" + std::to_string(to_sink[1]),
                                       "done_fd=" + std::to_string(finish.write_fd())});
  const pid_t relay = spawn(self, relay_words, {to_relay[1], to_sink[0]});
  const pid_t sink = spawn(self, sink_words, {to_sink[1], finish.write_fd()});
  for (int end : {to_relay[1], to_sink[0], to_sink[1]}) {
    (void)::close(end);
  }
  Side side(shape, options);
  Outbox out;
  out.socket = to_relay[0];
  std::uint32_t* buffer = options.kernels ? device_buffer(shape, shape.blocks) : nullptr;
  bool ok = relay > 0 && sink > 0 && (!options.kernels || buffer != nullptr) && side.set_up() &&
            out.open(side);
  const long warm_up = std::min(kWarmUpTensors, shape.count);
  Clock::time_point start = Clock::now();
  for (long i = 0; ok && i < shape.count; ++i) {
    if (i == warm_up) {
      start = Clock::now();
    }
    ok = out.acquire(side) &&
         (buffer == nullptr ||
          launch_fill(buffer + out.slot(side) * elements(shape), elements(shape),
                      static_cast<std::uint32_t>(i), 0, side.stream) == 0) &&
         out.publish(side);
  }
  ok = out.drain(side) && ok;
  (void)::close(to_relay[0]);
  ok = wait_exit(relay, kChildTimeoutMs) == 0 && ok;
  ok = wait_exit(sink, kChildTimeoutMs) == 0 && ok;
  const std::optional<Clock::time_point> finished = finish.latest(1);
  ok = finished.has_value() && ok;
  const long timed = shape.count - warm_up;
  const double seconds =
      std::chrono::duration<double>(finished.value_or(Clock::now()) - start).count();
  std::printf(
      "RESULT mode=pipeline_floor count=%ld elements=%lld tensors_per_s=%.0f spin=%d fd=%d "
      "kernels=%d host_wait=%d ok=%d\n",
      timed, static_cast<long long>(shape.elements), seconds > 0 ? timed / seconds : 0.0,
      options.spin ? 1 : 0, options.send_fd ? 1 : 0, options.kernels ? 1 : 0,
      options.host_wait ? 1 : 0, ok ? 1 : 0);
  return ok ? 0 : 1;
}

int pipeline_floor_relay(int in_fd, int out_fd, const RunShape& shape,
                         const FloorOptions& options) {
  Side side(shape, options);
  Inbox in;
  Outbox out;
  in.socket = in_fd;
  out.socket = out_fd;
  // The relay reads no mapping of the producer's memory (the floor maps nothing): it adds one
  // from a block of its own into the block it publishes, the same kernel on the same sizes.
  std::uint32_t* source = options.kernels ? device_buffer(shape, 1) : nullptr;
  std::uint32_t* buffer = options.kernels ? device_buffer(shape, shape.blocks) : nullptr;
  bool ok = (!options.kernels || (source != nullptr && buffer != nullptr)) && side.set_up() &&
            in.open(side) && out.open(side);
  for (long i = 0; ok && i < shape.count; ++i) {
    ok = in.take(side) && out.acquire(side) &&
         (buffer == nullptr || launch_add_one(source, buffer + out.slot(side) * elements(shape),
                                              elements(shape), side.stream) == 0) &&
         in.release(side) && out.publish(side);
  }
  ok = out.drain(side) && ok;
  return check_cuda(cudaStreamSynchronize(side.stream), "cudaStreamSynchronize") && ok ? 0 : 1;
}

int pipeline_floor_sink(int in_fd, int done_fd, const RunShape& shape,
                        const FloorOptions& options) {
  Side side(shape, options);
  Inbox in;
  in.socket = in_fd;
  // The floor's values are not the pattern (nothing maps the relay's memory): the check kernel
  // stands in for the sink's work, and its count of mismatches is not read.
  std::uint32_t* buffer = options.kernels ? device_buffer(shape, 1) : nullptr;
  unsigned long long* mismatches = nullptr;
  bool ok = (!options.kernels ||
             (buffer != nullptr &&
              check_cuda(cudaMalloc(reinterpret_cast<void**>(&mismatches), sizeof(*mismatches)),
                         "cudaMalloc"))) &&
            side.set_up() && in.open(side);
  for (long i = 0; ok && i < shape.count; ++i) {
    ok = in.take(side) &&
         (buffer == nullptr || launch_check(buffer, elements(shape), static_cast<std::uint32_t>(i),
                                            1, mismatches, side.stream) == 0) &&
         in.release(side);
  }
  ok = check_cuda(cudaStreamSynchronize(side.stream), "cudaStreamSynchronize") && ok;
  if (ok) {
    FinishStamps::write(done_fd);
  }
  return ok ? 0 : 1;
}

}  // namespace ipc_demo
