#!/usr/bin/env python3
"""Prints each benchmark's time beside the floor and the peer measured in the same run.

Usage: bench-report.py BENCHMARK_JSON... [--markdown]. Uses the median aggregate when repetitions
were run. A row is taken from the first file that has it, and its floor and its peer from that
same file (one process, one run): no figure is typed in, none is mixed across processes.
"""
import json
import sys

# Our row -> (the floor rows, summed, that the same work costs done by hand with raw calls;
#              the peer row doing the same work, or None; the target against the floor;
#              the target against the peer, as "at most this fraction of the peer's time").
ROWS = {
    "BM_Hop3_Library": (["BM_Hop3_Floor"], "BM_Torch_Hop3", 1.25, 1 / 1.5),
    "BM_Handoff_Library": (["BM_Floor_RecordWaitPair"], "BM_Torch_Handoff_C10Event", 1.15, 1 / 2.5),
    "BM_SetReadinessStream": (["BM_Floor_EventRecord"], None, 1.15, None),
    "BM_SetDeallocationStream": (["BM_Floor_EventRecord"], None, 1.15, None),
    "BM_SynchronizeForConsumer_OtherStream": (["BM_Floor_StreamWaitEvent"], None, 1.1, None),
    "BM_SynchronizeForConsumer_SameStream": ([], None, None, None),
    "BM_HandoffLifecycle": (["BM_Floor_RecordWaitPair", "BM_Floor_EventRecord"], None, None, None),
    "BM_RetainRelease": (["BM_Floor_AtomicPair"], None, None, None),
    "BM_RetainRelease/real_time/threads:16": (["BM_Floor_AtomicPair/real_time/threads:16"], None,
                                              None, None),
    "BM_TensorCopyAndDestroy": (["BM_Floor_AtomicPair"], None, 1.5, None),
    "BM_TensorCopyAndDestroy/real_time/threads:16": (
        ["BM_Floor_AtomicPair/real_time/threads:16"], None, 1.5, None),
    "BM_ImportAndDestroy_Host4D": ([], "BM_Torch_ImportAndDestroy_Host4D", None, 0.4),
    "BM_ExportAndDelete_Host4D": ([], "BM_Torch_ExportAndDelete_Host4D", None, 1.0),
}


def load(path):
    with open(path) as f:
        rows = json.load(f)["benchmarks"]
    times, extras = {}, {}
    for row in rows:
        name = row.get("run_name", row["name"])
        if row.get("error_occurred"):
            times[name] = None
            extras[name] = row.get("error_message", "error")
            continue
        if row.get("run_type") == "aggregate" and row.get("aggregate_name") != "median":
            continue
        times[name] = row["real_time"] if "real_time" in name else row["cpu_time"]
        if "allocs_per_iter" in row:
            extras[name] = f"allocs/iter {row['allocs_per_iter']:.2f}"
    return times, extras


def verdict(ratio, target):
    if ratio is None or target is None:
        return ""
    return "meets" if ratio <= target else "MISSES"


def main():
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    markdown = "--markdown" in sys.argv[1:]
    runs = [load(path) for path in paths]
    header = ["operation", "ns", "floor ns", "x floor", "target", "peer ns", "x peer", "target",
              "notes"]
    lines = []
    for name, (floors, peer, floor_target, peer_target) in ROWS.items():
        found = next((run for run in runs if run[0].get(name) is not None), None)
        if found is None:
            continue
        times, extras = found
        ns = times[name]
        floor = sum(times.get(f) or 0.0 for f in floors) if floors else None
        floor_ratio = ns / floor if floor else None
        peer_ns = times.get(peer) if peer else None
        peer_ratio = ns / peer_ns if peer_ns else None
        lines.append([
            name, f"{ns:.1f}",
            f"{floor:.1f}" if floor else "",
            f"{floor_ratio:.2f}" if floor_ratio else "",
            f"<= {floor_target} {verdict(floor_ratio, floor_target)}" if floor_target else "",
            f"{peer_ns:.1f}" if peer_ns else "",
            f"{peer_ratio:.2f}" if peer_ratio else "",
            f"<= {peer_target:.2f} {verdict(peer_ratio, peer_target)}" if peer_target else "",
            extras.get(name, ""),
        ])
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for line in lines:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(h), *(len(l[i]) for l in lines)) if lines else len(h)
                  for i, h in enumerate(header)]
        print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
        for line in lines:
            print("  ".join(c.ljust(w) for c, w in zip(line, widths)))
    for path, (times, extras) in zip(paths, runs):
        print()
        print(f"raw rows of {path} (median ns):")
        for name, ns in times.items():
            shown = "skipped" if ns is None else f"{ns:.1f}"
            print(f"  {name:52} {shown:>10}  {extras.get(name, '')}")


if __name__ == "__main__":
    main()
