// The importer process of the cross-process GPU tests, started by ipc_spawn.cpp with its end of a
// channel. Arguments are key=value words:
//   channel_fd=N signal_fd=N     inherited descriptors (set by spawn_peer)
//   role=consume                 import `count` tensors of uint32 and check each on the GPU
//   role=hold                    import `count`, start slow checks, release `release` of them,
//                                write 'h' to signal_fd and wait to be killed
//   count=N elements=N delay_us=N seed_base=N expect_device=N (-1: any) release=N
//   flat=1                       consume: fail if GPU memory or descriptors grow after warm-up
//   readiness=gpu|host           where the Importer waits for readiness (default: the library's)
//   beside_dead=1                consume: first start a second exporter (this binary again,
//                                role=export_and_hang), import its one tensor with the wait on
//                                the GPU, queue a check of it on a stream of its own, kill that
//                                exporter mid-write, and only then consume this channel's tensors
//   role=export_and_hang         export one tensor whose write takes `delay_us`, write 'h' to
//                                signal_fd and wait to be killed
// A consumer checks tensor i against pattern_value(seed_base + i): a missing readiness wait
// reads the memory before the producer's slow kernel wrote it, a block reused too early is
// overwritten before the check's second read. Exit status 0 means every check passed.
#include <cuda_runtime.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "gpu/kernels.hpp"
#include "holoscan/deferred_release.hpp"
#include "holoscan/ipc.hpp"
#include "holoscan/tensor_pool.hpp"
#include "ipc/spawn.hpp"

namespace {

using holoscan::Tensor;
using holoscan::test::CheckResult;

struct Arguments {
  std::map<std::string, std::string> values;
  long get(const std::string& key, long fallback) const {
    const auto found = values.find(key);
    return found == values.end() ? fallback : std::strtol(found->second.c_str(), nullptr, 10);
  }
  std::string text(const std::string& key) const {
    const auto found = values.find(key);
    return found == values.end() ? std::string() : found->second;
  }
};

int fail(int status, const std::string& why) {
  std::fprintf(stderr, "ipc peer %d: %s\n", static_cast<int>(::getpid()), why.c_str());
  return status;
}

int open_fds() {
  int count = 0;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (const dirent* entry = ::readdir(dir)) {
      count += entry->d_name[0] != '.' ? 1 : 0;
    }
    ::closedir(dir);
  }
  return count;
}

std::size_t free_device_memory() {
  std::size_t free_bytes = 0;
  std::size_t total = 0;
  return cudaMemGetInfo(&free_bytes, &total) == cudaSuccess ? free_bytes : 0;
}

// One stream on the device the imports live on, made when the first import shows which.
struct ConsumerStream {
  cudaStream_t stream = nullptr;
  bool ensure(int device) {
    return stream != nullptr ||
           (cudaSetDevice(device) == cudaSuccess &&
            cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  }
};

int receive(holoscan::ipc::Importer& importer, Tensor& tensor) {
  auto received = importer.receive(30000);
  if (!received) {
    return fail(11, "receive: " + received.error().message);
  }
  if (!*received) {
    return fail(11, "nothing arrived within 30 s");
  }
  tensor = std::move(**received);
  return 0;
}

holoscan::ipc::ImporterOptions importer_options(holoscan::ipc::ReadinessWait readiness) {
  holoscan::ipc::ImporterOptions options;
  options.hello_timeout_ms = 30000;
  options.readiness = readiness;
  return options;
}

// Starts this binary again as an exporter whose one tensor is written by a kernel that spins
// `delay_us` first, imports that tensor with the wait on the GPU, queues a check of it on a stream
// of its own (which then waits on the exporter's event), and kills the exporter before the write
// ends: that stream, and the deallocation point recorded on it, never complete. First it makes
// `results` (`count` zeroed entries, for the consumer after), since cudaMalloc and cudaFree may
// synchronize the device, which would then wait for ever. Returns 0 once the exporter is dead,
// with `dead_stream` (left to the process's exit) set.
int import_from_a_killed_exporter(long delay_us, long count, cudaStream_t* dead_stream,
                                  CheckResult** results) {
  auto ends = holoscan::ipc::Channel::pair();
  int signal_pipe[2] = {-1, -1};
  if (!ends || ::pipe2(signal_pipe, O_CLOEXEC) != 0) {
    return fail(20, "cannot make the second exporter's channel or pipe");
  }
  holoscan::ipc::UniqueFd signal_read(signal_pipe[0]);
  holoscan::ipc::UniqueFd signal_write(signal_pipe[1]);
  char self[4096] = {};
  if (::readlink("/proc/self/exe", self, sizeof(self) - 1) <= 0) {
    return fail(20, "cannot find this binary");
  }
  const int child_fd = ends->second.fd();
  const pid_t exporter = ipc_demo::spawn(
      self,
      {"channel_fd=" + std::to_string(child_fd), "signal_fd=" + std::to_string(signal_write.get()),
       "role=export_and_hang", "delay_us=" + std::to_string(delay_us),
       "parent_pid=" + std::to_string(::getpid())},
      {child_fd, signal_write.get()});
  if (exporter < 0) {
    return fail(20, "cannot start the second exporter");
  }
  { const holoscan::ipc::Channel childs_end = std::move(ends->second); }  // closed here
  signal_write.reset();
  auto importer = holoscan::ipc::Importer::create(
      std::move(ends->first), importer_options(holoscan::ipc::ReadinessWait::kOnGpu));
  if (!importer) {
    return fail(21, "Importer::create (second exporter): " + importer.error().message);
  }
  Tensor tensor;
  if (int status = receive(*importer, tensor); status != 0) {
    return status;
  }
  CheckResult* result = nullptr;
  // The kernels are loaded before the wait exists: a first launch loads its module lazily, and
  // that may wait for the whole device, here for the killed write, which then ends first.
  if (cudaSetDevice(tensor.device().device_id) != cudaSuccess ||
      holoscan::test::load_all_kernels() != 0 ||
      cudaStreamCreateWithFlags(dead_stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaMalloc(reinterpret_cast<void**>(&result), sizeof(CheckResult)) != cudaSuccess ||
      cudaMalloc(reinterpret_cast<void**>(results), sizeof(CheckResult) * count) != cudaSuccess ||
      cudaMemset(*results, 0, sizeof(CheckResult) * count) != cudaSuccess ||
      cudaDeviceSynchronize() != cudaSuccess) {
    return fail(22, "cannot make the dead exporter's consumer stream or the results");
  }
  if (!tensor.synchronize_for_consumer_stream(*dead_stream) ||
      holoscan::test::launch_check(tensor.data_as<std::uint32_t>(),
                                   static_cast<std::uint64_t>(tensor.size()), 1, 0, result,
                                   *dead_stream) != 0 ||
      !tensor.set_deallocation_stream(*dead_stream)) {
    return fail(22, "cannot queue the check of the dead exporter's tensor");
  }
  tensor = Tensor();  // its release waits on a point that will never complete
  char step = 0;
  if (::read(signal_read.get(), &step, 1) != 1 || ::kill(exporter, SIGKILL) != 0) {
    return fail(23, "the second exporter never signalled, or cannot be killed");
  }
  int status = 0;
  (void)::waitpid(exporter, &status, 0);
  if (cudaStreamQuery(*dead_stream) != cudaErrorNotReady) {
    return fail(24, "the write finished before its exporter was killed: nothing was proven");
  }
  return 0;
}

int export_and_hang(const Arguments& args, holoscan::ipc::Channel channel, int signal_fd) {
  // Killed with the importer that started it, whatever way that one ends.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != args.get("parent_pid", -1)) {
    return fail(34, "the importer that started this exporter is gone");
  }
  auto exporter = holoscan::ipc::Exporter::create();
  if (!exporter) {
    return fail(30, "Exporter::create: " + exporter.error().message);
  }
  auto peer = exporter->add_peer(std::move(channel), 30000);
  holoscan::TensorPoolConfig config;
  config.block_bytes = 1 << 16;
  config.block_count = 1;
  config.memory_provider = holoscan::ipc::shareable_pool_memory();
  auto pool = holoscan::TensorPool::create(config);
  cudaStream_t producer = nullptr;
  if (!peer || !pool ||
      cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking) != cudaSuccess) {
    return fail(31, "cannot make the exporter's peer, pool or stream");
  }
  auto tensor = (*pool)->allocate({(1 << 16) / 4}, DLDataType{kDLUInt, 32, 1});
  if (!tensor ||
      holoscan::test::launch_slow_fill(
          static_cast<std::uint32_t*>(tensor->data()), static_cast<std::uint64_t>(tensor->size()),
          1, static_cast<std::uint64_t>(args.get("delay_us", 3000000)), producer) != 0 ||
      !tensor->set_readiness_stream(producer) || !exporter->publish(*peer, *tensor)) {
    return fail(32, "cannot write or publish the tensor");
  }
  const char step = 'h';
  if (::write(signal_fd, &step, 1) != 1) {
    return fail(33, "cannot signal the importer");
  }
  for (;;) {
    ::pause();  // until killed, mid-write
  }
}

int consume(const Arguments& args, holoscan::ipc::Importer& importer) {
  const long count = args.get("count", 1);
  const long delay_us = args.get("delay_us", 0);
  const auto seed_base = static_cast<std::uint32_t>(args.get("seed_base", 1));
  const long expect_device = args.get("expect_device", -1);
  const bool flat = args.get("flat", 0) != 0;
  const long warm_up = count > 200 ? 100 : 0;
  CheckResult* results = nullptr;
  // Left to the process's exit: it never completes (see import_from_a_killed_exporter).
  cudaStream_t dead_stream = nullptr;
  // Beside a dead exporter, this exporter's first tensor comes before the dead wait: importing it
  // maps the exporter's pool (cuMemSetAccess, which may synchronize the device), once.
  Tensor first;
  if (args.get("beside_dead", 0) != 0) {
    if (int status = receive(importer, first); status != 0) {
      return status;
    }
    if (int status = import_from_a_killed_exporter(3000000, count, &dead_stream, &results);
        status != 0) {
      return status;
    }
  }
  ConsumerStream consumer;
  std::size_t memory_after_warm_up = 0;
  int fds_after_warm_up = 0;
  std::int64_t elements = 0;
  for (long i = 0; i < count; ++i) {
    Tensor tensor = std::move(first);
    if (i > 0 || dead_stream == nullptr) {
      if (int status = receive(importer, tensor); status != 0) {
        return status;
      }
    }
    const int device = tensor.device().device_id;
    if (expect_device >= 0 && device != expect_device) {
      return fail(12, "imported on device " + std::to_string(device) + ", expected " +
                          std::to_string(expect_device));
    }
    if (i == 0) {
      // Before any work is queued: cudaMalloc and the memset may synchronize the device.
      if (!consumer.ensure(device) ||
          (results == nullptr &&
           (cudaMalloc(reinterpret_cast<void**>(&results), sizeof(CheckResult) * count) !=
                cudaSuccess ||
            cudaMemset(results, 0, sizeof(CheckResult) * count) != cudaSuccess))) {
        return fail(13, "cannot make the consumer's stream or results");
      }
      elements = tensor.size();
    }
    if (auto ordered = tensor.synchronize_for_consumer_stream(consumer.stream); !ordered) {
      return fail(14, "synchronize_for_consumer: " + ordered.error().message);
    }
    if (holoscan::test::launch_check(
            tensor.data_as<std::uint32_t>(), static_cast<std::uint64_t>(tensor.size()),
            seed_base + static_cast<std::uint32_t>(i), static_cast<std::uint64_t>(delay_us),
            results + i, consumer.stream) != 0) {
      return fail(15, "launch_check failed");
    }
    if (!tensor.set_deallocation_stream(consumer.stream)) {
      return fail(16, "set_deallocation_stream failed");
    }
    if (i + 1 == warm_up) {
      memory_after_warm_up = free_device_memory();
      fds_after_warm_up = open_fds();
    }
  }
  // The end of the run, not the hot path: wait for the checks and read their results.
  if (cudaStreamSynchronize(consumer.stream) != cudaSuccess) {
    return fail(17, "the consumer's stream failed");
  }
  std::vector<CheckResult> host(static_cast<std::size_t>(count));
  if (cudaMemcpy(host.data(), results, sizeof(CheckResult) * count, cudaMemcpyDeviceToHost) !=
      cudaSuccess) {
    return fail(17, "cannot read the results");
  }
  long bad = 0;
  for (long i = 0; i < count; ++i) {
    const auto seed = seed_base + static_cast<std::uint32_t>(i);
    const bool ok = host[i].mismatches == 0 &&
                    host[i].checksum == holoscan::test::expected_checksum(
                                            seed, static_cast<std::uint64_t>(elements));
    bad += ok ? 0 : 1;
    if (!ok && bad <= 5) {
      std::fprintf(stderr, "tensor %ld: %u mismatches\n", i, host[i].mismatches);
    }
  }
  if (dead_stream == nullptr) {
    // Beside a dead exporter, the free could wait for its stream, and that import's release waits
    // for ever: both are left to the process's _exit (see main).
    (void)cudaFree(results);
    holoscan::flush_deferred_releases();
  }
  if (bad != 0) {
    return fail(18, std::to_string(bad) + " of " + std::to_string(count) + " tensors were wrong");
  }
  if (flat && warm_up > 0) {
    const long long memory_drift =
        static_cast<long long>(memory_after_warm_up) - static_cast<long long>(free_device_memory());
    const int fd_drift = open_fds() - fds_after_warm_up;
    std::printf("ipc peer: GPU memory grew %lld bytes, descriptors %d, after warm-up\n",
                memory_drift, fd_drift);
    if (memory_drift > (2 << 20) || fd_drift > 0) {
      return fail(19, "GPU memory or descriptors grew over the run");
    }
  }
  const auto stats = importer.stats();
  std::printf(
      "ipc peer: %ld tensors checked, %llu mappings, %llu fds received, %llu releases with an "
      "event\n",
      count, static_cast<unsigned long long>(stats.mappings_opened),
      static_cast<unsigned long long>(stats.fds_received),
      static_cast<unsigned long long>(stats.release_events));
  if (dead_stream != nullptr && cudaStreamQuery(dead_stream) != cudaErrorNotReady) {
    return fail(25, "the dead exporter's consumer stream ran after all: nothing was proven");
  }
  return 0;
}

int hold(const Arguments& args, holoscan::ipc::Importer& importer, int signal_fd) {
  const long count = args.get("count", 4);
  const long release = args.get("release", 2);
  const long delay_us = args.get("delay_us", 500000);
  ConsumerStream consumer;
  CheckResult* results = nullptr;
  std::vector<Tensor> kept;
  for (long i = 0; i < count; ++i) {
    Tensor tensor;
    if (int status = receive(importer, tensor); status != 0) {
      return status;
    }
    if (results == nullptr && (!consumer.ensure(tensor.device().device_id) ||
                               cudaMalloc(reinterpret_cast<void**>(&results),
                                          sizeof(CheckResult) * count) != cudaSuccess)) {
      return fail(13, "cannot make the consumer's stream or results");
    }
    if (!tensor.synchronize_for_consumer_stream(consumer.stream) ||
        holoscan::test::launch_check(
            tensor.data_as<std::uint32_t>(), static_cast<std::uint64_t>(tensor.size()), 1,
            static_cast<std::uint64_t>(delay_us), results + i, consumer.stream) != 0 ||
        !tensor.set_deallocation_stream(consumer.stream)) {
      return fail(14, "cannot queue the slow checks");
    }
    kept.push_back(std::move(tensor));
  }
  for (long i = 0; i < release && i < count; ++i) {
    kept[static_cast<std::size_t>(i)] = Tensor();  // released behind checks still running
  }
  const char step = 'h';
  if (::write(signal_fd, &step, 1) != 1) {
    return fail(15, "cannot signal the parent");
  }
  for (;;) {
    ::pause();  // until killed
  }
}

}  // namespace

int main(int argc, char** argv) {
  Arguments args;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    const auto equals = word.find('=');
    if (equals == std::string::npos) {
      return fail(2, "bad argument " + word);
    }
    args.values[word.substr(0, equals)] = word.substr(equals + 1);
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    return fail(3, "no CUDA device");
  }
  auto channel = holoscan::ipc::Channel::adopt(
      holoscan::ipc::UniqueFd(static_cast<int>(args.get("channel_fd", -1))));
  if (!channel) {
    return fail(2, channel.error().message);
  }
  const std::string role = args.text("role");
  if (role == "export_and_hang") {
    return export_and_hang(args, std::move(*channel), static_cast<int>(args.get("signal_fd", -1)));
  }
  holoscan::ipc::ImporterOptions options;
  options.hello_timeout_ms = 30000;
  if (const std::string readiness = args.text("readiness"); readiness == "gpu") {
    options.readiness = holoscan::ipc::ReadinessWait::kOnGpu;
  } else if (readiness == "host") {
    options.readiness = holoscan::ipc::ReadinessWait::kOnHost;
  } else if (!readiness.empty()) {
    return fail(2, "readiness must be gpu or host, not " + readiness);
  }
  auto importer = holoscan::ipc::Importer::create(std::move(*channel), options);
  if (!importer) {
    return fail(10, "Importer::create: " + importer.error().message);
  }
  if (role == "consume") {
    const int status = consume(args, *importer);
    if (args.get("beside_dead", 0) != 0) {
      // A dead exporter's import is never released: no exit drain, no teardown of CUDA waiting
      // for a stream that never runs again.
      std::fflush(nullptr);
      ::_exit(status);
    }
    return status;
  }
  if (role == "hold") {
    return hold(args, *importer, static_cast<int>(args.get("signal_fd", -1)));
  }
  return fail(2, "unknown role " + role);
}
