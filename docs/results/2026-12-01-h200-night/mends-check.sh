#!/usr/bin/env bash
# Session call 1: the unrun mend commits built and tested on the GPU; the hop changes before/after, pinned.
set -u
PYTHON_BENCH=0 timeout 300 scripts/gpu-check.sh build test 2>&1 | tail -20
mkdir -p $OUT/keep
cp $OUT/ctest.log $OUT/keep/ 2>/dev/null
PIN_CPU=3 ROUNDS=8 CUDA_ARCHITECTURES=90 timeout 280 scripts/compare-benchmarks.sh ce318a1 '' \
  'Handoff|Hop3|SetReadiness|SetDeallocation|Synchronize|Floor_EventRecord|Floor_StreamWaitEvent|Floor_RecordWaitPair' \
  > $OUT/keep/compare-hop-pinned.txt 2>&1
cat $OUT/keep/compare-hop-pinned.txt
