#!/usr/bin/env python3
"""Cross-process tensors: holoscan-dlpack against PyTorch's torch.multiprocessing, same machine,
same run, same tensor shape.

Two measures, each after a warm-up:
  round trip  one producer and one consumer process; the producer sends a tensor and waits until
              the consumer has given it back (holoscan: the Release arrives; torch: the consumer
              acknowledges after dropping it), so it is the per-tensor cost of export + import +
              release.
  pipeline    producer -> relay (adds one into a new tensor) -> sink (checks), free running with
              at most `blocks` tensors in flight per hop (holoscan: pool blocks; torch: bounded
              queues); tensors per second.

holoscan-dlpack's side is the C++ demo binary (holoscan_dlpack_ipc_demo roundtrip|pipeline);
torch's side runs here, with CUDA tensors sent through torch.multiprocessing queues. Each measure
is repeated `--reps` times, alternating the two, and the medians are compared.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

DEFAULT_BINARY = os.path.join(os.path.dirname(__file__), "..", "build", "gpu", "examples",
                              "holoscan_dlpack_ipc_demo")
WARM_UP = 100


def run_holoscan(binary, mode, count, elements, blocks):
    out = subprocess.run([binary, mode, f"count={count}", f"elements={elements}",
                          f"blocks={blocks}"], capture_output=True, text=True, timeout=600)
    match = re.search(r"RESULT mode=\w+ .*?(us_per_tensor|tensors_per_s)=([\d.]+).*ok=(\d)",
                      out.stdout)
    if out.returncode != 0 or not match or match.group(3) != "1":
        sys.stderr.write(out.stdout + out.stderr)
        raise RuntimeError(f"holoscan {mode} failed (exit {out.returncode})")
    return float(match.group(2))


# ---- torch side (functions at module level so that the spawn start method can import them) ----

def torch_roundtrip_consumer(inbox, acks):
    import torch
    torch.cuda.init()
    acks.put("ready")
    while True:
        item = inbox.get()
        if item is None:
            break
        index, tensor = item
        result = tensor + 1  # GPU work on the import, queued after torch's readiness wait
        del tensor, result
        acks.put(index)


def torch_relay(inbox, outbox):
    import torch
    torch.cuda.init()
    outbox.put("ready")
    while True:
        item = inbox.get()
        if item is None:
            outbox.put(None)
            break
        index, tensor = item
        relayed = tensor + 1
        del tensor
        outbox.put((index, relayed))
        del relayed


def torch_sink(inbox, results):
    import torch
    torch.cuda.init()
    results.put("ready")
    mismatches = None
    while True:
        item = inbox.get()
        if item is None:
            break
        index, tensor = item
        bad = (tensor != index + 1).sum()  # on the GPU: no host block per tensor
        mismatches = bad if mismatches is None else mismatches + bad
        del tensor
    results.put(int(mismatches.item()) if mismatches is not None else -1)


def torch_roundtrip(count, elements):
    import torch
    import torch.multiprocessing as mp
    context = mp.get_context("spawn")
    inbox, acks = context.Queue(), context.Queue()
    consumer = context.Process(target=torch_roundtrip_consumer, args=(inbox, acks))
    consumer.start()
    assert acks.get(timeout=120) == "ready"
    start = None
    for index in range(count + WARM_UP):
        if index == WARM_UP:
            torch.cuda.synchronize()
            start = time.perf_counter()
        tensor = torch.full((elements,), index, dtype=torch.int32, device="cuda")
        inbox.put((index, tensor))
        del tensor
        assert acks.get(timeout=60) == index
    seconds = time.perf_counter() - start
    inbox.put(None)
    consumer.join(timeout=60)
    return 1e6 * seconds / count


def torch_pipeline(count, elements, blocks):
    import torch
    import torch.multiprocessing as mp
    context = mp.get_context("spawn")
    first, second, results = (context.Queue(maxsize=blocks), context.Queue(maxsize=blocks),
                              context.Queue())
    relay = context.Process(target=torch_relay, args=(first, second))
    sink = context.Process(target=torch_sink, args=(second, results))
    relay.start()
    assert second.get(timeout=120) == "ready"
    sink.start()
    assert results.get(timeout=120) == "ready"
    start = None
    for index in range(count + WARM_UP):
        if index == WARM_UP:
            start = time.perf_counter()
        tensor = torch.full((elements,), index, dtype=torch.int32, device="cuda")
        first.put((index, tensor))
        del tensor
    first.put(None)
    mismatches = results.get(timeout=600)
    seconds = time.perf_counter() - start
    relay.join(timeout=60)
    sink.join(timeout=60)
    if mismatches != 0:
        raise RuntimeError(f"torch pipeline: {mismatches} mismatching elements")
    return count / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=DEFAULT_BINARY, help="holoscan_dlpack_ipc_demo")
    parser.add_argument("--count", type=int, default=5000, help="tensors per run, after warm-up")
    parser.add_argument("--elements", type=int, default=1024, help="int32 elements per tensor")
    parser.add_argument("--blocks", type=int, default=8, help="tensors in flight per hop")
    parser.add_argument("--reps", type=int, default=3, help="repetitions, alternating")
    parser.add_argument("--require-ratio", type=float, default=0.0,
                        help="exit 1 when the pipeline ratio is below this (the target is 3)")
    args = parser.parse_args()
    try:
        import torch
        if not torch.cuda.is_available():
            print("ipc bench: torch sees no CUDA device; nothing to compare")
            return 0
    except ImportError:
        print("ipc bench: torch is not installed; nothing to compare")
        return 0

    rows = {"round trip (us per tensor, lower is better)": ([], []),
            "pipeline (tensors per s, higher is better)": ([], [])}
    (ours_rt, torch_rt), (ours_pl, torch_pl) = rows.values()
    holoscan_count = args.count + WARM_UP  # the demo counts its own warm-up in `count`
    for rep in range(args.reps):
        ours_rt.append(run_holoscan(args.binary, "roundtrip", holoscan_count, args.elements,
                                    args.blocks))
        torch_rt.append(torch_roundtrip(args.count, args.elements))
        ours_pl.append(run_holoscan(args.binary, "pipeline", holoscan_count, args.elements,
                                    args.blocks))
        torch_pl.append(torch_pipeline(args.count, args.elements, args.blocks))
        print(f"rep {rep + 1}: round trip {ours_rt[-1]:.1f} vs {torch_rt[-1]:.1f} us, "
              f"pipeline {ours_pl[-1]:.0f} vs {torch_pl[-1]:.0f} tensors/s", flush=True)

    print(f"\n{args.count} tensors of {args.elements} int32 per run, median of {args.reps}, "
          f"torch {torch.__version__}")
    print(f"{'measure':46} {'holoscan-dlpack':>16} {'torch.mp':>12} {'ratio':>8}")
    rt_ours, rt_torch = statistics.median(ours_rt), statistics.median(torch_rt)
    pl_ours, pl_torch = statistics.median(ours_pl), statistics.median(torch_pl)
    print(f"{'round trip (us per tensor, lower is better)':46} {rt_ours:16.1f} {rt_torch:12.1f} "
          f"{rt_torch / rt_ours:7.1f}x")
    print(f"{'pipeline (tensors per s, higher is better)':46} {pl_ours:16.0f} {pl_torch:12.0f} "
          f"{pl_ours / pl_torch:7.1f}x")
    ratio = pl_ours / pl_torch
    verdict = "meets" if ratio >= 3 else "MISSES"
    print(f"pipeline throughput is {ratio:.1f}x torch.multiprocessing: {verdict} the 3x target")
    return 1 if args.require_ratio and ratio < args.require_ratio else 0


if __name__ == "__main__":
    sys.exit(main())
