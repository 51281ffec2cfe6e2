#!/usr/bin/env python3
"""DLPack handoffs from Python, holoscan_dlpack against the peers, in one process.

Each case is one handoff plus dropping its result (what a pipeline stage pays per tensor), timed
over a batch; the batches of all cases are interleaved, repetition by repetition, and the median
per case is reported. "Ratio" divides a case by the faster of the two peer handoffs of the same
kind (same stream or across streams); the target is 0.5 or less.

    python3 benchmarks/python_bench.py [--batch N] [--repetitions R]
"""

import argparse
import gc
import statistics
import sys
import time


def measure(cases, batch, repetitions):
    """Median ns per call of each case, the repetitions of all cases interleaved."""
    samples = {name: [] for name in cases}
    for _ in range(repetitions):
        for name, call in cases.items():
            call()  # warm: first calls create events and caches
            start = time.perf_counter_ns()
            for _ in range(batch):
                call()
            samples[name].append((time.perf_counter_ns() - start) / batch)
    return {name: statistics.median(values) for name, values in samples.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--repetitions", type=int, default=7)
    args = parser.parse_args()
    try:
        import cupy
        import torch
    except ImportError as error:
        print(f"python_bench: needs torch and cupy ({error})")
        return 1
    if not torch.cuda.is_available():
        print("python_bench: no CUDA device")
        return 1
    import holoscan_dlpack as hd

    x = torch.ones(16, 32, 8, 4, device="cuda")  # small: the handoff, not the data, is measured
    a = cupy.ones((16, 32, 8, 4), dtype=cupy.float32)
    other = torch.cuda.Stream()
    cupy_other = cupy.cuda.Stream(non_blocking=True)
    ours = hd.from_dlpack(x)  # readiness on torch's current stream, the legacy default
    torch.cuda.synchronize()

    def on(context, call):
        """`call` with the current stream switched by a fresh `context()` (in every case alike)."""
        def run():
            with context():
                call()
        return run

    torch_other = lambda: torch.cuda.stream(other)  # noqa: E731

    same = {
        "hd.from_dlpack(torch)": lambda: hd.from_dlpack(x),
        "torch.from_dlpack(hd)": lambda: torch.from_dlpack(ours),
        "peer torch.from_dlpack(cupy)": lambda: torch.from_dlpack(a),
        "peer cupy.from_dlpack(torch)": lambda: cupy.from_dlpack(x),
    }
    across = {
        "hd.from_dlpack(torch, stream=other)": lambda: hd.from_dlpack(x, stream=other),
        "torch.from_dlpack(hd) on other": on(torch_other, lambda: torch.from_dlpack(ours)),
        "peer torch.from_dlpack(cupy) on other": on(torch_other, lambda: torch.from_dlpack(a)),
        "peer cupy.from_dlpack(torch) on other": on(lambda: cupy_other,
                                                    lambda: cupy.from_dlpack(x)),
    }
    # The producer's share of a handoff: what a consumer's from_dlpack spends in __dlpack__.
    version = (1, 0)
    producer = {
        "hd Tensor.__dlpack__(stream=1)": lambda: ours.__dlpack__(stream=1, max_version=version),
        "peer torch Tensor.__dlpack__(stream=1)": lambda: x.__dlpack__(stream=1,
                                                                       max_version=version),
        "peer cupy ndarray.__dlpack__(stream=1)": lambda: a.__dlpack__(stream=1,
                                                                       max_version=version),
    }
    groups = (same, across, producer)
    gc.disable()  # collections would land in random batches
    try:
        medians = measure({name: call for group in groups for name, call in group.items()},
                          args.batch, args.repetitions)
    finally:
        gc.enable()
    torch.cuda.synchronize()
    hd.flush_deferred_releases()

    api = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None)
    print(f"python_bench: torch {torch.__version__} (C exchange API: "
          f"{'yes' if api is not None else 'no'}), cupy {cupy.__version__}, "
          f"{torch.cuda.get_device_name()}, batch {args.batch} x {args.repetitions} "
          "interleaved repetitions, median ns per handoff (result dropped)")
    print(f"{'case':44} {'ns':>9} {'ratio':>7}")  # ratio: against the group's faster peer
    worst = 0.0
    for group in groups:
        peer = min(medians[name] for name in group if name.startswith("peer"))
        for name in group:
            ratio = medians[name] / peer
            mark = "" if name.startswith("peer") else ("  ok" if ratio <= 0.5 else "  OVER 0.5")
            if not name.startswith("peer"):
                worst = max(worst, ratio)
            print(f"{name:44} {medians[name]:9.0f} {ratio:7.2f}{mark}")
    print(f"worst ratio against the faster peer: {worst:.2f} (target <= 0.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
