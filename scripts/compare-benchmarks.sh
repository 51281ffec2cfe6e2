#!/usr/bin/env bash
# Compares the benchmark rows of two revisions on this machine: builds both (Release, benchmarks
# only) and runs them alternately, ROUNDS times each (default 5), so that both see the same load;
# prints each row's median and after/before. The default FILTER is the host rows, which need no
# GPU; on a GPU machine a FILTER such as 'Handoff|Hop3|SetReadiness|SetDeallocation|Synchronize'
# compares the stream hooks. CUDA_ARCHITECTURES (e.g. 90) is passed on when set. PIN_CPU (a CPU
# list for taskset) runs both sides on the same cores: on the H200 machine a process's hook rows
# land in one of two modes (~200 or ~350 ns for an event record) by where it is scheduled.
# BENCH_TARGET (default holoscan_dlpack_benchmarks) picks the benchmark binary, e.g.
# holoscan_dlpack_zero_cost_benchmarks for the rows over a CUDA table that costs nothing.
# Usage: compare-benchmarks.sh BEFORE_REV [AFTER_REV (empty: the work tree)] [FILTER]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
before=${1:?usage: compare-benchmarks.sh BEFORE_REV [AFTER_REV] [FILTER]}
after=${2:-}
filter=${3:-'Host4D|TensorCopyAndDestroy$|RetainRelease$|PoolAllocateAndRelease_Host|PoolBlock|WrappedMemory|Floor_AtomicPair$'}
rounds=${ROUNDS:-5}
target=${BENCH_TARGET:-holoscan_dlpack_benchmarks}
scratch=build/compare
rm -rf "$scratch" && mkdir -p "$scratch"
prefix="$PWD/.deps/dlpack-1.3/usr;$PWD/.deps/expected/usr"
build() {  # name source-dir
  cmake -S "$2" -B "$scratch/$1" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$prefix" \
    -DHOLOSCAN_DLPACK_BUILD_TESTS=OFF -DHOLOSCAN_DLPACK_BUILD_GPU_TESTS=OFF \
    -DHOLOSCAN_DLPACK_BUILD_PYTHON=OFF -DHOLOSCAN_DLPACK_BUILD_EXAMPLES=OFF \
    ${CUDA_ARCHITECTURES:+-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHITECTURES} >/dev/null
  cmake --build "$scratch/$1" --target "$target" -j "$(nproc)" >/dev/null
}
git worktree add -f --detach "$scratch/before-src" "$before" >/dev/null
trap 'git worktree remove --force "$scratch/before-src" >/dev/null 2>&1 || true' EXIT
ln -s "$PWD/.deps" "$scratch/before-src/.deps"
build before "$scratch/before-src"
if [ -n "$after" ]; then
  git worktree add -f --detach "$scratch/after-src" "$after" >/dev/null
  ln -s "$PWD/.deps" "$scratch/after-src/.deps"
  build after "$scratch/after-src"
  git worktree remove --force "$scratch/after-src" >/dev/null
else
  build after .
fi
for round in $(seq "$rounds"); do
  for side in before after; do
    ${PIN_CPU:+taskset -c "$PIN_CPU"} "$scratch/$side/benchmarks/$target" --benchmark_filter="$filter" \
      --benchmark_min_time=0.5 --benchmark_format=json >"$scratch/$side-$round.json" 2>/dev/null
  done
done
python3 - "$scratch" "$rounds" <<'PY'
import json, statistics, sys
scratch, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
for side in ("before", "after"):
    for r in range(1, rounds + 1):
        for b in json.load(open(f"{scratch}/{side}-{r}.json"))["benchmarks"]:
            rows.setdefault(b["name"], {}).setdefault(side, []).append(b["real_time"])
print(f"{'benchmark':45} {'before ns':>10} {'after ns':>10} {'after/before':>13}")
for name, sides in rows.items():
    if len(sides) == 2:
        b, a = statistics.median(sides["before"]), statistics.median(sides["after"])
        print(f"{name:45} {b:10.2f} {a:10.2f} {a / b:13.3f}")
PY
