#!/usr/bin/env bash
# Session call 2: UCX rows repeated three times (medians), beside perftest and ucxx.
set -u
mkdir -p $OUT/keep
UCX_BENCH_REPS=3 UCX_BENCH_SCALE=2 timeout 560 scripts/ucx-bench.sh > $OUT/keep/ucx-stdout.txt 2>&1
echo "rc $?"
cp $OUT/ucx-bench.json $OUT/ucx-bench.txt $OUT/keep/ 2>/dev/null
grep -E "target|vs |median" $OUT/keep/ucx-stdout.txt | tail -60
rm -f $OUT/ucx-protocols-*.log
