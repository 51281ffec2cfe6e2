// What each CUDA call the hooks could use costs on this machine, runtime beside driver API, so that
// the hooks' design can be argued from a measurement taken in the same run as everything else.
#include <cuda.h>

#include <cstdint>

#include "benchmark_cuda.hpp"

namespace {

using holoscan_bench::StreamPair;

// Driver entry points, taken through the runtime so that nothing links libcuda directly.
struct Driver {
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuStreamWaitEvent) stream_wait_event = nullptr;
  decltype(&::cuEventQuery) event_query = nullptr;
  decltype(&::cuStreamIsCapturing) stream_is_capturing = nullptr;
  decltype(&::cuStreamGetCtx) stream_get_ctx = nullptr;
  decltype(&::cuStreamGetId) stream_get_id = nullptr;
  decltype(&::cuStreamGetDevice) stream_get_device = nullptr;
  decltype(&::cuCtxGetCurrent) ctx_get_current = nullptr;

  static const Driver& get() {
    static const Driver driver = [] {
      Driver loaded;
      const auto load = [](const char* name, auto& slot) {
        void* function = nullptr;
        cudaDriverEntryPointQueryResult found{};
        if (cudaGetDriverEntryPointByVersion(name, &function, 12080, cudaEnableDefault, &found) ==
                cudaSuccess &&
            found == cudaDriverEntryPointSuccess) {
          slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(function);
        }
      };
      load("cuEventRecord", loaded.event_record);
      load("cuStreamWaitEvent", loaded.stream_wait_event);
      load("cuEventQuery", loaded.event_query);
      load("cuStreamIsCapturing", loaded.stream_is_capturing);
      load("cuStreamGetCtx", loaded.stream_get_ctx);
      load("cuStreamGetId", loaded.stream_get_id);
      load("cuStreamGetDevice", loaded.stream_get_device);
      load("cuCtxGetCurrent", loaded.ctx_get_current);
      return loaded;
    }();
    return driver;
  }
};

// Runs `call(streams, event)` in the timed loop on a recorded, completed untimed event; skips
// when there is no GPU or `available` is false (a driver entry point was not found).
template <class Call>
void probe(benchmark::State& state, bool available, Call call) {
  if (!holoscan_bench::require_gpu(state)) {
    return;
  }
  if (!available) {
    state.SkipWithError("driver entry point not available");
    return;
  }
  StreamPair streams;
  cudaEvent_t event = nullptr;
  (void)cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  (void)cudaEventRecord(event, streams.producer);
  (void)cudaEventSynchronize(event);
  for (auto _ : state) {
    call(streams, event);
  }
  (void)cudaEventDestroy(event);
}

void BM_Probe_Runtime_StreamIsCapturing(benchmark::State& state) {
  probe(state, true, [](const StreamPair& s, cudaEvent_t) {
    cudaStreamCaptureStatus status{};
    benchmark::DoNotOptimize(cudaStreamIsCapturing(s.producer, &status));
  });
}
BENCHMARK(BM_Probe_Runtime_StreamIsCapturing);

void BM_Probe_Runtime_StreamGetDevice(benchmark::State& state) {
  probe(state, true, [](const StreamPair& s, cudaEvent_t) {
    int device = -1;
    benchmark::DoNotOptimize(cudaStreamGetDevice(s.producer, &device));
  });
}
BENCHMARK(BM_Probe_Runtime_StreamGetDevice);

void BM_Probe_Runtime_StreamGetId(benchmark::State& state) {
  probe(state, true, [](const StreamPair& s, cudaEvent_t) {
    unsigned long long id = 0;
    benchmark::DoNotOptimize(cudaStreamGetId(s.producer, &id));
  });
}
BENCHMARK(BM_Probe_Runtime_StreamGetId);

void BM_Probe_Runtime_GetDevice(benchmark::State& state) {
  probe(state, true, [](const StreamPair&, cudaEvent_t) {
    int device = -1;
    benchmark::DoNotOptimize(cudaGetDevice(&device));
  });
}
BENCHMARK(BM_Probe_Runtime_GetDevice);

void BM_Probe_Runtime_EventRecord(benchmark::State& state) {
  probe(state, true, [](const StreamPair& s, cudaEvent_t event) {
    benchmark::DoNotOptimize(cudaEventRecord(event, s.producer));
  });
}
BENCHMARK(BM_Probe_Runtime_EventRecord);

void BM_Probe_Driver_EventRecord(benchmark::State& state) {
  const Driver& d = Driver::get();
  probe(state, d.event_record != nullptr, [&](const StreamPair& s, cudaEvent_t event) {
    benchmark::DoNotOptimize(d.event_record(event, s.producer));
  });
}
BENCHMARK(BM_Probe_Driver_EventRecord);

void BM_Probe_Driver_StreamWaitEvent(benchmark::State& state) {
  const Driver& d = Driver::get();
  probe(state, d.stream_wait_event != nullptr, [&](const StreamPair& s, cudaEvent_t event) {
    benchmark::DoNotOptimize(d.stream_wait_event(s.consumer, event, 0));
  });
}
BENCHMARK(BM_Probe_Driver_StreamWaitEvent);

void BM_Probe_Driver_EventQuery(benchmark::State& state) {
  const Driver& d = Driver::get();
  probe(state, d.event_query != nullptr, [&](const StreamPair&, cudaEvent_t event) {
    benchmark::DoNotOptimize(d.event_query(event));
  });
}
BENCHMARK(BM_Probe_Driver_EventQuery);

void BM_Probe_Driver_StreamIsCapturing(benchmark::State& state) {
  const Driver& d = Driver::get();
  probe(state, d.stream_is_capturing != nullptr, [&](const StreamPair& s, cudaEvent_t) {
    CUstreamCaptureStatus status{};
    benchmark::DoNotOptimize(d.stream_is_capturing(s.producer, &status));
  });
}
BENCHMARK(BM_Probe_Driver_StreamIsCapturing);

void BM_Probe_Driver_StreamGetCtx(benchmark::State& state) {
  const Driver& d = Driver::get();
  probe(state, d.stream_get_ctx != nullptr, [&](const StreamPair& s, cudaEvent_t) {
    CUcontext context = nullptr;
    benchmark::DoNotOptimize(d.stream_get_ctx(s.producer, &context));
  });
}
BENCHMARK(BM_Probe_Driver_StreamGetCtx);

void BM_Probe_Driver_StreamGetId(benchmark::State& state) {
  const Driver& d = Driver::get();
  probe(state, d.stream_get_id != nullptr, [&](const StreamPair& s, cudaEvent_t) {
    unsigned long long id = 0;
    benchmark::DoNotOptimize(d.stream_get_id(s.producer, &id));
  });
}
BENCHMARK(BM_Probe_Driver_StreamGetId);

void BM_Probe_Driver_StreamGetDevice(benchmark::State& state) {
  const Driver& d = Driver::get();
  probe(state, d.stream_get_device != nullptr, [&](const StreamPair& s, cudaEvent_t) {
    CUdevice device = -1;
    benchmark::DoNotOptimize(d.stream_get_device(s.producer, &device));
  });
}
BENCHMARK(BM_Probe_Driver_StreamGetDevice);

void BM_Probe_Driver_CtxGetCurrent(benchmark::State& state) {
  const Driver& d = Driver::get();
  probe(state, d.ctx_get_current != nullptr, [&](const StreamPair&, cudaEvent_t) {
    CUcontext context = nullptr;
    benchmark::DoNotOptimize(d.ctx_get_current(&context));
  });
}
BENCHMARK(BM_Probe_Driver_CtxGetCurrent);

}  // namespace
