#include "ipc/floor.hpp"

#include <cuda_runtime_api.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ipc/ipc_kernels.hpp"
#include "ipc/spawn.hpp"
#include "ipc/wire/ipc_frame.hpp"  // the library's own frames (internal)

namespace ipc_demo {
namespace {

namespace ipc = holoscan::ipc;
using Clock = std::chrono::steady_clock;

constexpr int kChildTimeoutMs = 10 * 60 * 1000;

// Sends one record, with `fd` attached when it is not -1; false on failure (printed).
bool send_record(int socket, const std::uint8_t* bytes, std::size_t size, int fd) {
  iovec data{const_cast<std::uint8_t*>(bytes), size};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
  }
  while (::sendmsg(socket, &message, MSG_NOSIGNAL) < 0) {
    if (errno != EINTR) {
      std::perror("ipc floor: sendmsg");
      return false;
    }
  }
  return true;
}

// Receives one record into `bytes` (spinning on MSG_DONTWAIT, or blocking), closing any
// descriptor that came with it as an importer does once its mapping is cached; its size, or -1.
long receive_record(int socket, std::uint8_t* bytes, std::size_t capacity, bool spin) {
  iovec data{bytes, capacity};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  ssize_t n = -1;
  do {
    n = ::recvmsg(socket, &message, (spin ? MSG_DONTWAIT : 0) | MSG_CMSG_CLOEXEC);
  } while (n < 0 && (errno == EINTR || (spin && errno == EAGAIN)));
  if (n < 0) {
    std::perror("ipc floor: recvmsg");
    return -1;
  }
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(header), sizeof(int));
      (void)::close(fd);
    }
  }
  return static_cast<long>(n);
}

bool check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "ipc floor: %s: %s\n", call, cudaGetErrorName(status));
  }
  return status == cudaSuccess;
}

// An interprocess event of this process, and the other side's, opened here.
struct EventPair {
  cudaEvent_t own = nullptr;
  cudaEvent_t peer = nullptr;
};

bool exchange_events(int socket, EventPair& events) {
  cudaIpcEventHandle_t mine{};
  cudaIpcEventHandle_t theirs{};
  if (!check(cudaEventCreateWithFlags(&events.own, cudaEventDisableTiming | cudaEventInterprocess),
             "cudaEventCreateWithFlags") ||
      !check(cudaIpcGetEventHandle(&mine, events.own), "cudaIpcGetEventHandle") ||
      !send_record(socket, reinterpret_cast<const std::uint8_t*>(&mine), sizeof(mine), -1) ||
      receive_record(socket, reinterpret_cast<std::uint8_t*>(&theirs), sizeof(theirs), false) !=
          static_cast<long>(sizeof(theirs))) {
    return false;
  }
  return check(cudaIpcOpenEventHandle(&events.peer, theirs), "cudaIpcOpenEventHandle");
}

// The frames the library sends for one tensor of `shape`: its Publish and its Release.
struct Frames {
  ipc::detail::Frame publish;
  ipc::detail::Frame release;
};

bool library_frames(const RunShape& shape, Frames& frames) {
  ipc::TensorDescriptor d;
  d.export_id = 1;
  d.allocation_id = 1;
  d.handle_kind = ipc::MemoryHandleKind::kPosixFd;
  d.allocation_bytes =
      static_cast<std::uint64_t>(shape.elements) * sizeof(std::uint32_t) * shape.blocks;
  d.dtype = DLDataType{kDLUInt, 32, 1};
  d.shape = {shape.elements};
  d.strides = {1};
  d.dlpack_flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  d.has_readiness_event = true;
  d.readiness_event.fill(1);
  d.exporter_pid = static_cast<std::uint32_t>(::getpid());
  auto descriptor = ipc::encode(d);
  ipc::Publish publish;
  ipc::Release release;
  release.export_id = 1;
  release.has_event = true;
  release.event.fill(1);
  if (!descriptor) {
    std::fprintf(stderr, "ipc floor: %s\n", descriptor.error().message.c_str());
    return false;
  }
  publish.descriptor = std::move(*descriptor);
  // A Publish of a POSIX-fd handle is encoded with its fd held (the frame's bytes are the same
  // either way; the floor sends its own memfd, or none with fd=0, beside them).
  publish.fd = ipc::UniqueFd(::memfd_create("holoscan-ipc-floor-frame", MFD_CLOEXEC));
  auto publish_frame = ipc::detail::encode_frame(publish);
  auto release_frame = ipc::detail::encode_frame(release);
  if (!publish_frame || !release_frame) {
    const auto& error = !publish_frame ? publish_frame.error() : release_frame.error();
    std::fprintf(stderr, "ipc floor: %s frame: %s\n", !publish_frame ? "Publish" : "Release",
                 error.message.c_str());
    return false;
  }
  frames.publish = *publish_frame;
  frames.release = *release_frame;
  return true;
}

// A buffer of `shape.elements` uint32 for the kernels that stand in for the real work.
std::uint32_t* device_buffer(const RunShape& shape) {
  void* data = nullptr;
  const auto bytes = static_cast<std::size_t>(shape.elements) * sizeof(std::uint32_t);
  return check(cudaMalloc(&data, 2 * bytes), "cudaMalloc") ? static_cast<std::uint32_t*>(data)
                                                           : nullptr;
}

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
  EventPair events;
  cudaStream_t stream = nullptr;
  std::uint32_t* buffer = device_buffer(shape);
  const int lent = options.send_fd ? ::memfd_create("holoscan-ipc-floor", MFD_CLOEXEC) : -1;
  bool ok = pid > 0 && buffer != nullptr && library_frames(shape, frames) &&
            check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                  "cudaStreamCreateWithFlags") &&
            exchange_events(socket, events);
  std::uint8_t reply[ipc::detail::kMaxFrameBytes];
  const long warm_up = std::min(kWarmUpTensors, shape.count);
  Clock::time_point start = Clock::now();
  for (long i = 0; ok && i < shape.count; ++i) {
    if (i == warm_up) {
      start = Clock::now();
    }
    // The producer's side: readiness recorded, the Publish out; the Release in, its event waited.
    ok = (!options.kernels || launch_fill(buffer, static_cast<std::uint64_t>(shape.elements),
                                          static_cast<std::uint32_t>(i), 0, stream) == 0) &&
         check(cudaEventRecord(events.own, stream), "cudaEventRecord") &&
         send_record(socket, frames.publish.bytes.data(), frames.publish.size, lent) &&
         receive_record(socket, reply, sizeof(reply), options.spin) ==
             static_cast<long>(frames.release.size) &&
         check(cudaStreamWaitEvent(stream, events.peer, 0), "cudaStreamWaitEvent");
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const long timed = shape.count - warm_up;
  const std::uint8_t stop = 0;
  ok = send_record(socket, &stop, 0, -1) && ok;  // an empty record ends the peer's loop
  ok = pid > 0 && wait_exit(pid, kChildTimeoutMs) == 0 && ok;
  ok = stream != nullptr && check(cudaStreamSynchronize(stream), "cudaStreamSynchronize") && ok;
  std::printf(
      "RESULT mode=floor count=%ld elements=%lld us_per_tensor=%.2f spin=%d fd=%d kernels=%d "
      "ok=%d\n",
      timed, static_cast<long long>(shape.elements), timed > 0 ? 1e6 * seconds / timed : 0.0,
      options.spin ? 1 : 0, options.send_fd ? 1 : 0, options.kernels ? 1 : 0, ok ? 1 : 0);
  return ok ? 0 : 1;
}

int floor_peer(int fd, const RunShape& shape, const FloorOptions& options) {
  Frames frames;
  EventPair events;
  cudaStream_t stream = nullptr;
  std::uint32_t* buffer = options.kernels ? device_buffer(shape) : nullptr;
  bool ok = library_frames(shape, frames) &&
            check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                  "cudaStreamCreateWithFlags") &&
            exchange_events(fd, events);
  std::uint8_t publish[ipc::detail::kMaxFrameBytes];
  while (ok) {
    const long size = receive_record(fd, publish, sizeof(publish), options.spin);
    if (size <= 0) {
      ok = size == 0;
      break;
    }
    // The importer's side: the Publish in, its readiness waited; the release recorded, sent.
    ok = check(cudaStreamWaitEvent(stream, events.peer, 0), "cudaStreamWaitEvent") &&
         (buffer == nullptr ||
          launch_add_one(buffer, buffer + shape.elements,
                         static_cast<std::uint64_t>(shape.elements), stream) == 0) &&
         check(cudaEventRecord(events.own, stream), "cudaEventRecord") &&
         send_record(fd, frames.release.bytes.data(), frames.release.size, -1);
  }
  ok = check(cudaStreamSynchronize(stream), "cudaStreamSynchronize") && ok;
  return ok ? 0 : 1;
}

}  // namespace ipc_demo
