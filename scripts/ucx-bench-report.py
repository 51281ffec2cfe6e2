#!/usr/bin/env python3
"""Ratios of one scripts/ucx-bench.sh run: holoscan tensors over UCX against ucx_perftest (the
floor on the same transports) and against ucxx (round trips of CuPy arrays), per transport set.

Usage: ucx-bench-report.py RUN.jsonl OUT.json -- prints a table, writes every measurement, the
ratios and whether each target was met into OUT.json. Only numbers of this one run are compared.
"""
import json
import sys

# (name, numerator, denominator, target, is the ratio at least (>=) or at most (<=) the target)
TARGETS = [
    ("latency 4 KiB vs ucx_perftest", ("holoscan", "pingpong", 4096, 0, "latency_us"),
     ("ucx_perftest", "ucp_am_lat", 4096, None, "latency_us"), 1.3, "<="),
    ("latency 4 KiB p50 vs ucx_perftest", ("holoscan", "pingpong", 4096, 0, "latency_p50_us"),
     ("ucx_perftest", "ucp_am_lat", 4096, None, "latency_p50_us"), 1.3, "<="),
    ("bandwidth 1 MiB vs ucx_perftest", ("holoscan", "stream", 1048576, 0, "bandwidth_MiBps"),
     ("ucx_perftest", "ucp_am_bw", 1048576, None, "bandwidth_MiBps"), 0.9, ">="),
    ("bandwidth 64 MiB vs ucx_perftest", ("holoscan", "stream", 67108864, 0, "bandwidth_MiBps"),
     ("ucx_perftest", "ucp_am_bw", 67108864, None, "bandwidth_MiBps"), 0.9, ">="),
    ("round trip 4 KiB vs ucxx", ("holoscan", "pingpong", 4096, 0, "latency_us"),
     ("ucxx", "roundtrip", 4096, None, "latency_us"), 1.0, "<"),
    ("round trip 1 MiB vs ucxx", ("holoscan", "pingpong", 1048576, 0, "latency_us"),
     ("ucxx", "roundtrip", 1048576, None, "latency_us"), 1.0, "<"),
    ("round trip 64 MiB vs ucxx", ("holoscan", "pingpong", 67108864, 0, "latency_us"),
     ("ucxx", "roundtrip", 67108864, None, "latency_us"), 1.0, "<"),
]
# Reported, no target: what the readiness gate and the delivery round trip cost.
INFO = [
    ("latency 4 KiB with readiness vs without", ("holoscan", "pingpong", 4096, 1, "latency_us"),
     ("holoscan", "pingpong", 4096, 0, "latency_us")),
    ("round trip 1 MiB vs ucx_perftest", ("holoscan", "pingpong", 1048576, 0, "latency_us"),
     ("ucx_perftest", "ucp_am_lat", 1048576, None, "latency_us")),
    ("round trip 64 MiB vs ucx_perftest", ("holoscan", "pingpong", 67108864, 0, "latency_us"),
     ("ucx_perftest", "ucp_am_lat", 67108864, None, "latency_us")),
]


def find(rows, tool, test, size, ready, field):
    for row in rows:
        r = row["result"]
        if (r.get("tool") == tool and r.get("test") == test and r.get("size") == size
                and (ready is None or r.get("ready", 0) == ready) and field in r):
            return r[field]
    return None


def ratio(rows, numerator, denominator):
    a, b = find(rows, *numerator), find(rows, *denominator)
    return a / b if a is not None and b else None


def main(source, target):
    rows = [json.loads(line) for line in open(source) if line.strip()]
    report = {"measurements": rows, "sets": {}}
    for name in dict.fromkeys(row["set"] for row in rows):
        subset = [row for row in rows if row["set"] == name]
        entry = {"tls": subset[0]["tls"], "targets": {}, "info": {}}
        print(f"== {name} (UCX_TLS={entry['tls']})")
        for label, numerator, denominator, goal, sense in TARGETS:
            value = ratio(subset, numerator, denominator)
            met = None if value is None else {"<=": value <= goal, ">=": value >= goal,
                                              "<": value < goal}[sense]
            entry["targets"][label] = {"ratio": value, "target": f"{sense} {goal}", "met": met}
            shown = "missing" if value is None else f"{value:.3f}"
            print(f"  {label:40s} {shown:>8s}  target {sense} {goal}  "
                  f"{'-' if met is None else ('met' if met else 'MISSED')}")
        for label, numerator, denominator in INFO:
            value = ratio(subset, numerator, denominator)
            entry["info"][label] = value
            print(f"  {label:40s} {'missing' if value is None else f'{value:.3f}':>8s}")
        report["sets"][name] = entry
    with open(target, "w") as out:
        json.dump(report, out, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
