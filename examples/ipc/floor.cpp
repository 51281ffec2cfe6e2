#include "ipc/floor.hpp"

#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "ipc/floor_parts.hpp"
#include "ipc/ipc_kernels.hpp"
#include "ipc/spawn.hpp"

namespace ipc_demo {
namespace {

namespace ipc = holoscan::ipc;
using Clock = std::chrono::steady_clock;

constexpr int kChildTimeoutMs = 10 * 60 * 1000;

}  // namespace

int run_floor(const std::string& self, const RunShape& shape, const FloorOptions& options) {
  int ends[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0) {
    std::perror("ipc floor: socketpair");
    return 1;
  }
  const pid_t pid = spawn(
      self,
      {"role=floor", "in_fd=" + std::to_string(ends[1]), "count=" + std::to_string(shape.count),
       "elements=" + std::to_string(shape.elements), "blocks=" + std::to_string(shape.blocks),
       std::string("spin=") + (options.spin ? "1" : "0"),
       std::string("fd=") + (options.send_fd ? "1" : "0"),
       std::string("kernels=") + (options.kernels ? "1" : "0")},
      {ends[1]});
  (void)::close(ends[1]);
  const int socket = ends[0];
  Frames frames;
  EventSet events;
  cudaStream_t stream = nullptr;
  std::uint32_t* buffer = device_buffer(shape, 2);
  const int lent = options.send_fd ? ::memfd_create("holoscan-ipc-floor", MFD_CLOEXEC) : -1;
  bool ok = pid > 0 && buffer != nullptr && library_frames(shape, frames) &&
            check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                       "cudaStreamCreateWithFlags") &&
            exchange_events(socket, 1, events);
  const long warm_up = std::min(kWarmUpTensors, shape.count);
  Clock::time_point start = Clock::now();
  for (long i = 0; ok && i < shape.count; ++i) {
    if (i == warm_up) {
      start = Clock::now();
    }
    // The producer's side: readiness recorded, the Publish out; the Release in, its event waited.
    ok = (!options.kernels || launch_fill(buffer, static_cast<std::uint64_t>(shape.elements),
                                          static_cast<std::uint32_t>(i), 0, stream) == 0) &&
         record_then_send(events.own[0], stream, socket, frames.publish, lent) &&
         receive_then_wait(socket, frames.release, options.spin, stream, events.peer[0], false);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const long timed = shape.count - warm_up;
  const std::uint8_t stop = 0;
  ok = send_record(socket, &stop, 0, -1) && ok;  // an empty record ends the peer's loop
  ok = pid > 0 && wait_exit(pid, kChildTimeoutMs) == 0 && ok;
  ok =
      stream != nullptr && check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize") && ok;
  std::printf(
      "RESULT mode=floor count=%ld elements=%lld us_per_tensor=%.2f spin=%d fd=%d kernels=%d "
      "ok=%d\n",
      timed, static_cast<long long>(shape.elements), timed > 0 ? 1e6 * seconds / timed : 0.0,
      options.spin ? 1 : 0, options.send_fd ? 1 : 0, options.kernels ? 1 : 0, ok ? 1 : 0);
  return ok ? 0 : 1;
}

int floor_peer(int fd, const RunShape& shape, const FloorOptions& options) {
  Frames frames;
  EventSet events;
  cudaStream_t stream = nullptr;
  std::uint32_t* buffer = options.kernels ? device_buffer(shape, 2) : nullptr;
  bool ok = library_frames(shape, frames) &&
            check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                       "cudaStreamCreateWithFlags") &&
            exchange_events(fd, 1, events);
  std::uint8_t publish[ipc::detail::kMaxFrameBytes];
  while (ok) {
    const long size = receive_record(fd, publish, sizeof(publish), options.spin);
    if (size <= 0) {
      ok = size == 0;
      break;
    }
    // The importer's side: the Publish in, its readiness waited; the release recorded, sent.
    ok = wait_for_event(stream, events.peer[0], false) &&
         (buffer == nullptr ||
          launch_add_one(buffer, buffer + shape.elements,
                         static_cast<std::uint64_t>(shape.elements), stream) == 0) &&
         record_then_send(events.own[0], stream, fd, frames.release, -1);
  }
  ok = check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize") && ok;
  return ok ? 0 : 1;
}

}  // namespace ipc_demo
