"""The other process of the ipc tests, started with multiprocessing's spawn method: each function
gets its Channel as a Process argument (or through a Pipe) and reports on a Queue. Failures are
reported too, as ("error", class name, message), so that the test shows them."""

import contextlib
import os
import time
import traceback

import holoscan_dlpack as hd
from holoscan_dlpack import ipc

HELLO_MS = 60000
PATIENCE_S = 60.0
ROWS = 1 << 16  # int32 elements per tensor: 256 KiB

# The producer's slow write: about 20 ms of spinning on an H200, far longer than a handoff.
SPIN_CYCLES = 40_000_000

_SPIN_THEN_WRITE = r"""
extern "C" __global__ void spin_then_write(int* out, int n, int first, long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = first + i;
  }
}
"""


@contextlib.contextmanager
def reported(reports):
    """Reports an exception as ("error", class name, message) before it ends the process."""
    try:
        yield
    except BaseException as error:  # noqa: BLE001 -- the parent must see every failure
        traceback.print_exc()
        reports.put(("error", type(error).__name__, str(error)))
        raise


# ---- CPU peers -------------------------------------------------------------------------------

def import_until_closed(reports, channel):
    """Imports over `channel` (a Process argument) until the exporter hangs up."""
    with reported(reports), ipc.Importer(channel, hello_timeout_ms=HELLO_MS) as importer:
        reports.put(("hello", os.getpid()))
        try:
            importer.receive(timeout_ms=int(PATIENCE_S * 1000))
        except hd.errors.ClosedError as error:
            reports.put(("closed", type(error).__name__, str(error)))
            return
        reports.put(("error", "timeout", "the exporter never hung up"))


def export_then_exit(reports, inbox):
    """Exports over the Channel that comes through `inbox` (a Pipe), exits when told to."""
    with reported(reports):
        channel = inbox.recv()  # arrives as a duplicate of the parent's socket
        with ipc.Exporter() as exporter:
            peer = exporter.add_peer(channel, hello_timeout_ms=HELLO_MS)
            reports.put(("hello", os.getpid(), exporter.connected(peer)))
            inbox.recv()


# ---- GPU producers -------------------------------------------------------------------------

def _allocate(pool, exporter):
    """A free pool block, polling the exporter until a release brings one back."""
    deadline = time.monotonic() + PATIENCE_S
    while True:
        try:
            return pool.allocate((ROWS,), "int32")
        except hd.errors.ResourceExhaustedError:
            if time.monotonic() > deadline:
                raise
            exporter.poll()
            time.sleep(0.0002)


def _drain(exporter):
    """Polls until every claim dropped (or the patience ran out); returns what is still held."""
    deadline = time.monotonic() + PATIENCE_S
    while exporter.held() and time.monotonic() < deadline:
        exporter.poll()
        time.sleep(0.0002)
    return exporter.held()


class _TorchWriter:
    """Writes `first + arange(ROWS)` after a spin, on a torch stream."""

    def __init__(self, spin):
        import torch
        self.torch = torch
        self.stream = torch.cuda.Stream()
        self.base = torch.arange(ROWS, dtype=torch.int32, device="cuda")
        self.spin = spin
        # Loads both kernels now: CUDA loads a kernel's module on its first launch, and that load
        # waits for the whole device, so the first write's spin would be over before its publish.
        self.write(self.new(), 0, spin=1)
        torch.cuda.synchronize()

    def new(self):
        with self.torch.cuda.stream(self.stream):
            return self.torch.empty(ROWS, dtype=self.torch.int32, device="cuda")

    def write(self, target, first, spin=None):
        with self.torch.cuda.stream(self.stream):
            view = self.torch.from_dlpack(target) if isinstance(target, hd.Tensor) else target
            cycles = self.spin if spin is None else spin
            if cycles:
                self.torch.cuda._sleep(cycles)
            self.torch.add(self.base, first, out=view)

    def busy(self):
        return not self.stream.query()


class _CupyWriter:
    """Writes `first + arange(ROWS)` after a spin, with one kernel on a CuPy stream."""

    def __init__(self, spin):
        import cupy
        self.cupy = cupy
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.kernel = cupy.RawKernel(_SPIN_THEN_WRITE, "spin_then_write")
        self.spin = spin
        self.write(cupy.zeros(ROWS, dtype=cupy.int32), 0, spin=0)  # loads the kernel now
        cupy.cuda.Device().synchronize()

    def new(self):
        with self.stream:
            return self.cupy.empty(ROWS, dtype=self.cupy.int32)

    def write(self, target, first, spin=None):
        import numpy
        with self.stream:
            view = self.cupy.from_dlpack(target) if isinstance(target, hd.Tensor) else target
            cycles = self.spin if spin is None else spin
            self.kernel(((ROWS + 255) // 256,), (256,),
                        (view, numpy.int32(ROWS), numpy.int32(first), numpy.int64(cycles)))

    def busy(self):
        return not self.stream.done


def produce(reports, channel, framework, memory, count, spin):
    """Publishes `count` tensors, tensor i holding `i + arange(ROWS)`, each written by a slow
    kernel on the producer's stream and published before that kernel is done. `memory` is "pool"
    (a shareable TensorPool's blocks, reused) or "framework" (the framework's own tensors)."""
    with reported(reports):
        writer = (_TorchWriter if framework == "torch" else _CupyWriter)(spin)
        pool = hd.TensorPool(memory="device", block_bytes=ROWS * 4, block_count=4, shareable=True)
        with ipc.Exporter() as exporter:
            peer = exporter.add_peer(channel, hello_timeout_ms=HELLO_MS)
            early = 0  # publishes made while the write was still running
            for i in range(count):
                target = _allocate(pool, exporter) if memory == "pool" else writer.new()
                writer.write(target, i)
                # A few in flight (4 blocks, or a dozen tensors): the socket has room for them.
                exporter.publish(peer, target, stream=writer.stream)
                early += writer.busy()
                del target
                exporter.poll()
            held = _drain(exporter)
            stats = exporter.stats()
            reports.put(("done", early, held, stats.published, stats.dropped,
                         pool.available_blocks()))
