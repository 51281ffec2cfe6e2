// What landing 4 KiB in device memory costs when two processes take turns on one GPU, the way the
// UCX and IPC benchmarks run here (both ends on one machine). Two fresh processes ping-pong one
// byte over pipes; on each arrival a process does one kind of GPU work, then answers. Printed:
// one-way latency per kind of work, with both processes working and with one of them only
// echoing (`holoscan_dlpack_landing_probe one`).
//
// On the H200 (2026-12-01): an H2D copy costs ~150 us one way while both processes use the GPU
// and ~10 us while only one does; a D2H copy ~15 us either way. A tensor that lands in device
// memory pays the first figure on this machine whatever the transport (UCX's own tag_lat -e too);
// two hosts, each with its own GPU, pay the second. The other kinds ask which GPU work pays the
// turn: a D2H copy into pinned memory, a D2D copy, an empty kernel, and a kernel that lands the
// data itself by reading mapped pinned (or, where the system allows it, pageable) host memory.
//
// Exit status: 0, 77 when no process could use a GPU, 1 on a failure.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "landing_kernels.hpp"

namespace {

constexpr std::size_t kBytes = 4096;
constexpr int kTurns = 2000;
constexpr int kWarmup = 200;
constexpr int kNoGpu = 77;
constexpr int kUnsupported = 78;  // the kernel cannot read pageable memory on this system

enum Work {
  kNone,
  kH2dPageable,
  kH2dPinned,
  kH2dSync,
  kD2hSync,
  kLandPageable,
  kLandPinned,
  kD2hPinned,
  kD2d,
  kKernelNothing,
  kKernelFromPinned,
  kH2dPinnedStreamSync,
  kKernelFromPageable,
  kWorks
};
constexpr const char* kWorkNames[kWorks] = {
    "pipe only",
    "H2D pageable, event polled",
    "H2D pinned, event polled",
    "H2D cudaMemcpy (sync)",
    "D2H cudaMemcpy (sync)",
    "H2D pageable polled + D2H sync",
    "H2D pinned polled + D2H sync",
    "D2H pinned, event polled",
    "D2D copy, event polled",
    "empty kernel, event polled",
    "kernel reads pinned, polled",
    "H2D pinned, stream synchronized",
    "kernel reads pageable, polled",
};

/** @brief One process's buffers, stream and event; made after fork(), in the child. */
struct Gpu {
  void* device = nullptr;
  void* device_spare = nullptr;
  char* pageable = nullptr;
  char* pinned = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t event = nullptr;

  bool make() {
    pageable = static_cast<char*>(std::malloc(kBytes));
    if (pageable == nullptr || cudaSetDevice(0) != cudaSuccess ||
        cudaMalloc(&device, kBytes) != cudaSuccess ||
        cudaMalloc(&device_spare, kBytes) != cudaSuccess ||
        cudaMallocHost(reinterpret_cast<void**>(&pinned), kBytes) != cudaSuccess ||
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&event, cudaEventDisableTiming) != cudaSuccess) {
      return false;
    }
    std::memset(pageable, 1, kBytes);
    std::memset(pinned, 1, kBytes);
    return true;
  }

  // As a transport does: an event after the copy, polled (never a blocking wait).
  bool land_from(const char* host) {
    return cudaMemcpyAsync(device, host, kBytes, cudaMemcpyHostToDevice, stream) == cudaSuccess &&
           poll();
  }

  // An event after what `stream` was given, polled until it completes.
  bool poll() {
    if (cudaEventRecord(event, stream) != cudaSuccess) {
      return false;
    }
    cudaError_t status = cudaErrorNotReady;
    while ((status = cudaEventQuery(event)) == cudaErrorNotReady) {
    }
    return status == cudaSuccess;
  }

  bool send_back() {
    return cudaMemcpy(pageable, device, kBytes, cudaMemcpyDeviceToHost) == cudaSuccess;
  }

  bool run(Work work) {
    switch (work) {
      case kNone:
        return true;
      case kH2dPageable:
        return land_from(pageable);
      case kH2dPinned:
        return land_from(pinned);
      case kH2dSync:
        return cudaMemcpy(device, pageable, kBytes, cudaMemcpyHostToDevice) == cudaSuccess;
      case kD2hSync:
        return send_back();
      case kLandPageable:
        return land_from(pageable) && send_back();
      case kLandPinned:
        return land_from(pinned) && send_back();
      case kD2hPinned:
        return cudaMemcpyAsync(pinned, device, kBytes, cudaMemcpyDeviceToHost, stream) ==
                   cudaSuccess &&
               poll();
      case kD2d:
        return cudaMemcpyAsync(device_spare, device, kBytes, cudaMemcpyDeviceToDevice, stream) ==
                   cudaSuccess &&
               poll();
      case kKernelNothing:
        return launch_nothing(stream) == cudaSuccess && poll();
      case kKernelFromPinned:
        return launch_copy_words(device, pinned, kBytes, stream) == cudaSuccess && poll();
      case kKernelFromPageable:
        return launch_copy_words(device, pageable, kBytes, stream) == cudaSuccess && poll();
      case kH2dPinnedStreamSync:
        return cudaMemcpyAsync(device, pinned, kBytes, cudaMemcpyHostToDevice, stream) ==
                   cudaSuccess &&
               cudaStreamSynchronize(stream) == cudaSuccess;
      case kWorks:
        break;
    }
    return false;
  }
};

/**
 * @brief One side of the ping-pong, in a child: exits 0 (writing the one-way latency in us to
 *        `report` when given), kNoGpu without a usable GPU, 1 on a failure.
 */
[[noreturn]] void play(int in, int out, bool starts, Work work, bool works, FILE* report) {
  Gpu gpu;
  if (!gpu.make()) {
    std::_Exit(kNoGpu);
  }
  int pageable_access = 0;
  if (work == kKernelFromPageable &&
      (cudaDeviceGetAttribute(&pageable_access, cudaDevAttrPageableMemoryAccess, 0) !=
           cudaSuccess ||
       pageable_access == 0)) {
    std::_Exit(kUnsupported);
  }
  char byte = 0;
  auto start = std::chrono::steady_clock::now();
  for (int turn = 0; turn < kWarmup + kTurns; ++turn) {
    if (turn == kWarmup) {
      start = std::chrono::steady_clock::now();
    }
    if (starts && write(out, &byte, 1) != 1) {
      std::_Exit(1);
    }
    if (read(in, &byte, 1) != 1 || (works && !gpu.run(work))) {
      std::_Exit(1);
    }
    if (!starts && write(out, &byte, 1) != 1) {
      std::_Exit(1);
    }
  }
  const std::chrono::duration<double, std::micro> spent = std::chrono::steady_clock::now() - start;
  if (report != nullptr) {
    std::fprintf(report, "%-32s one-way %8.1f us\n", kWorkNames[work], spent.count() / kTurns / 2);
    std::fflush(report);
  }
  std::_Exit(0);
}

int exit_status(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // The parent never calls CUDA: both sides are children forked before any CUDA call.
  const bool one_sided = argc > 1 && std::strcmp(argv[1], "one") == 0;
  std::printf("%s\n", one_sided ? "one process works on the GPU, the other only echoes"
                                : "both processes work on the GPU");
  std::fflush(stdout);
  for (int w = 0; w < kWorks; ++w) {
    const auto work = static_cast<Work>(w);
    int there[2];
    int back[2];
    if (pipe(there) != 0 || pipe(back) != 0) {
      return 1;
    }
    const pid_t echo = fork();
    if (echo == 0) {
      close(there[1]);  // a peer that dies must show as end of file, so no spare write ends
      close(back[0]);
      play(there[0], back[1], false, work, !one_sided, nullptr);
    }
    const pid_t starter = fork();
    if (starter == 0) {
      close(there[0]);
      close(back[1]);
      play(back[0], there[1], true, work, true, stdout);
    }
    for (int fd : {there[0], there[1], back[0], back[1]}) {
      close(fd);
    }
    const int starter_status = exit_status(starter);
    const int echo_status = exit_status(echo);
    if (starter_status == kNoGpu || echo_status == kNoGpu) {
      std::printf("no usable GPU\n");
      return kNoGpu;
    }
    if (starter_status == kUnsupported) {
      std::printf("%-32s not supported here\n", kWorkNames[work]);
      continue;
    }
    if (starter_status != 0 || echo_status != 0) {
      std::printf("%s: failed (exit %d and %d)\n", kWorkNames[work], starter_status, echo_status);
      return 1;
    }
  }
  return 0;
}
