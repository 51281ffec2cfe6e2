#!/usr/bin/env python3
"""Ratios of one scripts/ucx-bench.sh run: holoscan tensors over UCX against ucx_perftest (the
floor on the same transports: as it runs by default, and with -e, endpoints that handle peer
failure as the library's do) and against ucxx (round trips of CuPy arrays), per transport set.

Usage: ucx-bench-report.py RUN.jsonl OUT.json -- prints every measurement and a table of ratios,
writes both, and whether each target was met, into OUT.json. Only numbers of this one run are
compared.
"""
import json
import statistics
import sys

MiB = 1048576


def ours(test, size, field, ready=0):
    return ("holoscan", test, size, {"ready": ready}, field)


def floor(test, size, field, error_handling=0):
    return ("ucx_perftest", test, size, {"error_handling": error_handling}, field)


def ucxx(size, field):
    return ("ucxx", "roundtrip", size, {}, field)


# (name, numerator, denominator, target, is the ratio at least (>=), above (>) or at most (<=))
# The targets: bandwidth >= 90 % of ucx_perftest from 1 MiB, latency <= 1.3x its, and a
# stream of tensors faster than ucxx (whose benchmark has no stream: its round trips' bandwidth).
TARGETS = [
    ("latency 4 KiB vs ucx_perftest", ours("pingpong", 4096, "latency_us"),
     floor("ucp_am_lat", 4096, "latency_us"), 1.3, "<="),
    ("latency 4 KiB p50 vs ucx_perftest", ours("pingpong", 4096, "latency_p50_us"),
     floor("ucp_am_lat", 4096, "latency_p50_us"), 1.3, "<="),
    ("bandwidth 1 MiB vs ucx_perftest", ours("stream", MiB, "bandwidth_MiBps"),
     floor("ucp_am_bw", MiB, "bandwidth_MiBps"), 0.9, ">="),
    ("bandwidth 64 MiB vs ucx_perftest", ours("stream", 64 * MiB, "bandwidth_MiBps"),
     floor("ucp_am_bw", 64 * MiB, "bandwidth_MiBps"), 0.9, ">="),
    ("stream 1 MiB vs ucxx round trips", ours("stream", MiB, "bandwidth_MiBps"),
     ucxx(MiB, "bandwidth_MiBps"), 1.0, ">"),
    ("stream 64 MiB vs ucxx round trips", ours("stream", 64 * MiB, "bandwidth_MiBps"),
     ucxx(64 * MiB, "bandwidth_MiBps"), 1.0, ">"),
]
# Reported, no target: the floors that do what the library must (handle peer failure; land data
# in the receiver's device memory), ucxx's round trips, and what readiness costs.
INFO = [
    ("latency 4 KiB vs ucx_perftest -e", ours("pingpong", 4096, "latency_us"),
     floor("ucp_am_lat", 4096, "latency_us", 1)),
    ("latency 4 KiB vs tag_lat -e (lands)", ours("pingpong", 4096, "latency_us"),
     floor("tag_lat", 4096, "latency_us", 1)),
    ("bandwidth 1 MiB vs ucx_perftest -e", ours("stream", MiB, "bandwidth_MiBps"),
     floor("ucp_am_bw", MiB, "bandwidth_MiBps", 1)),
    ("bandwidth 64 MiB vs ucx_perftest -e", ours("stream", 64 * MiB, "bandwidth_MiBps"),
     floor("ucp_am_bw", 64 * MiB, "bandwidth_MiBps", 1)),
    ("round trip 4 KiB vs ucxx", ours("pingpong", 4096, "latency_us"), ucxx(4096, "latency_us")),
    ("round trip 1 MiB vs ucxx", ours("pingpong", MiB, "latency_us"), ucxx(MiB, "latency_us")),
    ("round trip 64 MiB vs ucxx", ours("pingpong", 64 * MiB, "latency_us"),
     ucxx(64 * MiB, "latency_us")),
    ("round trip 1 MiB vs ucx_perftest", ours("pingpong", MiB, "latency_us"),
     floor("ucp_am_lat", MiB, "latency_us")),
    ("round trip 64 MiB vs ucx_perftest", ours("pingpong", 64 * MiB, "latency_us"),
     floor("ucp_am_lat", 64 * MiB, "latency_us")),
    ("latency 4 KiB with readiness vs without", ours("pingpong", 4096, "latency_us", ready=1),
     ours("pingpong", 4096, "latency_us")),
]
SENSES = {"<=": lambda v, g: v <= g, ">=": lambda v, g: v >= g, ">": lambda v, g: v > g}


def find(rows, tool, test, size, match, field):
    """The median of the matching measurements (scripts/ucx-bench.sh may repeat each)."""
    values = [row["result"][field] for row in rows
              if row["result"].get("tool") == tool and row["result"].get("test") == test
              and row["result"].get("size") == size and field in row["result"]
              and all(row["result"].get(key, 0) == value for key, value in match.items())]
    return statistics.median(values) if values else None


def ratio(rows, numerator, denominator):
    a, b = find(rows, *numerator), find(rows, *denominator)
    return a / b if a is not None and b else None


def describe(result):
    """One measurement as a line: what ran, then its latency and bandwidth."""
    what = [result.get("tool", "?"), result.get("test", "?"), f"{result.get('size', 0)} B"]
    what += [key for key in ("ready", "error_handling") if result.get(key)]
    shown = (("bandwidth_MiBps", "MiB/s"),) if result.get("test", "").endswith("_bw") else (
        ("latency_us", "us"), ("latency_p50_us", "us p50"), ("bandwidth_MiBps", "MiB/s"))
    numbers = [f"{result[key]:,.1f} {unit}" for key, unit in shown if key in result]
    return f"  {' '.join(map(str, what)):45s} {'  '.join(numbers)}"


def main(source, target):
    rows = [json.loads(line) for line in open(source) if line.strip()]
    report = {"measurements": rows, "sets": {}}
    for name in dict.fromkeys(row["set"] for row in rows):
        subset = [row for row in rows if row["set"] == name]
        entry = {"tls": subset[0]["tls"], "targets": {}, "info": {}}
        print(f"== {name} (UCX_TLS={entry['tls']})")
        for row in subset:
            print(describe(row["result"]))
        for label, numerator, denominator, goal, sense in TARGETS:
            value = ratio(subset, numerator, denominator)
            met = None if value is None else SENSES[sense](value, goal)
            entry["targets"][label] = {"ratio": value, "target": f"{sense} {goal}", "met": met}
            shown = "missing" if value is None else f"{value:.3f}"
            print(f"  {label:42s} {shown:>8s}  target {sense} {goal}  "
                  f"{'-' if met is None else ('met' if met else 'MISSED')}")
        for label, numerator, denominator in INFO:
            value = ratio(subset, numerator, denominator)
            entry["info"][label] = value
            print(f"  {label:42s} {'missing' if value is None else f'{value:.3f}':>8s}")
        report["sets"][name] = entry
    with open(target, "w") as out:
        json.dump(report, out, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
