#!/usr/bin/env bash
# Session call 4: the release-queue changes built and tested on the GPU; the hop before/after
# (main 6861192 vs the work tree), pinned to one CPU, then on two CPUs and unpinned; the pipeline.
set -u
mkdir -p $OUT/keep
PYTHON_BENCH=0 timeout 260 scripts/gpu-check.sh build test 2>&1 | grep -E "ctest|build|Failed|Timeout" | head -20
cp $OUT/ctest.log $OUT/keep/ 2>/dev/null
PIN_CPU=3 ROUNDS=6 CUDA_ARCHITECTURES=90 timeout 200 scripts/compare-benchmarks.sh 6861192 '' \
  'Handoff|Hop3|Floor_EventRecord|Floor_RecordWaitPair' > $OUT/keep/compare-pin3.txt 2>&1
cat $OUT/keep/compare-pin3.txt
for pin in 3,5 none; do
  for r in 1 2 3; do
    for side in before after; do
      pre=""; [ $pin != none ] && pre="taskset -c $pin"
      timeout 30 $pre build/compare/$side/benchmarks/holoscan_dlpack_benchmarks --benchmark_filter='Hop3|Handoff_Library' \
        --benchmark_min_time=0.5s --benchmark_format=json > $OUT/keep/pin${pin/,/-}-$side-$r.json 2>/dev/null
    done
  done
done
python3 - $OUT/keep <<'PY'
import json, statistics, sys, glob
d = sys.argv[1]
for pin in ("3-5", "none"):
    rows = {}
    for side in ("before", "after"):
        for f in sorted(glob.glob(f"{d}/pin{pin}-{side}-*.json")):
            try:
                for b in json.load(open(f))["benchmarks"]:
                    rows.setdefault(b["name"], {}).setdefault(side, []).append(b["real_time"])
            except Exception as e:
                print("bad", f, e)
    for name, s in rows.items():
        if len(s) == 2:
            b, a = statistics.median(s["before"]), statistics.median(s["after"])
            print(f"pin={pin:5} {name:28} before {b:8.1f} after {a:8.1f} after/before {a/b:.3f}  ({s['before']} | {s['after']})")
    print()
PY
timeout 100 build/gpu/benchmarks/holoscan_dlpack_pipeline_benchmark 3 $OUT/keep/pipeline.json > $OUT/keep/pipeline.txt 2>&1
echo "pipeline exit $?"; grep -A14 "^kernel" $OUT/keep/pipeline.txt | head -16
