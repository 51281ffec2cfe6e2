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

// Each side sends at most `blocks` records before it reads again, and both may block in sendmsg:
// past this the records of one hop could fill both sockets' buffers.
constexpr std::size_t kMaxBlocks = 64;

// What one process of the floor holds for its work: the frames' sizes, its options, a stream.
struct Side {
  const RunShape& shape;
  const FloorOptions& options;
  Frames frames;
  cudaStream_t stream = nullptr;
  int lent_fd = -1;  // attached to each Publish with fd=1 (the library sends one per allocation)

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
  std::uint64_t elements() const { return static_cast<std::uint64_t>(shape.elements); }
};

// The sending end of a hop: `blocks` tensors of device memory that the receiver maps once; block
// i % blocks is written again only after the Release of tensor i - blocks arrived and that block's
// release event was waited for.
struct Outbox {
  int socket = -1;
  EventSet events;  // own: readiness per block; peer: the receiver's release per block
  std::uint32_t* memory = nullptr;
  long sent = 0;
  long released = 0;

  // The events both ways, then (with kernels) the memory's handle, as the library sends an
  // allocation's once.
  bool open(const Side& side) {
    if (side.options.kernels) {
      memory = device_buffer(side.shape, side.shape.blocks);
      if (memory == nullptr) {
        return false;
      }
    }
    return exchange_events(socket, side.shape.blocks, events) &&
           (!side.options.kernels || send_memory(socket, memory));
  }

  // Takes back the oldest block once its Release came; ready to write block().
  bool acquire(const Side& side) {
    if (sent - released < static_cast<long>(side.shape.blocks)) {
      return true;
    }
    return take_release(side);
  }
  std::uint32_t* block(const Side& side) const {
    return memory + (static_cast<std::size_t>(sent) % side.shape.blocks) * side.elements();
  }

  // Records the block's readiness on the stream and sends its Publish.
  bool publish(const Side& side) {
    const std::size_t slot = static_cast<std::size_t>(sent) % side.shape.blocks;
    const bool ok =
        record_then_send(events.own[slot], side.stream, socket, side.frames.publish, side.lent_fd);
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
    const std::size_t slot = static_cast<std::size_t>(released) % side.shape.blocks;
    const bool ok = receive_then_wait(socket, side.frames.release, side.options.spin, side.stream,
                                      events.peer[slot], side.options.host_wait);
    released += ok ? 1 : 0;
    return ok;
  }
};

// The receiving end of a hop: the sender's blocks mapped once; each Publish is waited for through
// its block's readiness event and released with a record of that block's release event.
struct Inbox {
  int socket = -1;
  EventSet events;  // own: release per block; peer: the sender's readiness per block
  std::uint32_t* mapped = nullptr;
  long taken = 0;

  bool open(const Side& side) {
    return exchange_events(socket, side.shape.blocks, events) &&
           (!side.options.kernels || open_memory(socket, mapped));
  }

  // Receives the next Publish and orders the stream after its readiness.
  bool take(const Side& side) {
    return receive_then_wait(socket, side.frames.publish, side.options.spin, side.stream,
                             events.peer[slot(side)], side.options.host_wait);
  }
  const std::uint32_t* block(const Side& side) const {
    return mapped + slot(side) * side.elements();
  }

  // Unmaps the sender's blocks once this side's stream has finished with them.
  void unmap() {
    if (mapped != nullptr) {
      (void)check_cuda(cudaIpcCloseMemHandle(mapped), "cudaIpcCloseMemHandle");
      mapped = nullptr;
    }
  }

  // Records the block's release on the stream and sends its Release.
  bool release(const Side& side) {
    const bool ok =
        record_then_send(events.own[slot(side)], side.stream, socket, side.frames.release, -1);
    taken += ok ? 1 : 0;
    return ok;
  }

 private:
  std::size_t slot(const Side& side) const {
    return static_cast<std::size_t>(taken) % side.shape.blocks;
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

}  // namespace

int run_pipeline_floor(const std::string& self, const RunShape& shape,
                       const FloorOptions& options) {
  if (shape.blocks < 1 || shape.blocks > kMaxBlocks) {
    std::fprintf(stderr, "ipc pipeline floor: blocks must be 1 to %zu\n", kMaxBlocks);
    return 2;
  }
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
  bool ok = relay > 0 && sink > 0 && side.set_up() && out.open(side);
  const long warm_up = std::min(kWarmUpTensors, shape.count);
  Clock::time_point start = Clock::now();
  for (long i = 0; ok && i < shape.count; ++i) {
    if (i == warm_up) {
      start = Clock::now();
    }
    ok = out.acquire(side) &&
         (!options.kernels ||
          launch_fill(out.block(side), side.elements(), static_cast<std::uint32_t>(i),
                      shape.delay_us, side.stream) == 0) &&
         out.publish(side);
  }
  ok = out.drain(side) && ok;
  (void)::close(to_relay[0]);  // the relay's next read ends its loop if it is still in one
  ok = relay > 0 && wait_exit(relay, kChildTimeoutMs) == 0 && ok;
  ok = sink > 0 && wait_exit(sink, kChildTimeoutMs) == 0 && ok;
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
  bool ok = side.set_up() && in.open(side) && out.open(side);
  // As the library's relay: its kernel reads the producer's block into a block of its own, whose
  // Publish goes out before the producer's block is released.
  for (long i = 0; ok && i < shape.count; ++i) {
    ok = in.take(side) && out.acquire(side) &&
         (!options.kernels ||
          launch_add_one(in.block(side), out.block(side), side.elements(), side.stream) == 0) &&
         out.publish(side) && in.release(side);
  }
  ok = out.drain(side) && ok;
  ok = check_cuda(cudaStreamSynchronize(side.stream), "cudaStreamSynchronize") && ok;
  in.unmap();
  return ok ? 0 : 1;
}

int pipeline_floor_sink(int in_fd, int done_fd, const RunShape& shape,
                        const FloorOptions& options) {
  Side side(shape, options);
  Inbox in;
  in.socket = in_fd;
  unsigned long long* mismatches = nullptr;
  bool ok = side.set_up() && in.open(side) &&
            (!options.kernels ||
             (check_cuda(cudaMalloc(reinterpret_cast<void**>(&mismatches), sizeof(*mismatches)),
                         "cudaMalloc") &&
              check_cuda(cudaMemsetAsync(mismatches, 0, sizeof(*mismatches), side.stream),
                         "cudaMemsetAsync")));
  // Every value is checked as the library's sink checks it: a floor that broke its own ordering
  // would fail here rather than look fast.
  for (long i = 0; ok && i < shape.count; ++i) {
    ok = in.take(side) &&
         (!options.kernels ||
          launch_check(in.block(side), side.elements(), static_cast<std::uint32_t>(i), 1,
                       mismatches, side.stream) == 0) &&
         in.release(side);
  }
  ok = check_cuda(cudaStreamSynchronize(side.stream), "cudaStreamSynchronize") && ok;
  unsigned long long wrong = 0;
  if (mismatches != nullptr &&
      check_cuda(cudaMemcpy(&wrong, mismatches, sizeof(wrong), cudaMemcpyDeviceToHost),
                 "cudaMemcpy")) {
    std::printf("floor sink: %llu mismatching elements\n", wrong);
    ok = ok && wrong == 0;
  }
  if (ok) {
    FinishStamps::write(done_fd);  // after the count is read, as the library's consumer stamps
  }
  in.unmap();
  return ok ? 0 : 1;
}

}  // namespace ipc_demo
