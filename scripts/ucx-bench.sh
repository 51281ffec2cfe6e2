#!/usr/bin/env bash
# On the GPU machine: tensors over UCX (holoscan_dlpack_ucx_bench, device memory) beside the floor,
# ucx_perftest on the same transports and memory, and beside ucxx's own round-trip benchmark
# (CuPy arrays, tagged send/recv), all in one run. Ratios are computed from this run only.
# Writes $OUT/ucx-bench.json (every measurement and the ratios), $OUT/ucx-bench.log, and
# $OUT/ucx-protocols-<set>.log (the protocols UCX used, UCX_PROTO_INFO=used, for each tool).
#
# The floors: ucx_perftest as it runs by default (ucp_am_lat, ucp_am_bw: endpoints without error
# handling, eager data left in UCX's buffer); with -e, endpoints that handle peer failure as the
# library's always do (UCX then picks other protocols); and tag_lat -e (UCP tag matching), whose receive copies
# even eager data into the receiver's device buffer, as a tensor always lands in receiver memory.
# ucxx's benchmark has no stream: a stream of tensors is compared with its round trips' bandwidth.
#
# Needs: the gpu preset built with UCX (scripts/gpu-check.sh build, .deps/ucx carried), and for
# ucxx .whl/ucxx-site.tar.xz (made by scripts/ucxx-wheels.sh where a registry is reachable).
# UCX_BENCH_TRANSPORTS picks the transport sets (default: same_host network); UCX_BENCH_SCALE
# divides every iteration count (default 1, about 3 minutes on the H200; 10 for a quick look), and
# each of the library's measurements stops after 6 s (divided by it too);
# UCX_BENCH_REPS repeats the library's and perftest's measurements that many times, one after
# the other (default 1; the report takes each row's median: single runs of either move 1.3-2.5x
# between runs on the H200); UCX_BENCH_MEM=host measures host memory instead (NumPy arrays for ucxx); UCX_BENCH_PYTHON is
# the Python 3.12 to run ucxx.
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
# connection); network: the path between hosts forced (device memory staged through host buffers);
# tcp: host memory only (UCX_BENCH_MEM=host), to try this script on a machine without a GPU.
declare -A transports=([same_host]="cuda_ipc,cuda_copy,tcp" [network]="tcp,cuda_copy" [tcp]="tcp")

started=$SECONDS
say() { echo "$*" | tee -a "$log"; }
step() { say "== [$((SECONDS - started)) s] $*"; }  # a measurement starts, at this time of the run
n() { echo $(( $1 / scale > 0 ? $1 / scale : 1 )); }
warmup() { echo $(( $1 / 10 > 0 ? $1 / 10 : 1 )); }  # a tenth of the measured iterations

record() {  # name transports json: one line of ucx-bench.jsonl
  echo "{\"set\": \"$1\", \"tls\": \"$2\", \"result\": $3}" | tee -a "$lines" >>"$log"
}

ours() {  # set tls args...
  local set=$1 tls=$2 line
  shift 2
  step "holoscan $set: $*"
  line=$(UCX_TLS=$tls UCX_MODULE_DIR=$ucx/lib/ucx timeout 300 "$bench" "$@" mem="$mem" \
           seconds="$(( 6 / scale > 0 ? 6 / scale : 1 ))" 2>>"$log" |
         tee -a "$log" | grep '^{' | tail -1)
  [ -n "$line" ] && record "$set" "$tls" "$(echo "$line" | sed 's/^{/{"tool": "holoscan", /')"
}

perftest_env() {  # tls: the environment both perftest processes run in
  echo env UCX_TLS="$1" UCX_MODULE_DIR="$ucx/lib/ucx" \
    LD_LIBRARY_PATH="$ucx/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

wait_listening() {  # port: until a perftest server listens on it (2 s at most)
  for _ in $(seq 20); do
    ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return
    sleep 0.1
  done
}

# One perftest pair on localhost, device memory both sides; extra options (-e) after the count.
# Prints the client's "Final:" fields; the server's and client's stderr go to $2 (a log).
perftest_pair() {  # tls log test size iters [options...]
  local tls=$1 errlog=$2 test=$3 size=$4 iters=$5 port=$((20000 + RANDOM % 20000))
  shift 5
  local env
  read -ra env <<<"$(perftest_env "$tls")"
  "${env[@]}" timeout 300 "$ucx/bin/ucx_perftest" -p "$port" "$@" >>"$log" 2>>"$errlog" &
  local server=$!
  wait_listening "$port"
  "${env[@]}" timeout 300 "$ucx/bin/ucx_perftest" 127.0.0.1 -p "$port" -t "$test" \
    -m "$mem,$mem" -s "$size" -n "$iters" -w "$(warmup "$iters")" "$@" 2>>"$errlog" | tee -a "$log" |
    awk '/^Final:/ {print $3, $4, $6, $8}'
  wait "$server"
}

perftest() {  # set tls test size iters [-e]: one measurement of the floor
  local set=$1 tls=$2 test=$3 size=$4 iters=$5 flag=${6:-} final
  step "ucx_perftest $set: $test size=$size iters=$iters $flag"
  final=$(perftest_pair "$tls" "$log" "$test" "$size" "$iters" $flag)
  # Final: iterations, latency 50%ile, average, overall (usec), bandwidth average, overall
  # (MB/s = MiB/s), message rate average, overall.
  if [ -n "$final" ]; then
    set -- $final
    record "$set" "$tls" "{\"tool\": \"ucx_perftest\", \"test\": \"$test\", \"size\": $size, \
\"iters\": $iters, \"error_handling\": $([ "$flag" = -e ] && echo 1 || echo 0), \
\"latency_p50_us\": $1, \"latency_us\": $2, \"bandwidth_MiBps\": $3, \"messages_per_s\": $4}"
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
  step "ucxx $set: size=$size iters=$iters"
  # ucxx loads its own UCX (1.21) from the site folder: the project's UCX must stay out of its way.
  report=$(env -u UCX_MODULE_DIR UCX_TLS="$tls" PYTHONPATH="$ucxx_site${PYTHONPATH:+:$PYTHONPATH}" timeout 300 \
             "$python" -m ucxx.benchmarks.send_recv -o "$([ "$mem" = cuda ] && echo cupy || echo numpy)" --reuse-alloc -n "$size" \
             --n-iter "$iters" --n-warmup-iter "$(warmup "$iters")" -l ucxx-core --progress-mode polling \
             -s 127.0.0.1 --no-detailed-report 2>&1 | tee -a "$log")
  local average median
  average=$(echo "$report" | awk -F'|' '/Latency \(average\)/ {print $2+0}')
  median=$(echo "$report" | awk -F'|' '/Latency \(median\)/ {print $2+0}')
  if [ -n "$average" ]; then
    # ucxx reports half a round trip (ns); its "Bandwidth (average)" is size over that time.
    record "$set" "$tls" "{\"tool\": \"ucxx\", \"test\": \"roundtrip\", \"size\": $size, \
\"iters\": $iters, \"latency_us\": $(awk -v v="$average" 'BEGIN {print v / 1000}'), \
\"latency_p50_us\": $(awk -v v="$median" 'BEGIN {print v / 1000}'), \
\"bandwidth_MiBps\": $(awk -v v="$average" -v s="$size" 'BEGIN {printf "%.1f", s / (v / 1e9) / 1048576}')}"
  fi
}

# The protocols UCX used for a few tensors of each kind, and for perftest's own messages: what the
# ratios rest on (rendezvous scheme, fragments, lanes). UCX prints them to its log when a worker
# ends; only the rows that were used are summarized.
protocols() {  # set tls
  local set=$1 tls=$2 file=$out/ucx-protocols-$1.log logs
  logs=$(mktemp -d)
  : >"$file"
  step "protocols used, $set (rows with a count; the tables in $(basename "$file"))"
  for args in "pingpong size=4096 iters=50 warmup=5" "stream size=1048576 count=50 warmup=5 window=8"; do
    echo "===== holoscan $args" >>"$file"
    UCX_PROTO_INFO=used UCX_LOG_FILE=$logs/%p.log UCX_TLS=$tls UCX_MODULE_DIR=$ucx/lib/ucx \
      timeout 120 "$bench" $args mem="$mem" >/dev/null 2>&1
    cat "$logs"/*.log >>"$file" 2>/dev/null && rm -f "$logs"/*.log
  done
  for run in "ucp_am_lat 4096 50" "ucp_am_bw 1048576 50" "ucp_am_bw 1048576 50 -e"; do
    echo "===== ucx_perftest $run" >>"$file"
    UCX_PROTO_INFO=used UCX_LOG_FILE=$logs/%p.log perftest_pair "$tls" /dev/null $run >/dev/null
    cat "$logs"/*.log >>"$file" 2>/dev/null && rm -f "$logs"/*.log
  done
  rmdir "$logs"
  awk '/^=====/ {print; next} /\| (ucp_context|active message|rendezvous|tag)/ {title = $0; next}
       /\|[ ]+[1-9][0-9]* \|/ {sub(/^.*\] +/, "", title); sub(/^.*\] +/, ""); print "  " title " " $0}' \
    "$file" | tee -a "$log"
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

measure() {  # set tls: the library's rows and their floors, once
  local set=$1 tls=$2
  ours "$set" "$tls" pingpong size=4096 iters="$(n 10000)" warmup="$(n 1000)"
  ours "$set" "$tls" pingpong size=4096 iters="$(n 3000)" warmup="$(n 300)" ready=1
  ours "$set" "$tls" pingpong size=1048576 iters="$(n 1000)" warmup="$(n 100)"
  ours "$set" "$tls" pingpong size=67108864 iters="$(n 30)" warmup="$(n 3)"
  ours "$set" "$tls" stream size=1048576 count="$(n 10000)" warmup="$(n 500)" window=32
  # A stream's warm-up is a stream too (at least 4 tensors, 3 of them posted beside another): the
  # stream hint's protocols are set up by UCX on their first use, once (about 3 ms more in a run of 12 tensors of 64 MiB),
  # which a warm-up of one tensor left to the measured part.
  ours "$set" "$tls" stream size=67108864 count="$(n 60)" warmup="$(( $(n 20) > 4 ? $(n 20) : 4 ))" window=8
  perftest "$set" "$tls" ucp_am_lat 4096 "$(n 5000)"
  perftest "$set" "$tls" ucp_am_lat 1048576 "$(n 500)"
  perftest "$set" "$tls" ucp_am_lat 67108864 "$(n 20)"
  perftest "$set" "$tls" ucp_am_bw 1048576 "$(n 3000)"
  perftest "$set" "$tls" ucp_am_bw 67108864 "$(n 40)"
  perftest "$set" "$tls" ucp_am_lat 4096 "$(n 5000)" -e
  perftest "$set" "$tls" tag_lat 4096 "$(n 5000)" -e
  perftest "$set" "$tls" ucp_am_bw 1048576 "$(n 1000)" -e
  perftest "$set" "$tls" ucp_am_bw 67108864 "$(n 20)" -e
}

for set in ${UCX_BENCH_TRANSPORTS:-same_host network}; do
  tls=${transports[$set]}
  for rep in $(seq "${UCX_BENCH_REPS:-1}"); do
    step "$set: repetition $rep"
    measure "$set" "$tls"
  done
  ucxx "$set" "$tls" 4096 "$(n 5000)"
  ucxx "$set" "$tls" 1048576 "$(n 200)"
  ucxx "$set" "$tls" 67108864 "$(n 10)"
  protocols "$set" "$tls"
done

step "report"
python3 scripts/ucx-bench-report.py "$lines" "$out/ucx-bench.json" | tee -a "$log"
