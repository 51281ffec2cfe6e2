"""The other process of the ucx tests, started with multiprocessing's spawn method (it inherits
the UCX environment conftest.py sets): each function listens on the loopback, reports its port on
a Queue, and reports what it saw, or its failure as ("error", class name, message)."""

import os
import signal
import time

import numpy as np

import holoscan_dlpack as hd
from holoscan_dlpack import ucx
from ipc_peers import reported

PATIENCE_MS = 60000
GPU_ROWS = 1 << 16  # int32 elements per device tensor: 256 KiB, sent by rendezvous


def _serve(reports, **config):
    """A Worker listening on the loopback, its port reported, and its first peer."""
    worker = ucx.Worker(**config)
    reports.put(("port", worker.listen("127.0.0.1")))
    peer = worker.accept(timeout_ms=PATIENCE_MS)
    if peer is None:
        raise TimeoutError("nobody connected")
    return worker, peer


def drain_sends(worker, count):
    """Progresses until `count` sends ended; returns their SendResults by peer and sequence.

    Results come in the order the sends ended, not the order they were made: a send ends once
    the receiver confirmed it *and* UCX let go of its memory, and a large send's local completion
    can come after the confirmations of smaller sends made behind it."""
    results, deadline = [], time.monotonic() + PATIENCE_MS / 1000
    while len(results) < count and time.monotonic() < deadline:
        worker.progress()
        result = worker.next_send_result()
        if result is None:
            time.sleep(0.0005)
        else:
            results.append(result)
    return sorted(results, key=lambda r: (r.peer, r.sequence))


def _progress_until(worker, inbox):
    """Progresses until the parent sends the next instruction, which is returned."""
    while not inbox.poll():
        worker.progress()
        time.sleep(0.001)
    return inbox.recv()


def echo(reports, count):
    """Receives `count` tensors, adds 1 to each in place (the memory is the receiver's own,
    writable) and sends it back to its sender."""
    with reported(reports):
        worker, _ = _serve(reports)
        with worker:
            for _ in range(count):
                got = worker.receive(timeout_ms=PATIENCE_MS)
                view = np.from_dlpack(got.tensor)
                view += np.ones((), dtype=view.dtype)
                del view
                worker.send(got.peer, got.tensor)
            results = drain_sends(worker, count)
            reports.put(("done", [(r.sequence, r.delivered) for r in results],
                         worker.stats().received))


def hold_then_receive(reports, inbox):
    """Accepts, then progresses without handing anything out (the sender's window fills) until
    told ("receive", n): receives n tensors and reports their (sequence, values); until "exit"."""
    with reported(reports):
        worker, _ = _serve(reports)
        with worker:
            reports.put(("holding", os.getpid()))
            while (order := _progress_until(worker, inbox)) != "exit":
                got = [worker.receive(timeout_ms=PATIENCE_MS) for _ in range(order[1])]
                reports.put(("received", [(r.sequence, np.from_dlpack(r.tensor).tolist())
                                          for r in got]))


def send_then_die(reports, port, count, inbox):
    """Connects to `port`, sends `count` tensors (tensor i holds i + arange(4)), waits until
    told, then dies of SIGKILL without a word to its peer."""
    with reported(reports):
        worker = ucx.Worker()
        peer = worker.connect("127.0.0.1", port, timeout_ms=PATIENCE_MS)
        for i in range(count):
            worker.send(peer, np.arange(4, dtype=np.int64) + i)
        reports.put(("sent", count))
        _progress_until(worker, inbox)
        os.kill(os.getpid(), signal.SIGKILL)


def receive_on_the_gpu(reports, framework, count, inbox):
    """Receives `count` int32 tensors into a 3-block device pool, tensor i holding
    i + arange(GPU_ROWS), and checks every value on a stream of its own; reports the mismatches,
    then progresses (its Acks go out) until told to exit."""
    with reported(reports):
        pool = hd.TensorPool(memory="device", block_bytes=GPU_ROWS * 4, block_count=3)
        worker, _ = _serve(reports, receive_pool=pool)
        with worker:
            check = _torch_check if framework == "torch" else _cupy_check
            wrong = check(worker, count)
            reports.put(("done", wrong, worker.stats().received))
            _progress_until(worker, inbox)


def _torch_check(worker, count):
    import torch
    stream = torch.cuda.Stream()
    base = torch.arange(GPU_ROWS, dtype=torch.int32, device="cuda")
    wrong = torch.zeros((), dtype=torch.int64, device="cuda")
    torch.cuda.synchronize()
    for i in range(count):
        got = worker.receive(timeout_ms=PATIENCE_MS)
        with torch.cuda.stream(stream):
            wrong += (torch.from_dlpack(got.tensor) != base + i).sum()
        assert got.tensor.set_deallocation_stream(stream)  # the block is reused after the check
        del got
    return int(wrong.item())


def _cupy_check(worker, count):
    import cupy
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        base = cupy.arange(GPU_ROWS, dtype=cupy.int32)
        wrong = cupy.zeros((), dtype=cupy.int64)
    for i in range(count):
        got = worker.receive(timeout_ms=PATIENCE_MS)
        with stream:
            wrong += (cupy.from_dlpack(got.tensor) != base + i).sum()
        assert got.tensor.set_deallocation_stream(stream.ptr)
        del got
    return int(wrong.get())
