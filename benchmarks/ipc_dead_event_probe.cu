// Whether the GPU work of another process that waits on an interprocess event ever runs once the
// process that recorded the event is killed before the event's work completed: the reason an
// Exporter polls its importers' release events from the host (and drops a dead importer's claims
// by its exit) instead of making a stream of its own wait for them (docs/ipc.md).
//
// Each case runs in a child of its own, the waiter, which forks the recorder before it touches
// CUDA. The recorder records an interprocess event after a kernel that spins for two seconds and
// sends its handle; it is killed half a second later. The waiter opens the event and asks, for
// five seconds (the kernel's whole run and more), whether the event and its own stream's wait on
// it (enqueued before or after the kill) completed.
#include <cuda_runtime.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

namespace {

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

const char* name(cudaError_t status) { return cudaGetErrorName(status); }

[[noreturn]] void record_and_wait_to_be_killed(int to_waiter) {
  int khz = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t event = nullptr;
  cudaIpcEventHandle_t handle{};
  if (cudaSetDevice(0) != cudaSuccess ||
      cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventInterprocess) !=
          cudaSuccess) {
    _exit(2);
  }
  spin<<<1, 1, 0, stream>>>(2000LL * khz);  // about two seconds
  if (cudaEventRecord(event, stream) != cudaSuccess ||
      cudaIpcGetEventHandle(&handle, event) != cudaSuccess ||
      write(to_waiter, &handle, sizeof(handle)) != static_cast<ssize_t>(sizeof(handle))) {
    _exit(3);
  }
  for (;;) {
    pause();
  }
}

// One case: the waiter's stream waits on the event before the recorder is killed, or after.
bool probe(bool wait_before_kill) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    return false;
  }
  const pid_t recorder = fork();
  if (recorder == 0) {
    close(pipe_fds[0]);
    record_and_wait_to_be_killed(pipe_fds[1]);
  }
  close(pipe_fds[1]);
  cudaIpcEventHandle_t handle{};
  const bool got = read(pipe_fds[0], &handle, sizeof(handle)) == sizeof(handle);
  close(pipe_fds[0]);
  cudaEvent_t opened = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t mine = nullptr;
  if (!got || cudaSetDevice(0) != cudaSuccess ||
      cudaIpcOpenEventHandle(&opened, handle) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreateWithFlags(&mine, cudaEventDisableTiming) != cudaSuccess) {
    kill(recorder, SIGKILL);
    waitpid(recorder, nullptr, 0);
    std::printf("setup failed\n");
    return false;
  }
  const auto enqueue = [&] {
    return cudaStreamWaitEvent(stream, opened, 0) == cudaSuccess &&
           cudaEventRecord(mine, stream) == cudaSuccess;
  };
  bool enqueued = !wait_before_kill || enqueue();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kill(recorder, SIGKILL);
  waitpid(recorder, nullptr, 0);
  enqueued = enqueued && (wait_before_kill || enqueue());
  const auto killed = std::chrono::steady_clock::now();
  cudaError_t event_state = cudaErrorNotReady;
  cudaError_t wait_state = cudaErrorNotReady;
  while (std::chrono::steady_clock::now() - killed < std::chrono::seconds(5)) {
    event_state = cudaEventQuery(opened);
    wait_state = cudaEventQuery(mine);
    if (event_state != cudaErrorNotReady && wait_state != cudaErrorNotReady) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::printf("%-40s enqueued %s; %.1f s after the kill: event %s, the stream's wait %s\n",
              wait_before_kill ? "stream wait enqueued before the kill:"
                               : "stream wait enqueued after the kill:",
              enqueued ? "yes" : "no", after, name(event_state), name(wait_state));
  // The stream may never drain: leave it (and the events) to the process's exit.
  return enqueued;
}

// Runs one case in a child of its own: the recorder must be forked from a process that has not
// touched CUDA (a forked child cannot use its parent's CUDA), and a case leaves streams that may
// never drain.
bool probe_in_child(bool wait_before_kill) {
  std::fflush(stdout);
  const pid_t waiter = fork();
  if (waiter == 0) {
    const bool ok = probe(wait_before_kill);
    std::fflush(stdout);
    _exit(ok ? 0 : 1);  // without the runtime's teardown, which could wait on those streams
  }
  int status = 0;
  return waiter > 0 && waitpid(waiter, &status, 0) == waiter && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

}  // namespace

int main() {
  std::printf("interprocess event of a killed recorder, polled for 5 s (its kernel spins 2 s)\n");
  const bool before = probe_in_child(true);
  const bool after = probe_in_child(false);
  return before && after ? 0 : 1;
}
