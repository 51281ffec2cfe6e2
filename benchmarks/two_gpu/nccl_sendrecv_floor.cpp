// The floor of moving tensors between two GPUs with NCCL: raw ncclSend/ncclRecv, one rank per GPU
// and per process (as nccl-tests runs under MPI), no framework in between. It measures what the
// library's UCX transport and torch.distributed are compared against:
//   latency   one-way time of a 4 KiB message (ping-pong, half the round trip);
//   bandwidth 1 MiB and 64 MiB messages streamed from rank 0 to rank 1;
//   stream    10^4 tensors of 1 MiB, each written by a kernel on rank 0 and checked by a kernel on
//             rank 1 (a slot is refilled only after its send, on the same stream), tensors/s.
// Every figure is printed as one JSON object per line, so a driver script can put them beside the
// others measured in the same run.
//
// Usage: holoscan_dlpack_nccl_floor [tensors]   (default 10000; needs two CUDA devices)
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu/kernels.hpp"

namespace {

constexpr int kRanks = 2;
constexpr std::size_t kLatencyBytes = 4 << 10;
constexpr std::size_t kStreamBytes = 1 << 20;
constexpr int kStreamSlots = 4;

[[noreturn]] void fail(const char* what, const char* why) {
  std::fprintf(stderr, "nccl floor: %s failed: %s\n", what, why);
  std::_Exit(2);
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    fail(what, cudaGetErrorName(status));
  }
}

void check(ncclResult_t status, const char* what) {
  if (status != ncclSuccess) {
    fail(what, ncclGetErrorString(status));
  }
}

void check_launch(int status, const char* what) {
  check(static_cast<cudaError_t>(status), what);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Rank {
  int rank = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int peer() const { return 1 - rank; }

  void send(const void* data, std::size_t bytes) {
    check(ncclSend(data, bytes, ncclUint8, peer(), comm, stream), "ncclSend");
  }
  void recv(void* data, std::size_t bytes) {
    check(ncclRecv(data, bytes, ncclUint8, peer(), comm, stream), "ncclRecv");
  }
  void sync() { check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }
  // Both ranks leave together: a one-byte exchange each way, then a host wait.
  void barrier(void* scratch) {
    check(ncclGroupStart(), "ncclGroupStart");
    send(scratch, 1);
    recv(static_cast<char*>(scratch) + 1, 1);
    check(ncclGroupEnd(), "ncclGroupEnd");
    sync();
  }
};

void report(const Rank& self, const std::string& json) {
  if (self.rank == 0) {
    std::printf("%s\n", json.c_str());
    std::fflush(stdout);
  }
}

// Half the round trip of a ping-pong, enqueued back to back and waited for once (as nccl-tests).
void latency(Rank& self, void* buffer, void* scratch) {
  const int warmup = 100;
  const int iterations = 2000;
  auto ping_pong = [&](int count) {
    for (int i = 0; i < count; ++i) {
      if (self.rank == 0) {
        self.send(buffer, kLatencyBytes);
        self.recv(buffer, kLatencyBytes);
      } else {
        self.recv(buffer, kLatencyBytes);
        self.send(buffer, kLatencyBytes);
      }
    }
    self.sync();
  };
  ping_pong(warmup);
  self.barrier(scratch);
  const auto start = std::chrono::steady_clock::now();
  ping_pong(iterations);
  const double one_way_us = seconds_since(start) / iterations / 2 * 1e6;
  report(self, "{\"peer\":\"nccl\",\"metric\":\"latency_us\",\"bytes\":" +
                   std::to_string(kLatencyBytes) + ",\"value\":" + std::to_string(one_way_us) + "}");
}

// Rank 0 streams `count` messages; the clock stops when rank 1 has them all (its one-byte ack).
void bandwidth(Rank& self, void* buffer, std::size_t bytes, void* scratch) {
  const int count = bytes >= (64u << 20) ? 40 : 400;
  auto stream = [&](int messages) {
    for (int i = 0; i < messages; ++i) {
      self.rank == 0 ? self.send(buffer, bytes) : self.recv(buffer, bytes);
    }
    self.rank == 0 ? self.recv(scratch, 1) : self.send(scratch, 1);
    self.sync();
  };
  stream(4);
  self.barrier(scratch);
  const auto start = std::chrono::steady_clock::now();
  stream(count);
  const double gbps = static_cast<double>(bytes) * count / seconds_since(start) / 1e9;
  report(self, "{\"peer\":\"nccl\",\"metric\":\"bandwidth_gbps\",\"bytes\":" +
                   std::to_string(bytes) + ",\"value\":" + std::to_string(gbps) + "}");
}

// Tensors written by a kernel, sent, and checked by a kernel on the receiver, slot by slot.
void tensor_stream(Rank& self, int tensors, void* scratch) {
  const std::uint64_t count = kStreamBytes / sizeof(std::uint32_t);
  std::vector<std::uint32_t*> slots(kStreamSlots);
  for (auto& slot : slots) {
    check(cudaMalloc(reinterpret_cast<void**>(&slot), kStreamBytes), "cudaMalloc");
  }
  holoscan::test::CheckResult* result = nullptr;
  check(cudaMallocManaged(reinterpret_cast<void**>(&result), sizeof(*result)), "cudaMallocManaged");
  *result = {};
  self.barrier(scratch);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < tensors; ++i) {
    std::uint32_t* slot = slots[static_cast<std::size_t>(i % kStreamSlots)];
    const auto seed = static_cast<std::uint32_t>(i + 1);
    if (self.rank == 0) {
      check_launch(holoscan::test::launch_slow_fill(slot, count, seed, 0, self.stream), "fill");
      self.send(slot, kStreamBytes);
    } else {
      self.recv(slot, kStreamBytes);
      check_launch(holoscan::test::launch_check(slot, count, seed, 0, result, self.stream),
                   "check");
    }
  }
  self.rank == 0 ? self.recv(scratch, 1) : self.send(scratch, 1);
  self.sync();
  const double per_second = tensors / seconds_since(start);
  if (self.rank == 1) {
    // The receiver's verdict travels to rank 0 through the exit status.
    if (result->mismatches != 0) {
      std::fprintf(stderr, "nccl floor: %u mismatched elements in the stream\n",
                   result->mismatches);
      std::_Exit(3);
    }
  }
  report(self, "{\"peer\":\"nccl\",\"metric\":\"stream_tensors_per_s\",\"bytes\":" +
                   std::to_string(kStreamBytes) + ",\"tensors\":" + std::to_string(tensors) +
                   ",\"value\":" + std::to_string(per_second) + "}");
  for (auto* slot : slots) {
    cudaFree(slot);
  }
  cudaFree(result);
}

int run_rank(int rank, const ncclUniqueId& id, int tensors) {
  Rank self;
  self.rank = rank;
  check(cudaSetDevice(rank), "cudaSetDevice");
  check_launch(holoscan::test::load_all_kernels(), "load kernels");
  check(cudaStreamCreateWithFlags(&self.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(ncclCommInitRank(&self.comm, kRanks, id, rank), "ncclCommInitRank");
  void* buffer = nullptr;
  void* scratch = nullptr;
  check(cudaMalloc(&buffer, 64u << 20), "cudaMalloc");
  check(cudaMalloc(&scratch, 64), "cudaMalloc");
  latency(self, buffer, scratch);
  bandwidth(self, buffer, 1u << 20, scratch);
  bandwidth(self, buffer, 64u << 20, scratch);
  tensor_stream(self, tensors, scratch);
  check(ncclCommDestroy(self.comm), "ncclCommDestroy");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int tensors = argc > 1 ? std::atoi(argv[1]) : 10000;
  // The id is made before any CUDA call, so both children start from a process without a context.
  ncclUniqueId id;
  check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  std::vector<pid_t> children;
  for (int rank = 0; rank < kRanks; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) {
      fail("fork", "no process");
    }
    if (pid == 0) {
      int device_count = 0;
      if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count < kRanks) {
        std::fprintf(stderr, "nccl floor: needs %d CUDA devices, found %d\n", kRanks, device_count);
        std::_Exit(77);
      }
      std::_Exit(run_rank(rank, id, tensors));
    }
    children.push_back(pid);
  }
  int worst = 0;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    worst = code > worst ? code : worst;
  }
  return worst;
}
