#!/usr/bin/env bash
# Everything that needs the GPU, on the GPU machine: build (gpu preset, dependencies from a carried
# .deps/), every test, the demo, the Python package with its torch/CuPy tests and benchmark, the
# GPU tests under compute-sanitizer (memcheck, racecheck, synccheck), and the benchmarks with their
# floor ratios. Logs go to $OUT (or out/gpu-check); a summary is printed last.
#
# Usage: gpu-check.sh [STAGE...] with stages build, test, demo, python, sanitize, probe, bench,
# pipeline, ipc, ucx, twogpu (default: all; twogpu needs two GPUs, i.e. the nvidia-h200-x2 kind,
# and says so on one). SANITIZER_TOOLS picks the compute-sanitizer tools (default:
# memcheck racecheck synccheck initcheck); BENCH_REPETITIONS the interleaved repetitions of the
# benchmarks (default 7); UCX_SANITIZER_TOOLS those of the ucx stage (default: memcheck);
# IPC_SANITIZER_TOOLS those of the ipc stage, whose benchmark also runs under an MPS daemon
# unless IPC_MPS=0.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-$PWD/out/gpu-check}
mkdir -p "$out"
summary="$out/summary.txt"
touch "$summary"
note() { echo "$*" | tee -a "$summary"; }
stages=${*:-build test demo python sanitize probe bench pipeline ipc ucx twogpu}

build() {
  if [ ! -f .deps/dlpack-1.3/usr/include/dlpack/dlpack.h ]; then
    note "missing .deps/: run scripts/install-deps.sh where a package registry is reachable and carry .deps"
    return 1
  fi
  note "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tr '\n' ';')"
  if ! { cmake --preset gpu && cmake --build --preset gpu -j "$(nproc)"; } >"$out/build.log" 2>&1; then
    note "build FAILED (see build.log)"
    tail -40 "$out/build.log"
    return 1
  fi
  note "build: ok"
}

test() {
  ctest --preset gpu -j 4 --timeout 300 >"$out/ctest.log" 2>&1
  note "ctest: $(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -1)"
  grep -E '\((Failed|Timeout|Not Run|SEGFAULT|Subprocess aborted|Skipped)\)' "$out/ctest.log" |
    tee -a "$summary"
}

demo() {
  build/gpu/examples/holoscan_dlpack_demo >"$out/demo.log" 2>&1
  note "demo: exit $? — $(tail -1 "$out/demo.log")"
}

# The GPU machine has no package registry, but its python3 has nanobind, scikit-build-core, torch,
# CuPy, NumPy and pytest: build without isolation or downloads, in a venv that sees them.
python() {
  if [ ! -f .deps/dlpack-1.3/usr/include/dlpack/dlpack.h ]; then
    note "python: missing .deps/ (see build)"
    return 1
  fi
  # python3 may itself be a virtualenv (torch's): a .pth file lends its packages to ours.
  local venv=build/gpu-python-venv
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv --system-site-packages "$venv" &&
      python3 -c 'import site; print("\n".join(site.getsitepackages()))' \
        >"$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/host-python.pth"
  fi
  if ! "$venv/bin/python" -m pip install --no-build-isolation --no-deps \
    -Ccmake.define.HOLOSCAN_DLPACK_PYTHON_TESTING=ON . >"$out/python-build.log" 2>&1; then
    note "python build FAILED (see python-build.log)"
    tail -30 "$out/python-build.log"
    return 1
  fi
  "$venv/bin/python" -m pytest -rs -p no:cacheprovider tests/python >"$out/pytest.log" 2>&1
  note "pytest: $(tail -1 "$out/pytest.log")"
  grep -E '^(SKIPPED|FAILED|ERROR)' "$out/pytest.log" | tee -a "$summary"
  if [ "${PYTHON_BENCH:-1}" = 1 ]; then
    "$venv/bin/python" benchmarks/python_bench.py >"$out/python-bench.txt" 2>&1
    note "python benchmark: $(tail -1 "$out/python-bench.txt")"
    cat "$out/python-bench.txt"
    # holoscan_dlpack.ucx beside ucxx (carry .whl/ucxx-site.tar.xz for ucxx; ours alone without).
    "$venv/bin/python" benchmarks/python_ucx_bench.py >"$out/python-ucx-bench.txt" 2>&1
    note "python ucx benchmark: exit $? (python-ucx-bench.txt)"
    tail -6 "$out/python-ucx-bench.txt" | tee -a "$summary"
  fi
}

sanitize() {
  local gpu_tests=build/gpu/tests/holoscan_dlpack_gpu_tests
  for tool in ${SANITIZER_TOOLS:-memcheck racecheck synccheck initcheck}; do
    # One log per tool, so that a tool stopped by the timeout is not summarized by the last one's
    # lines. initcheck follows no child: an IPC peer reads memory that another process wrote,
    # which initcheck, tracking writes per process, reports as never initialized.
    local log="$out/sanitizer-$tool.log" processes=all
    [ "$tool" = initcheck ] && processes=application-only
    # API errors are left out: the capture and no-readiness tests fail CUDA calls on purpose and
    # check those errors themselves. The pool stress test runs fewer rounds under the sanitizer.
    HOLOSCAN_DLPACK_POOL_ITERATIONS=300 HOLOSCAN_DLPACK_IPC_ROUND_TRIPS=500 \
      HOLOSCAN_DLPACK_STRESS_TENSORS=2000 timeout "${SANITIZER_TIMEOUT:-600}" \
      compute-sanitizer --tool "$tool" --target-processes "$processes" --error-exitcode 9 \
      --report-api-errors no "$gpu_tests" --gtest_brief=1 --gtest_filter="-$killed_mid_write" \
      >"$log" 2>&1
    local status=$?
    note "compute-sanitizer $tool: exit $status — $(grep -E 'ERROR SUMMARY' "$log" | tail -1)" \
      "— $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$log" | tail -3 | tr '\n' ' ')"
  done
}

probe() {
  build/gpu/benchmarks/holoscan_dlpack_cuda_semantics_probe >"$out/cuda-semantics.txt" 2>&1
  note "cuda semantics probe: exit $?"
  cat "$out/cuda-semantics.txt"
  build/gpu/benchmarks/holoscan_dlpack_ipc_dead_event_probe >"$out/ipc-dead-event.txt" 2>&1
  note "ipc dead event probe: exit $?"
  tee -a "$summary" <"$out/ipc-dead-event.txt"
}

# Each binary measures the library beside the raw-call floors in one process; the one that links
# PyTorch (when found) measures PyTorch's side there too, so that every ratio comes from one
# process and one run. The plain binary adds the 16-thread rows and the allocation counts.
run_benchmarks() {  # binary json [filter]
  "$1" --benchmark_filter="${3:-.}" --benchmark_repetitions="${BENCH_REPETITIONS:-7}" \
    --benchmark_enable_random_interleaving=true --benchmark_min_time="${BENCH_MIN_TIME:-0.1s}" \
    --benchmark_report_aggregates_only=true --benchmark_out="$2" \
    --benchmark_out_format=json >"${2%.json}.txt" 2>&1
  local status=$?
  note "benchmarks $(basename "$1"): exit $status"
  if [ "$status" -ne 0 ]; then
    tail -3 "${2%.json}.txt" | tee -a "$summary"
  fi
  # The results are written before the process exits: a crash at exit leaves them whole.
  python3 -c 'import json, sys; json.load(open(sys.argv[1]))["benchmarks"]' "$2" 2>/dev/null
}

bench() {
  note "benchmarks: $(date -u +%Y-%m-%dT%H:%MZ)"
  local files=()
  local torch=build/gpu/benchmarks/holoscan_dlpack_torch_benchmarks
  if [ -x "$torch" ]; then
    run_benchmarks "$torch" "$out/bench-torch.json" && files+=("$out/bench-torch.json")
  fi
  run_benchmarks build/gpu/benchmarks/holoscan_dlpack_benchmarks "$out/bench.json"
  files+=("$out/bench.json")
  python3 scripts/bench-report.py "${files[@]}" >"$out/bench-ratios.txt" 2>&1
  python3 scripts/bench-report.py "${files[@]}" --markdown >"$out/bench-table.md" 2>&1
  cat "$out/bench-ratios.txt"
  # The hop's calls counted, and its time split between the library's CUDA calls and its own
  # work, beside the floor timed the same way (one process, one run).
  build/gpu/benchmarks/holoscan_dlpack_hop_calls >"$out/hop-calls.txt" 2>&1
  note "hop calls: exit $? — $(grep '^RESULT hop_time' "$out/hop-calls.txt")"
}

pipeline() {
  build/gpu/benchmarks/holoscan_dlpack_pipeline_benchmark "${PIPELINE_REPETITIONS:-5}" \
    "$out/pipeline.json" >"$out/pipeline.txt" 2>&1
  note "pipeline: exit $? — $(tail -1 "$out/pipeline.txt")"
  cat "$out/pipeline.txt"
}

# Cross-process tensors: the IPC GPU tests (each importer a separate process), again under
# compute-sanitizer on both sides (--target-processes all follows the exec'd importers), the demo
# (10^4 tensors to two consumer processes), and the comparison with torch.multiprocessing.
# The verdict of an ipc_bench.py report, its traced round trip's total and the pipeline's slowest
# suspect: the relay (its whole tensor, and its busy time).
ipc_bench_summary() {
  grep -E '^(round trip is|TRACE round trip|TRACE relay: one tensor|BUSY role=relay)' "$1" |
    tee -a "$summary"
}

# Left out under compute-sanitizer: a process killed mid-kernel, and a stream of its importer that
# never runs again (the test's point), which the sanitizer would wait for or report.
killed_mid_write='*KilledMidWrite*'

ipc() {
  local gpu_tests=build/gpu/tests/holoscan_dlpack_gpu_tests
  "$gpu_tests" --gtest_filter='IpcGpu*' >"$out/ipc-tests.log" 2>&1
  note "ipc gpu tests: exit $? — $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/ipc-tests.log" | tr '\n' ' ')"
  grep -E '^ipc: ' "$out/ipc-tests.log" | tee -a "$summary"
  : >"$out/ipc-sanitizers.log"
  for tool in ${IPC_SANITIZER_TOOLS:-${SANITIZER_TOOLS:-memcheck racecheck synccheck initcheck}}; do
    # initcheck on the exporter's side only (see sanitize: the importers read another's writes).
    local processes=all
    [ "$tool" = initcheck ] && processes=application-only
    echo "===== compute-sanitizer --tool $tool ($processes)" >>"$out/ipc-sanitizers.log"
    HOLOSCAN_DLPACK_IPC_ROUND_TRIPS=500 timeout "${SANITIZER_TIMEOUT:-600}" \
      compute-sanitizer --tool "$tool" --target-processes "$processes" --error-exitcode 9 \
      --report-api-errors no "$gpu_tests" --gtest_filter="IpcGpu*:-$killed_mid_write" \
      --gtest_brief=1 >>"$out/ipc-sanitizers.log" 2>&1
    note "ipc compute-sanitizer $tool: exit $? — $(grep -c 'ERROR SUMMARY: 0 errors' "$out/ipc-sanitizers.log") clean summaries so far"
  done
  build/gpu/examples/holoscan_dlpack_ipc_demo demo >"$out/ipc-demo.log" 2>&1
  note "ipc demo: exit $? — $(grep -E '^ipc demo: ' "$out/ipc-demo.log" | tr '\n' ' ')"
  grep -E '^consumer ' "$out/ipc-demo.log" | tee -a "$summary"
  python3 benchmarks/ipc_bench.py --binary build/gpu/examples/holoscan_dlpack_ipc_demo \
    --json "$out/ipc-bench.json" >"$out/ipc-bench.txt" 2>&1
  note "ipc bench: exit $?"
  ipc_bench_summary "$out/ipc-bench.txt"
  # Again with every process's work in one context (docs/ipc.md, "Several processes on one GPU").
  if [ "${IPC_MPS:-1}" = 1 ] && start_mps; then
    python3 benchmarks/ipc_bench.py --binary build/gpu/examples/holoscan_dlpack_ipc_demo \
      --json "$out/ipc-bench-mps.json" >"$out/ipc-bench-mps.txt" 2>&1
    note "ipc bench with MPS: exit $?"
    stop_mps
    ipc_bench_summary "$out/ipc-bench-mps.txt"
  fi
}

# An MPS control daemon for this script's processes (its pipes in a temporary folder, its log
# under $out), if the driver has one; stop_mps ends it.
start_mps() {
  command -v nvidia-cuda-mps-control >/dev/null || { note "mps: no nvidia-cuda-mps-control"; return 1; }
  export CUDA_MPS_PIPE_DIRECTORY="${TMPDIR:-/tmp}/holoscan-dlpack-mps" CUDA_MPS_LOG_DIRECTORY="$out/mps-log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || { note "mps: the daemon did not start"; return 1; }
  sleep 1
}

stop_mps() {
  echo quit | nvidia-cuda-mps-control
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}

# Tensors over UCX (built when .deps/ucx was carried): the GPU tests (device tensors both ways over
# tcp+cuda_copy and cuda_ipc+cuda_copy, each a pair of processes; a receiver killed mid-stream),
# again under compute-sanitizer on both sides (without the kill, whose victim the sanitizer would
# report), then scripts/ucx-bench.sh (beside ucx_perftest and ucxx; carry .whl/ucxx-site.tar.xz
# for ucxx), whose report (every number and the ratios of this run) goes into the summary. About
# four minutes on the H200. The CPU UCX tests run in the test stage.
ucx() {
  local gpu_tests=build/gpu/tests/ucx/holoscan_dlpack_ucx_gpu_tests started=$SECONDS
  if [ ! -x "$gpu_tests" ]; then
    note "ucx: not built (run scripts/install-deps.sh where a registry is reachable; carry .deps)"
    return 0
  fi
  export UCX_MODULE_DIR=$PWD/.deps/ucx/libucx/lib/ucx UCX_WARN_UNUSED_ENV_VARS=n
  "$gpu_tests" >"$out/ucx-gpu-tests.log" 2>&1
  note "ucx gpu tests: exit $? — $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/ucx-gpu-tests.log" | tr '\n' ' ')"
  grep -E '^ucx gpu peer: ' "$out/ucx-gpu-tests.log" | tee -a "$summary"
  : >"$out/ucx-sanitizers.log"
  for tool in ${UCX_SANITIZER_TOOLS:-memcheck}; do
    echo "===== compute-sanitizer --tool $tool (both sides)" >>"$out/ucx-sanitizers.log"
    timeout "${SANITIZER_TIMEOUT:-600}" compute-sanitizer --tool "$tool" --target-processes all \
      --error-exitcode 9 --report-api-errors no "$gpu_tests" --gtest_brief=1 \
      --gtest_filter='-*Killed*' >>"$out/ucx-sanitizers.log" 2>&1
    note "ucx compute-sanitizer $tool: exit $? — $(grep -c 'ERROR SUMMARY: 0 errors' "$out/ucx-sanitizers.log") clean summaries"
  done
  note "ucx tests took $((SECONDS - started)) s"
  # What one 4 KiB landing in device memory costs with two processes on this one GPU, and with
  # one: the cost that every transport pays here and two hosts would not (docs/ucx.md).
  { build/gpu/benchmarks/holoscan_dlpack_landing_probe
    build/gpu/benchmarks/holoscan_dlpack_landing_probe one; } >"$out/landing-probe.txt" 2>&1
  note "landing probe: exit $? (landing-probe.txt)"
  OUT="$out/ucx-bench" scripts/ucx-bench.sh >"$out/ucx-bench.txt" 2>&1
  note "ucx bench: exit $? (ucx-bench/ucx-bench.json), stage $((SECONDS - started)) s"
  grep -E '^=====|^  \| ' "$out/ucx-bench.txt" | sed 's/^/ucx protocols: /' >>"$summary"
  sed -n '/\] report$/,$p' "$out/ucx-bench.txt" | tee -a "$summary"
}

# Two GPUs of one host: the two-device tests, then moving tensors from GPU 0 to GPU 1 with raw
# NCCL (the floor), torch.distributed over NCCL (the peer) and the library's transport, all in
# this one run; the report puts them side by side (docs/performance.md keeps it with its date).
twogpu() {
  local gpus
  gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
  if [ "$gpus" -lt 2 ]; then
    note "twogpu: needs two GPUs, found $gpus (run on the nvidia-h200-x2 kind)"
    return 0
  fi
  local filter='TwoDevice*:DeviceTest.ProducerOnAnotherDeviceOrdersTheConsumer'
  filter+=':IpcGpuTest.ImporterFindsTheDeviceByUuidNotByOrdinal'
  filter+=':ReleaseSafetyTest.AlternatingReadinessDevicesKeepsOneEventPerDevice'
  build/gpu/tests/holoscan_dlpack_gpu_tests --gtest_filter="$filter" >"$out/two-gpu-tests.log" 2>&1
  note "two-device tests: exit $? — $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/two-gpu-tests.log" | tr '\n' ' ')"
  local results=()
  if [ -x build/gpu/benchmarks/holoscan_dlpack_nccl_floor ]; then
    build/gpu/benchmarks/holoscan_dlpack_nccl_floor "${TWO_GPU_TENSORS:-10000}" \
      >"$out/two-gpu-nccl.jsonl" 2>"$out/two-gpu-nccl.err"
    note "nccl floor: exit $?"
    results+=("$out/two-gpu-nccl.jsonl")
  else
    note "nccl floor: not built (NCCL not found at configure time)"
  fi
  timeout 300 python3 benchmarks/two_gpu/torch_distributed_bench.py \
    --tensors "${TWO_GPU_TENSORS:-10000}" >"$out/two-gpu-torch.jsonl" 2>"$out/two-gpu-torch.err"
  note "torch.distributed: exit $?"
  results+=("$out/two-gpu-torch.jsonl")
  local bench=build/gpu/benchmarks/holoscan_dlpack_ucx_bench
  if [ -x "$bench" ]; then
    export UCX_MODULE_DIR=$PWD/.deps/ucx/libucx/lib/ucx UCX_WARN_UNUSED_ENV_VARS=n
    local tls
    for tls in cuda_ipc,cuda_copy,tcp tcp,cuda_copy; do
      local file="$out/two-gpu-ucx-${tls%%,*}.jsonl" gpus="mem=cuda device=0 peer_device=1"
      {
        UCX_TLS=$tls "$bench" pingpong size=4096 iters=2000 warmup=200 $gpus
        UCX_TLS=$tls "$bench" stream size=1048576 count=400 warmup=40 window=16 $gpus
        UCX_TLS=$tls "$bench" stream size=67108864 count=40 warmup=4 window=4 $gpus
        UCX_TLS=$tls "$bench" stream size=1048576 count="${TWO_GPU_TENSORS:-10000}" warmup=100 \
          window=16 verify=1 $gpus
      } >"$file.raw" 2>"$file.err"
      note "ucx over $tls: exit $? (every streamed tensor checked on GPU 1)"
      python3 scripts/two-gpu-report.py --convert-ucx "holoscan-dlpack ucx ${tls%%,*}" "$file.raw" >"$file"
      results+=("$file")
    done
  else
    note "ucx bench: not built (UCX not found at configure time; carry .deps)"
  fi
  python3 scripts/two-gpu-report.py "${results[@]}" >"$out/two-gpu.md" 2>&1
  cat "$out/two-gpu.md" | tee -a "$summary"
}

for stage in $stages; do
  "$stage" || break
done
echo "===== summary"
cat "$summary"
