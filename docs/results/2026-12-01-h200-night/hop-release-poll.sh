#!/usr/bin/env bash
# Session call 3: is the hop's extra time on the H200 the release thread's driver calls?
# Same binary, the release thread's poll interval and the CPUs varied, alternating.
set -u
mkdir -p $OUT/keep
{ cmake --preset gpu >/dev/null && cmake --build --preset gpu --target holoscan_dlpack_benchmarks -j 16 >/dev/null; } || { echo build failed; exit 1; }
b=build/gpu/benchmarks/holoscan_dlpack_benchmarks
for round in 1 2; do
  for pin in 3 3,5 none; do
    for poll in 50 200 1000; do
      if [ $pin = none ]; then pre=""; else pre="taskset -c $pin"; fi
      HOLOSCAN_DLPACK_RELEASE_POLL_US=$poll $pre $b --benchmark_filter='Hop3|Handoff_Library|Floor_RecordWaitPair|Floor_EventRecord' \
        --benchmark_min_time=0.5s --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
        --benchmark_format=json > $OUT/keep/r$round-pin$pin-poll$poll.json 2>/dev/null
      python3 - $OUT/keep/r$round-pin$pin-poll$poll.json $round $pin $poll <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
m={b['run_name']:b for b in d['benchmarks'] if b.get('aggregate_name')=='median'}
g=lambda n:m.get(n,{}).get('real_time',float('nan'))
h=m.get('BM_Hop3_Library',{})
print(f"r{sys.argv[2]} pin={sys.argv[3]:5} poll={sys.argv[4]:5} rec={g('BM_Floor_EventRecord'):7.1f} pair={g('BM_Floor_RecordWaitPair'):7.1f} hopfloor={g('BM_Hop3_Floor'):7.1f} hop={g('BM_Hop3_Library'):7.1f} ratio={g('BM_Hop3_Library')/g('BM_Hop3_Floor'):.3f} handoff={g('BM_Handoff_Library'):7.1f} created={h.get('events_created',-1)} pending={h.get('pending_at_end',-1)}")
PY
    done
  done
done
