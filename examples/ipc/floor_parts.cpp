#include "ipc/floor_parts.hpp"

#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace ipc_demo {

namespace ipc = holoscan::ipc;

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

bool check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "ipc floor: %s: %s\n", call, cudaGetErrorName(status));
  }
  return status == cudaSuccess;
}

bool exchange_events(int socket, std::size_t count, EventSet& events) {
  std::vector<cudaIpcEventHandle_t> mine(count);
  std::vector<cudaIpcEventHandle_t> theirs(count);
  events.own.assign(count, nullptr);
  events.peer.assign(count, nullptr);
  for (std::size_t i = 0; i < count; ++i) {
    if (!check_cuda(cudaEventCreateWithFlags(&events.own[i],
                                             cudaEventDisableTiming | cudaEventInterprocess),
                    "cudaEventCreateWithFlags") ||
        !check_cuda(cudaIpcGetEventHandle(&mine[i], events.own[i]), "cudaIpcGetEventHandle")) {
      return false;
    }
  }
  const std::size_t bytes = count * sizeof(cudaIpcEventHandle_t);
  if (!send_record(socket, reinterpret_cast<const std::uint8_t*>(mine.data()), bytes, -1) ||
      receive_record(socket, reinterpret_cast<std::uint8_t*>(theirs.data()), bytes, false) !=
          static_cast<long>(bytes)) {
    return false;
  }
  for (std::size_t i = 0; i < count; ++i) {
    if (!check_cuda(cudaIpcOpenEventHandle(&events.peer[i], theirs[i]), "cudaIpcOpenEventHandle")) {
      return false;
    }
  }
  return true;
}

bool wait_for_event(cudaStream_t stream, cudaEvent_t event, bool on_host) {
  if (!on_host) {
    return check_cuda(cudaStreamWaitEvent(stream, event, 0), "cudaStreamWaitEvent");
  }
  cudaError_t status = cudaErrorNotReady;
  while ((status = cudaEventQuery(event)) == cudaErrorNotReady) {
  }
  return check_cuda(status, "cudaEventQuery");
}

bool record_then_send(cudaEvent_t event, cudaStream_t stream, int socket,
                      const ipc::detail::Frame& frame, int fd) {
  return check_cuda(cudaEventRecord(event, stream), "cudaEventRecord") &&
         send_record(socket, frame.bytes.data(), frame.size, fd);
}

bool receive_then_wait(int socket, const ipc::detail::Frame& frame, bool spin, cudaStream_t stream,
                       cudaEvent_t event, bool on_host) {
  std::uint8_t record[ipc::detail::kMaxFrameBytes];
  return receive_record(socket, record, sizeof(record), spin) == static_cast<long>(frame.size) &&
         wait_for_event(stream, event, on_host);
}

bool send_memory(int socket, void* memory) {
  cudaIpcMemHandle_t handle{};
  return check_cuda(cudaIpcGetMemHandle(&handle, memory), "cudaIpcGetMemHandle") &&
         send_record(socket, reinterpret_cast<const std::uint8_t*>(&handle), sizeof(handle), -1);
}

bool open_memory(int socket, std::uint32_t*& mapped) {
  cudaIpcMemHandle_t handle{};
  void* opened = nullptr;
  if (receive_record(socket, reinterpret_cast<std::uint8_t*>(&handle), sizeof(handle), false) !=
          static_cast<long>(sizeof(handle)) ||
      !check_cuda(cudaIpcOpenMemHandle(&opened, handle, cudaIpcMemLazyEnablePeerAccess),
                  "cudaIpcOpenMemHandle")) {
    return false;
  }
  mapped = static_cast<std::uint32_t*>(opened);
  return true;
}

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

std::uint32_t* device_buffer(const RunShape& shape, std::size_t tensors) {
  void* data = nullptr;
  const auto bytes = static_cast<std::size_t>(shape.elements) * sizeof(std::uint32_t) * tensors;
  return check_cuda(cudaMalloc(&data, bytes), "cudaMalloc") ? static_cast<std::uint32_t*>(data)
                                                            : nullptr;
}

}  // namespace ipc_demo
