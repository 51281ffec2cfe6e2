"""The other process of the ipc tests, started with multiprocessing's spawn method: each function
gets its Channel as a Process argument (or through a Pipe) and reports on a Queue. Failures are
reported too, as ("error", class name, message), so that the test shows them."""

import contextlib
import os
import time
import traceback

import holoscan_dlpack as hd
from gpu_writers import CupyWriter, TorchWriter
from holoscan_dlpack import ipc

HELLO_MS = 60000
PATIENCE_S = 60.0
ROWS = 1 << 16  # int32 elements per tensor: 256 KiB

# The producer's slow write: about 20 ms of spinning on an H200, far longer than a handoff.
SPIN_CYCLES = 40_000_000


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


def produce(reports, channel, framework, memory, count, spin):
    """Publishes `count` tensors, tensor i holding `i + arange(ROWS)`, each written by a slow
    kernel on the producer's stream and published before that kernel is done. `memory` is "pool"
    (a shareable TensorPool's blocks, reused) or "framework" (the framework's own tensors)."""
    with reported(reports):
        writer = (TorchWriter if framework == "torch" else CupyWriter)(ROWS, spin)
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
