#!/usr/bin/env python3
"""Puts the two-GPU peers of one run side by side: JSON lines of {"peer", "metric", "bytes",
"value"} from holoscan_dlpack_nccl_floor (the floor), torch_distributed_bench.py and the library's
transport, as a Markdown table with each row's ratios to the floor and to torch.distributed.
Ratios are computed only between figures of the files given, i.e. of one run.

Usage: two-gpu-report.py FILE.jsonl [FILE.jsonl ...]
       two-gpu-report.py --convert-ucx PEER FILE   (holoscan_dlpack_ucx_bench's JSON to those lines)
"""
import json
import sys

FLOOR = "nccl"
PEER = "torch.distributed"
HIGHER_IS_BETTER = {"bandwidth_gbps": True, "stream_tensors_per_s": True, "latency_us": False}
UNITS = {"latency_us": "µs", "bandwidth_gbps": "GB/s", "stream_tensors_per_s": "tensors/s"}


def read(paths):
    rows = {}
    for path in paths:
        with open(path) as lines:
            for line in lines:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                item = json.loads(line)
                rows.setdefault((item["metric"], item["bytes"]), {})[item["peer"]] = item["value"]
    return rows


def size(nbytes):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def ratio(value, reference, metric):
    if value is None or not reference:
        return "–"
    # Always "how many times the reference's cost": < 1 is faster, whatever the unit.
    return f"{(reference / value if HIGHER_IS_BETTER[metric] else value / reference):.2f}"


def convert_ucx(peer, path):
    """holoscan_dlpack_ucx_bench prints one JSON object per run: pingpong gives the latency, a
    stream its bandwidth, and a verified stream (verify=1) the tensors per second."""
    with open(path) as lines:
        for line in lines:
            if not line.startswith("{"):
                continue
            run = json.loads(line)
            size = run["size"]
            if run["test"] == "pingpong":
                rows = [("latency_us", run["latency_us"])]
            elif run.get("verify"):
                rows = [("stream_tensors_per_s", run["tensors_per_s"])]
            else:
                rows = [("bandwidth_gbps", run["bandwidth_MiBps"] * (1 << 20) / 1e9)]
            for metric, value in rows:
                print(json.dumps({"peer": peer, "metric": metric, "bytes": size, "value": value}))


def main(paths):
    rows = read(paths)
    peers = sorted({peer for row in rows.values() for peer in row} - {FLOOR, PEER})
    header = ["metric", "size", f"{FLOOR} (floor)", PEER] + peers
    header += [f"{p} cost / floor" for p in peers] + [f"{p} cost / {PEER}" for p in peers]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for (metric, nbytes), row in sorted(rows.items()):
        cells = [f"{metric} ({UNITS.get(metric, '')})", size(nbytes)]
        cells += [f"{row[p]:.2f}" if p in row else "–" for p in [FLOOR, PEER] + peers]
        cells += [ratio(row.get(p), row.get(FLOOR), metric) for p in peers]
        cells += [ratio(row.get(p), row.get(PEER), metric) for p in peers]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--convert-ucx":
        convert_ucx(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1:])
