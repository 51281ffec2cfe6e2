#!/usr/bin/env python3
"""Prints each hot path's time as a ratio against the floor measured in the same benchmark run.

Usage: bench-report.py BENCHMARK_JSON. Uses the median aggregate when repetitions were run.
"""
import json
import sys

# Our row -> the floor rows (summed) that the same work costs when done by hand with raw calls.
FLOORS = {
    "BM_SetReadinessStream": ["BM_Floor_EventRecord"],
    "BM_SetDeallocationStream": ["BM_Floor_EventRecord"],
    "BM_SynchronizeForConsumer_OtherStream": ["BM_Floor_StreamWaitEvent"],
    "BM_SynchronizeForConsumer_SameStream": ["BM_Floor_StreamWaitEvent"],
    "BM_HandoffLifecycle": ["BM_Floor_RecordWaitPair", "BM_Floor_EventRecord",
                            "BM_Floor_EventQueryDone"],
    "BM_RetainRelease": ["BM_Floor_AtomicPair"],
    "BM_RetainRelease/real_time/threads:16": ["BM_Floor_AtomicPair/real_time/threads:16"],
    "BM_TensorCopyAndDestroy": ["BM_Floor_AtomicPair"],
    "BM_TensorCopyAndDestroy/real_time/threads:16": ["BM_Floor_AtomicPair/real_time/threads:16"],
}
# Peer costs measured on the H200 in other runs (FIELD_NOTES.md): context, not a same-run floor.
PEERS = {
    "BM_ImportAndDestroy_Host4D": ("at::fromDLPackVersioned + destruction, torch 2.11", 464.0),
    "BM_ExportAndDelete_Host4D": ("at::toDLPackVersioned + deleter, torch 2.11", 60.0),
    "BM_SynchronizeForConsumer_OtherStream": ("c10 CUDAEvent record + block, reused event", 2100.0),
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


def main():
    times, extras = load(sys.argv[1])
    print(f"{'benchmark':48} {'ns':>9}  {'floor ns':>9}  {'ratio':>6}  notes")
    for name, ns in times.items():
        if name.startswith("BM_Floor_"):
            shown = "skipped" if ns is None else f"{ns:9.1f}"
            print(f"{name:48} {shown:>9}  {'':>9}  {'':>6}  floor")
            continue
        if ns is None:
            print(f"{name:48} {'skipped':>9}  {'':>9}  {'':>6}  {extras.get(name, '')}")
            continue
        floors = FLOORS.get(name, [])
        floor = sum(times.get(f) or 0.0 for f in floors) if floors else None
        ratio = f"{ns / floor:6.2f}" if floor else ""
        floor_text = f"{floor:9.1f}" if floor else ""
        notes = [extras.get(name, "")]
        if name in PEERS:
            label, peer_ns = PEERS[name]
            notes.append(f"peer {label}: {peer_ns:.0f} ns (x{ns / peer_ns:.2f})")
        print(f"{name:48} {ns:9.1f}  {floor_text:>9}  {ratio:>6}  {'; '.join(n for n in notes if n)}")


if __name__ == "__main__":
    main()
