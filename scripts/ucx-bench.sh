#!/usr/bin/env bash
# On the GPU machine: tensors over UCX (holoscan_dlpack_ucx_bench, device memory) beside the floor,
# ucx_perftest on the same transports and memory, and beside ucxx's own round-trip benchmark
# (CuPy arrays, tagged send/recv), all in one run. Ratios are computed from this run only.
# Writes $OUT/ucx-bench.json (every measurement and the ratios) and $OUT/ucx-bench.log.
#
# Needs: the gpu preset built with UCX (scripts/gpu-check.sh build, .deps/ucx carried), and for
# ucxx .whl/ucxx-site.tar.xz (made by scripts/ucxx-wheels.sh where a registry is reachable).
# UCX_BENCH_TRANSPORTS picks the transport sets (default: same_host network); UCX_BENCH_SCALE
# divides every iteration count (default 1; 10 for a quick look); UCX_BENCH_MEM=host measures
# host memory instead (NumPy arrays for ucxx); UCX_BENCH_PYTHON is the Python 3.12 to run ucxx.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-$PWD/out/ucx-bench}
mkdir -p "$out"
log=$out/ucx-bench.log
lines=$out/ucx-bench.jsonl
: >"$log"
: >"$lines"
ucx=$PWD/.deps/ucx/libucx
bench=${UCX_BENCH_BINARY:-$PWD/build/gpu/benchmarks/holoscan_dlpack_ucx_bench}
scale=${UCX_BENCH_SCALE:-1}
mem=${UCX_BENCH_MEM:-cuda}
python=${UCX_BENCH_PYTHON:-python3}
export UCX_WARN_UNUSED_ENV_VARS=n

# same_host: CUDA IPC between the processes (cuda_copy for what IPC cannot do, tcp for the
# connection); network: the path between hosts forced (device memory staged through host buffers).
declare -A transports=([same_host]="cuda_ipc,cuda_copy,tcp" [network]="tcp,cuda_copy")

say() { echo "$*" | tee -a "$log"; }
n() { echo $(( $1 / scale > 0 ? $1 / scale : 1 )); }

record() {  # name transports json: one line of ucx-bench.jsonl
  echo "{\"set\": \"$1\", \"tls\": \"$2\", \"result\": $3}" | tee -a "$lines" >>"$log"
}

ours() {  # set tls args...
  local set=$1 tls=$2 line
  shift 2
  say "== holoscan $set: $*"
  line=$(UCX_TLS=$tls UCX_MODULE_DIR=$ucx/lib/ucx timeout 300 "$bench" "$@" mem="$mem" 2>>"$log" |
         tee -a "$log" | grep '^{' | tail -1)
  [ -n "$line" ] && record "$set" "$tls" "$(echo "$line" | sed 's/^{/{"tool": "holoscan", /')"
}

perftest() {  # set tls test size iters: server and client on localhost, device memory both sides
  local set=$1 tls=$2 test=$3 size=$4 iters=$5 port=$((20000 + RANDOM % 20000)) final
  say "== ucx_perftest $set: $test size=$size iters=$iters"
  local env=(env UCX_TLS="$tls" UCX_MODULE_DIR="$ucx/lib/ucx"
             LD_LIBRARY_PATH="$ucx/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  "${env[@]}" timeout 300 "$ucx/bin/ucx_perftest" -p "$port" >>"$log" 2>&1 &
  local server=$!
  sleep 2
  final=$("${env[@]}" timeout 300 "$ucx/bin/ucx_perftest" 127.0.0.1 -p "$port" -t "$test" \
            -m "$mem,$mem" -s "$size" -n "$iters" -w "$(n 1000)" 2>>"$log" | tee -a "$log" |
          awk '/^Final:/ {print $3, $4, $6, $8}')
  wait "$server"
  # Final: iterations, latency 50%ile, average, overall (usec), bandwidth average, overall
  # (MB/s = MiB/s), message rate average, overall.
  if [ -n "$final" ]; then
    set -- $final
    record "$set" "$tls" "{\"tool\": \"ucx_perftest\", \"test\": \"$test\", \"size\": $size, \
\"iters\": $iters, \"latency_p50_us\": $1, \"latency_us\": $2, \"bandwidth_MiBps\": $3, \
\"messages_per_s\": $4}"
  fi
}

ucxx_site=
ucxx() {  # set tls size iters: ucxx's send_recv round trips, CuPy arrays, polling core backend
  local set=$1 tls=$2 size=$3 iters=$4 report
  if [ -z "$ucxx_site" ]; then
    [ -f .whl/ucxx-site.tar.xz ] || { say "ucxx: .whl/ucxx-site.tar.xz missing, skipped"; return; }
    ucxx_site=$(mktemp -d)
    tar -C "$ucxx_site" -xJf .whl/ucxx-site.tar.xz
  fi
  say "== ucxx $set: size=$size iters=$iters"
  # ucxx loads its own UCX (1.21) from the site folder: the project's UCX must stay out of its way.
  report=$(env -u UCX_MODULE_DIR UCX_TLS="$tls" PYTHONPATH="$ucxx_site${PYTHONPATH:+:$PYTHONPATH}" timeout 300 \
             "$python" -m ucxx.benchmarks.send_recv -o "$([ "$mem" = cuda ] && echo cupy || echo numpy)" --reuse-alloc -n "$size" \
             --n-iter "$iters" --n-warmup-iter "$(n 100)" -l ucxx-core --progress-mode polling \
             -s 127.0.0.1 --no-detailed-report 2>&1 | tee -a "$log")
  local average median
  average=$(echo "$report" | awk -F'|' '/Latency \(average\)/ {print $2+0}')
  median=$(echo "$report" | awk -F'|' '/Latency \(median\)/ {print $2+0}')
  if [ -n "$average" ]; then
    record "$set" "$tls" "{\"tool\": \"ucxx\", \"test\": \"roundtrip\", \"size\": $size, \
\"iters\": $iters, \"latency_us\": $(awk -v v="$average" 'BEGIN {print v / 1000}'), \
\"latency_p50_us\": $(awk -v v="$median" 'BEGIN {print v / 1000}')}"
  fi
}

say "ucx bench: $(date -u +%Y-%m-%dT%H:%MZ) on $(nvidia-smi --query-gpu=name,driver_version \
  --format=csv,noheader 2>&1 | head -1)"
LD_LIBRARY_PATH=$ucx/lib UCX_MODULE_DIR=$ucx/lib/ucx "$ucx/bin/ucx_info" -v >>"$log" 2>&1
LD_LIBRARY_PATH=$ucx/lib UCX_MODULE_DIR=$ucx/lib/ucx "$ucx/bin/ucx_info" -d 2>&1 |
  grep -E 'Transport|Memory domain' >>"$log"
if [ ! -x "$bench" ]; then
  say "ucx bench: $bench is not built (gpu preset with .deps/ucx)"
  exit 1
fi

for set in ${UCX_BENCH_TRANSPORTS:-same_host network}; do
  tls=${transports[$set]}
  ours "$set" "$tls" pingpong size=4096 iters="$(n 20000)" warmup="$(n 2000)"
  ours "$set" "$tls" pingpong size=4096 iters="$(n 20000)" warmup="$(n 2000)" ready=1
  ours "$set" "$tls" pingpong size=1048576 iters="$(n 2000)" warmup="$(n 200)"
  ours "$set" "$tls" pingpong size=67108864 iters="$(n 100)" warmup="$(n 10)"
  ours "$set" "$tls" stream size=1048576 count="$(n 10000)" warmup="$(n 500)" window=32
  ours "$set" "$tls" stream size=67108864 count="$(n 300)" warmup="$(n 20)" window=8
  perftest "$set" "$tls" ucp_am_lat 4096 "$(n 20000)"
  perftest "$set" "$tls" ucp_am_lat 1048576 "$(n 2000)"
  perftest "$set" "$tls" ucp_am_lat 67108864 "$(n 100)"
  perftest "$set" "$tls" ucp_am_bw 1048576 "$(n 10000)"
  perftest "$set" "$tls" ucp_am_bw 67108864 "$(n 300)"
  ucxx "$set" "$tls" 4096 "$(n 20000)"
  ucxx "$set" "$tls" 1048576 "$(n 2000)"
  ucxx "$set" "$tls" 67108864 "$(n 100)"
done

python3 scripts/ucx-bench-report.py "$lines" "$out/ucx-bench.json" | tee -a "$log"
