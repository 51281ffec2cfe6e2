// Asks the CUDA runtime what the hooks are allowed to skip, and prints each answer: whether an
// event may be recorded, waited on or queried with another device current, whether a stream's
// identity survives destroy-and-recreate at the same address, and which calls a capture allows.
#include <cuda_runtime_api.h>

#include <cstdio>

namespace {

const char* name(cudaError_t status) { return cudaGetErrorName(status); }

void report(const char* question, cudaError_t status) {
  std::printf("%-72s %s\n", question, name(status));
  (void)cudaGetLastError();
}

void probe_devices(int count) {
  if (count < 2) {
    std::printf("%-72s %s\n", "cross-device questions", "skipped: one device");
    return;
  }
  cudaStream_t stream1 = nullptr;
  cudaEvent_t event0 = nullptr;
  cudaEvent_t event1 = nullptr;
  (void)cudaSetDevice(1);
  (void)cudaStreamCreateWithFlags(&stream1, cudaStreamNonBlocking);
  (void)cudaEventCreateWithFlags(&event1, cudaEventDisableTiming);
  (void)cudaSetDevice(0);
  (void)cudaEventCreateWithFlags(&event0, cudaEventDisableTiming);
  cudaStream_t stream0 = nullptr;
  (void)cudaStreamCreateWithFlags(&stream0, cudaStreamNonBlocking);

  report("record event(dev1) on stream(dev1), dev0 current", cudaEventRecord(event1, stream1));
  report("query event(dev1), dev0 current", cudaEventQuery(event1));
  report("synchronize event(dev1), dev0 current", cudaEventSynchronize(event1));
  report("record event(dev0) on stream(dev1), dev0 current", cudaEventRecord(event0, stream1));
  report("wait stream(dev0) on event(dev1), dev0 current", cudaStreamWaitEvent(stream0, event1));
  (void)cudaSetDevice(1);
  report("wait stream(dev0) on event(dev1), dev1 current", cudaStreamWaitEvent(stream0, event1));
  report("record event(dev0) on stream(dev0), dev1 current", cudaEventRecord(event0, stream0));
  report("record event(dev1) on legacy stream, dev0 current after switch",
         (cudaSetDevice(0), cudaEventRecord(event1, nullptr)));
  (void)cudaDeviceSynchronize();
  (void)cudaStreamDestroy(stream0);
  (void)cudaStreamDestroy(stream1);
  (void)cudaEventDestroy(event0);
  (void)cudaEventDestroy(event1);
}

void probe_stream_identity() {
  cudaStream_t first = nullptr;
  (void)cudaStreamCreateWithFlags(&first, cudaStreamNonBlocking);
  unsigned long long first_id = 0;
  (void)cudaStreamGetId(first, &first_id);
  (void)cudaStreamDestroy(first);
  cudaStream_t second = nullptr;
  (void)cudaStreamCreateWithFlags(&second, cudaStreamNonBlocking);
  unsigned long long second_id = 0;
  (void)cudaStreamGetId(second, &second_id);
  std::printf("%-72s %s, ids %llu -> %llu\n", "stream destroyed and re-created",
              first == second ? "same address" : "new address", first_id, second_id);
  (void)cudaStreamDestroy(second);
}

void probe_capture() {
  cudaStream_t stream = nullptr;
  (void)cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaEvent_t event = nullptr;
  (void)cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  const struct {
    const char* question;
    int which;
  } calls[] = {
      {"during global capture: cudaStreamGetDevice", 0},
      {"during global capture: cudaStreamGetId", 1},
      {"during global capture: cudaEventRecord", 2},
  };
  for (const auto& call : calls) {
    (void)cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
    cudaError_t status = cudaSuccess;
    int device = -1;
    unsigned long long id = 0;
    switch (call.which) {
      case 0:
        status = cudaStreamGetDevice(stream, &device);
        break;
      case 1:
        status = cudaStreamGetId(stream, &id);
        break;
      default:
        status = cudaEventRecord(event, stream);
        break;
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    std::printf("%-72s %s; capture then ends with %s\n", call.question, name(status), name(end));
    (void)cudaGetLastError();
    if (graph != nullptr) {
      (void)cudaGraphDestroy(graph);
    }
  }
  report("query of an event last recorded inside a finished capture", cudaEventQuery(event));
  (void)cudaEventDestroy(event);
  (void)cudaStreamDestroy(stream);
}

}  // namespace

int main() {
  int count = 0;
  if (cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess || count == 0) {
    std::printf("no CUDA device: %s\n", name(status));
    return 0;
  }
  std::printf("CUDA semantics probe, %d device(s)\n", count);
  probe_devices(count);
  probe_stream_identity();
  probe_capture();
  return 0;
}
