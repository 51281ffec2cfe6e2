#!/usr/bin/env python3
"""Cross-process tensors from Python: holoscan_dlpack.ipc against PyTorch's torch.multiprocessing,
same machine, same run, same tensor shape (benchmarks/ipc_bench.py does the same for the C++ demo).

Two measures, each after a warm-up, both sides written in Python with torch kernels:
  round trip  one producer and one consumer process; the producer sends a tensor and waits until
              the consumer has given it back (holoscan: the Release arrives; torch: the consumer
              acknowledges after dropping it): the per-tensor cost of export + import + release.
  pipeline    producer -> relay (adds one into a new tensor) -> sink (checks on the GPU), free
              running with at most `blocks` tensors in flight per hop (holoscan: shareable pool
              blocks; torch: bounded queues); tensors per second.

torch's side is benchmarks/ipc_bench.py's. Each measure is repeated `--reps` times, alternating
the two, and the medians are compared.

    python3 benchmarks/python_ipc_bench.py [--count N] [--elements N] [--blocks N] [--reps N]
"""
import argparse
import multiprocessing
import statistics
import sys
import time

from ipc_bench import WARM_UP, torch_pipeline, torch_roundtrip

PATIENCE_S = 120.0


# ---- holoscan side (module level, so that the spawn start method can import it) ----

def make_pool(hd, elements, blocks):
    return hd.TensorPool(memory="device", block_bytes=4 * elements, block_count=blocks,
                         shareable=True)


def allocate(hd, pool, exporter, elements):
    """A free block, polling the exporter until a release brings one back."""
    deadline = time.monotonic() + PATIENCE_S
    while pool.available_blocks() == 0:
        if time.monotonic() > deadline:
            raise TimeoutError("no block came back")
        exporter.poll()
    return pool.allocate((elements,), "int32")


def publish(hd, exporter, peer, tensor, stream):
    """Publishes, polling while the peer's socket is full."""
    deadline = time.monotonic() + PATIENCE_S
    while True:
        try:
            return exporter.publish(peer, tensor, stream=stream)
        except hd.errors.NotReadyError:
            if time.monotonic() > deadline:
                raise
            exporter.poll()


def drain(exporter):
    deadline = time.monotonic() + PATIENCE_S
    while exporter.held() and time.monotonic() < deadline:
        exporter.poll()
    return exporter.held() == 0


def receive(importer):
    tensor = importer.receive(timeout_ms=int(PATIENCE_S * 1000))
    if tensor is None:
        raise TimeoutError("nothing came")
    return tensor


def holoscan_roundtrip_consumer(channel, ready):
    import torch
    import holoscan_dlpack as hd
    from holoscan_dlpack import ipc
    stream = torch.cuda.Stream()
    with ipc.Importer(channel, hello_timeout_ms=int(PATIENCE_S * 1000)) as importer:
        ready.put("ready")
        while True:
            try:
                tensor = importer.receive()
            except hd.errors.ClosedError:  # the producer is done
                break
            with torch.cuda.stream(stream):
                torch.from_dlpack(tensor).add(1)  # GPU work on the import, after its wait
            tensor.set_deallocation_stream(stream)
            del tensor  # the Release goes out now, with an event after the add


def holoscan_relay(inbound, handoff, elements, blocks, ready):
    import torch
    import holoscan_dlpack as hd
    from holoscan_dlpack import ipc
    # The relay makes its pair to the sink itself: an exporter watches the process at the other
    # end of a pair only when the pair's creator is one of its two ends.
    outbound, theirs = ipc.Channel.pair()
    handoff.send(theirs)  # pickled now, as a duplicate: our copy can go
    theirs.close()
    stream = torch.cuda.Stream()
    pool = make_pool(hd, elements, blocks)
    with ipc.Importer(inbound, hello_timeout_ms=int(PATIENCE_S * 1000)) as importer, \
            ipc.Exporter() as exporter:
        sink = exporter.add_peer(outbound, hello_timeout_ms=int(PATIENCE_S * 1000))
        ready.put("ready")
        while True:
            try:
                tensor = receive(importer)
            except hd.errors.ClosedError:
                break
            out = allocate(hd, pool, exporter, elements)
            with torch.cuda.stream(stream):
                torch.add(torch.from_dlpack(tensor), 1, out=torch.from_dlpack(out))
            tensor.set_deallocation_stream(stream)
            publish(hd, exporter, sink, out, stream)
            del tensor, out
        drain(exporter)


def holoscan_sink(handoff, count, results):
    import torch
    from holoscan_dlpack import ipc
    channel = handoff.recv()  # the relay's pair, its other end through a Pipe
    stream = torch.cuda.Stream()
    with ipc.Importer(channel, hello_timeout_ms=int(PATIENCE_S * 1000)) as importer:
        results.put("ready")
        with torch.cuda.stream(stream):
            mismatches = torch.zeros((), dtype=torch.int64, device="cuda")
        for index in range(count):
            tensor = receive(importer)
            with torch.cuda.stream(stream):
                mismatches += (torch.from_dlpack(tensor) != index + 1).sum()  # no host block
            tensor.set_deallocation_stream(stream)
            del tensor
        results.put(int(mismatches.item()))


class Producer:
    """This process's end: a shareable pool, a stream, and an Exporter with one peer."""

    def __init__(self, channel, elements, blocks):
        import torch
        import holoscan_dlpack as hd
        from holoscan_dlpack import ipc
        self.torch, self.hd = torch, hd
        self.elements = elements
        self.pool = make_pool(hd, elements, blocks)
        self.stream = torch.cuda.Stream()
        self.exporter = ipc.Exporter()
        self.peer = self.exporter.add_peer(channel, hello_timeout_ms=int(PATIENCE_S * 1000))

    def run(self, count, after_publish):
        """Publishes WARM_UP + count tensors, each filled with its index, calling
        `after_publish(releases before)` after each; returns the time the warm-up ended."""
        start = None
        for index in range(count + WARM_UP):
            if index == WARM_UP:
                self.torch.cuda.synchronize()
                start = time.perf_counter()
            tensor = allocate(self.hd, self.pool, self.exporter, self.elements)
            with self.torch.cuda.stream(self.stream):
                self.torch.from_dlpack(tensor).fill_(index)
            released = self.exporter.stats().releases
            publish(self.hd, self.exporter, self.peer, tensor, self.stream)
            del tensor
            after_publish(released)
        return start

    def wait_for_release(self, released):
        """Polls until the peer gave the last tensor back (its Release arrived)."""
        deadline = time.monotonic() + PATIENCE_S
        while self.exporter.stats().releases == released:
            if time.monotonic() > deadline:
                raise TimeoutError("no Release")
            self.exporter.poll()

    def close(self):
        drain(self.exporter)
        self.exporter.close()


def holoscan_roundtrip(count, elements, blocks):
    from holoscan_dlpack import ipc
    context = multiprocessing.get_context("spawn")
    mine, theirs = ipc.Channel.pair()
    ready = context.Queue()
    consumer = context.Process(target=holoscan_roundtrip_consumer, args=(theirs, ready))
    consumer.start()
    theirs.close()
    producer = Producer(mine, elements, blocks)
    assert ready.get(timeout=PATIENCE_S) == "ready"
    start = producer.run(count, producer.wait_for_release)
    seconds = time.perf_counter() - start
    producer.close()
    consumer.join(timeout=60)
    return 1e6 * seconds / count


def holoscan_pipeline(count, elements, blocks):
    from holoscan_dlpack import ipc
    context = multiprocessing.get_context("spawn")
    first, theirs = ipc.Channel.pair()
    relay_end, sink_end = context.Pipe()
    ready, results = context.Queue(), context.Queue()
    relay = context.Process(target=holoscan_relay,
                            args=(theirs, relay_end, elements, blocks, ready))
    sink = context.Process(target=holoscan_sink, args=(sink_end, count + WARM_UP, results))
    relay.start()
    sink.start()
    theirs.close()
    producer = Producer(first, elements, blocks)
    assert ready.get(timeout=PATIENCE_S) == "ready"
    assert results.get(timeout=PATIENCE_S) == "ready"
    start = producer.run(count, lambda released: producer.exporter.poll())
    mismatches = results.get(timeout=600)
    seconds = time.perf_counter() - start
    producer.close()
    relay.join(timeout=60)
    sink.join(timeout=60)
    if mismatches != 0:
        raise RuntimeError(f"holoscan pipeline: {mismatches} mismatching elements")
    return count / seconds


# name: (ours, torch's, whether lower is better)
MEASURES = {
    "round trip (us per tensor, lower is better)": (
        holoscan_roundtrip, lambda count, elements, blocks: torch_roundtrip(count, elements),
        True),
    "pipeline (tensors per s, higher is better)": (holoscan_pipeline, torch_pipeline, False),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, default, meaning in (("--count", 5000, "tensors per run, after warm-up"),
                                   ("--elements", 1024, "int32 elements per tensor"),
                                   ("--blocks", 8, "tensors in flight per hop"),
                                   ("--reps", 3, "repetitions, alternating")):
        parser.add_argument(flag, type=int, default=default, help=meaning)
    args = parser.parse_args()
    torch = None
    try:
        import torch
    except ImportError:
        pass
    if torch is None or not torch.cuda.is_available():
        print("python ipc bench: needs torch with a CUDA device; nothing to compare")
        return 0

    samples = {name: ([], []) for name in MEASURES}
    for rep in range(args.reps):
        for name, (ours, theirs, _) in MEASURES.items():
            for run, values in zip((ours, theirs), samples[name]):
                values.append(run(args.count, args.elements, args.blocks))
        print(f"rep {rep + 1}: " + ", ".join(
            f"{name.split(' (')[0]} {values[0][-1]:.1f} vs {values[1][-1]:.1f}"
            for name, values in samples.items()), flush=True)

    print(f"\n{args.count} tensors of {args.elements} int32 per run, {args.blocks} in flight, "
          f"median of {args.reps}, torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print(f"{'measure (Python on both sides)':46} {'holoscan_dlpack':>16} {'torch.mp':>12} "
          f"{'ours better by':>15}")
    for name, (_, _, lower_is_better) in MEASURES.items():
        ours, theirs = (statistics.median(values) for values in samples[name])
        better = theirs / ours if lower_is_better else ours / theirs
        print(f"{name:46} {ours:16.1f} {theirs:12.1f} {better:14.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
