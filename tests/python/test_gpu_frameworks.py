"""PyTorch and CuPy on a real GPU (each test skips with the reason elsewhere): zero-copy both
ways, data made by a slow producer kernel reaching a consumer on another stream through the stream
arguments and through __cuda_array_interface__, fan-out release, exit with releases pending, and a
soak with flat GPU memory and RSS."""

import gc
import os
import sys
import threading
import time
import weakref

import pytest

import holoscan_dlpack as hd
from conftest import (KDL_CUDA, KDL_CUDA_HOST, SLOW_CYCLES, cuda_cupy, cuda_torch, run_python,
                      slow_pinned_fill)
from null_deleter import null_deleter_capsule

ROWS, COLS = 256, 1024  # 1 MiB of float32: visible in the frameworks' allocator counters
SLOW = SLOW_CYCLES


class Producer:
    """A DLPack producer object around a framework array, to watch its lifetime."""

    def __init__(self, array):
        self.array = array
        self.released_on = None

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __del__(self):
        self.released_on = threading.get_ident()
        _release_threads.append(self.released_on)


_release_threads = []


class OwningProducer(Producer):
    """A producer whose tensors have no deleter (DLPack allows it): only this object keeps their
    memory, so an import keeps it until its release, which these tests watch."""

    def __dlpack__(self, **kwargs):
        return null_deleter_capsule(self, self.array.data_ptr(), list(self.array.shape),
                                    device=(KDL_CUDA, self.array.device.index))


def slow_fill(torch, stream, value, like=None):
    """On `stream`: zeros, a long spin, then `value`; a reader not ordered after it sees zeros."""
    with torch.cuda.stream(stream):
        x = torch.zeros(ROWS, COLS, device="cuda") if like is None else like
        if like is not None:
            x.zero_()
        torch.cuda._sleep(SLOW)
        x.fill_(value)
    return x


def test_torch_round_trip_is_zero_copy():
    torch = cuda_torch()
    torch.cuda.synchronize()
    gc.collect()
    baseline = torch.cuda.memory_allocated()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.arange(ROWS * COLS, dtype=torch.float32, device="cuda").reshape(ROWS, COLS)
        t = hd.from_dlpack(x, stream=side)
    assert t.data == x.data_ptr()
    assert t.shape == (ROWS, COLS) and t.dtype == hd.DLDataType(2, 32, 1)
    assert t.device == hd.DLDevice(KDL_CUDA, x.device.index)
    assert t.is_read_only and t.has_readiness_stream_contract()
    assert t.readiness_stream == side.cuda_stream

    y = torch.from_dlpack(t)  # torch 2.11 ignores READ_ONLY: the import stays usable
    assert y.data_ptr() == x.data_ptr() and y.shape == x.shape and y.dtype == x.dtype
    y[0, 0] = 42.0
    torch.cuda.synchronize()
    assert x[0, 0].item() == 42.0

    del x
    gc.collect()
    assert torch.cuda.memory_allocated() > baseline, "the import no longer holds torch's memory"
    del t, y
    gc.collect()
    hd.flush_deferred_releases()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == baseline, "torch's deleter did not run"


def test_cupy_round_trip_is_zero_copy():
    cupy = cuda_cupy()
    pool = cupy.get_default_memory_pool()
    cupy.cuda.Device().synchronize()
    gc.collect()
    baseline = pool.used_bytes()
    side = cupy.cuda.Stream(non_blocking=True)
    with side:
        a = cupy.arange(ROWS * COLS, dtype=cupy.float32).reshape(ROWS, COLS)
        t = hd.from_dlpack(a, stream=side)
    assert t.data == a.data.ptr and t.shape == (ROWS, COLS)
    assert t.readiness_stream == side.ptr
    b = cupy.from_dlpack(t)
    assert b.data.ptr == a.data.ptr
    assert bool((b == cupy.arange(ROWS * COLS, dtype=cupy.float32).reshape(ROWS, COLS)).all())
    c = cupy.asarray(t)  # through __cuda_array_interface__
    assert c.data.ptr == a.data.ptr
    del a
    gc.collect()
    assert pool.used_bytes() > baseline
    del t, b, c
    gc.collect()
    hd.flush_deferred_releases()
    cupy.cuda.Device().synchronize()
    assert pool.used_bytes() == baseline, "CuPy's deleter did not run"


def test_unconsumed_export_is_deleted_by_its_capsule():
    torch = cuda_torch()
    torch.cuda.synchronize()
    gc.collect()
    baseline = torch.cuda.memory_allocated()
    t = hd.from_dlpack(torch.ones(ROWS, COLS, device="cuda"))
    capsule = t.__dlpack__(stream=1, max_version=(1, 0))
    del t
    gc.collect()
    hd.flush_deferred_releases()
    assert torch.cuda.memory_allocated() > baseline, "the unconsumed export owns the memory"
    del capsule
    gc.collect()
    hd.flush_deferred_releases()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == baseline


def test_torch_to_cupy_and_back_through_holoscan():
    torch = cuda_torch()
    cupy = cuda_cupy()
    x = torch.arange(ROWS * COLS, dtype=torch.float32, device="cuda").reshape(ROWS, COLS)
    t = hd.from_dlpack(x)  # stream None: the legacy default stream, as the array API says
    c = cupy.from_dlpack(t)
    assert c.data.ptr == x.data_ptr()
    c[2, 3] = 5.5
    cupy.cuda.Device().synchronize()
    assert x[2, 3].item() == 5.5
    u = hd.from_dlpack(c, stream=1)
    z = torch.from_dlpack(u)
    assert z.data_ptr() == x.data_ptr()
    assert z[ROWS - 1, COLS - 1].item() == float(ROWS * COLS - 1)


def test_slow_torch_producer_reaches_a_consumer_on_another_stream():
    torch = cuda_torch()
    producer, import_stream, consumer = (torch.cuda.Stream() for _ in range(3))
    x = slow_fill(torch, producer, 7.0)
    with torch.cuda.stream(producer):  # torch's work stream: recorded as the readiness point
        t = hd.from_dlpack(x, stream=import_stream)
    assert not producer.query(), "the producer finished before the handoff: no race to see"
    with torch.cuda.stream(consumer):
        y = torch.from_dlpack(t)  # torch passes `consumer`; we make it wait for readiness
        total = y.sum().item()
    assert total == 7.0 * ROWS * COLS, "the consumer read before the producer finished"


def test_as_tensor_of_a_read_only_tensor_orders_the_stream_it_names():
    # Holoscan 5.0 returns a read-only Tensor itself and orders the named stream after its
    # readiness: a kernel then queued there, reading the memory through torch (which orders
    # nothing on its own between two streams), sees the slow producer's values.
    torch = cuda_torch()
    producer, import_stream, consumer = (torch.cuda.Stream() for _ in range(3))
    x = slow_fill(torch, producer, 8.0)
    with torch.cuda.stream(producer):
        t = hd.from_dlpack(x, stream=import_stream)
    assert t.is_read_only
    assert hd.as_tensor(t, stream=consumer) is t
    assert not producer.query(), "the producer finished before the import: no race to see"
    with torch.cuda.stream(consumer):
        total = x.sum().item()
    assert total == 8.0 * ROWS * COLS, "the named stream read before the producer finished"


def test_slow_producer_through_dlpack_protocol_reaches_another_stream():
    torch = cuda_torch()
    producer, import_stream, consumer = (torch.cuda.Stream() for _ in range(3))
    x = slow_fill(torch, producer, 6.0)
    with torch.cuda.stream(producer):  # a plain producer object: torch's __dlpack__(stream=...)
        t = hd.from_dlpack(Producer(x), stream=import_stream)
    assert t.readiness_stream == import_stream.cuda_stream
    assert not producer.query()
    with torch.cuda.stream(consumer):
        total = torch.from_dlpack(t).sum().item()
    assert total == 6.0 * ROWS * COLS


def test_slow_writer_of_our_tensor_reaches_torch_and_cupy_consumers():
    torch = cuda_torch()
    cupy = cuda_cupy()
    pool = hd.TensorPool(memory="device", block_bytes=ROWS * COLS * 4, block_count=2)
    t = pool.allocate([ROWS, COLS], "float32")
    producer = torch.cuda.Stream()

    def write(value):
        # Pool tensors are writable; the writer's export is the tensor's one mutable export
        # (Holoscan 5.0), so it goes before the readers export it. The fill is still running.
        writer = torch.from_dlpack(t)
        slow_fill(torch, producer, value, like=writer)
        with pytest.raises(BufferError, match="active mutable DLPack export"):
            t.__dlpack__(stream=-1, max_version=(1, 0))
        del writer
        assert t.set_readiness_stream(producer)  # the commit: readiness after the slow fill
        assert not producer.query()

    write(3.0)
    consumer = torch.cuda.Stream()
    with torch.cuda.stream(consumer):
        total = torch.from_dlpack(t).sum().item()
    assert total == 3.0 * ROWS * COLS

    stream = cupy.cuda.Stream(non_blocking=True)
    write(4.0)
    with stream:
        through_dlpack = float(cupy.from_dlpack(t).sum())
    assert through_dlpack == 4.0 * ROWS * COLS

    write(5.0)
    # Holoscan 5.0: the interface names the legacy default stream, ordered after readiness.
    assert t.__cuda_array_interface__["stream"] == 1
    assert not producer.query()
    with stream:
        through_interface = float(cupy.asarray(t).sum())  # CuPy waits on the interface's stream
    assert through_interface == 5.0 * ROWS * COLS
    torch.cuda.synchronize()


def test_a_refused_export_queues_no_wait_on_its_consumer_stream():
    torch = cuda_torch()
    torch.cuda.synchronize()
    pool = hd.TensorPool(memory="device", block_bytes=ROWS * COLS * 4, block_count=1)
    t = pool.allocate([ROWS, COLS], "float32")
    producer = torch.cuda.Stream()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(SLOW * 5)
    assert t.set_readiness_stream(producer)
    first = t.__dlpack__(stream=-1, max_version=(1, 0))  # the writable tensor's one export
    consumer = torch.cuda.Stream()
    with pytest.raises(BufferError, match="active mutable DLPack export"):
        t.__dlpack__(stream=consumer.cuda_stream, max_version=(1, 0))
    # Refused before its consumer was ordered: no wait on the slow producer was queued.
    assert not producer.query()
    assert consumer.query()
    del first
    # The control: an export that is granted orders its consumer behind the running producer.
    granted = t.__dlpack__(stream=consumer.cuda_stream, max_version=(1, 0))
    assert not producer.query()
    assert not consumer.query()
    del granted
    torch.cuda.synchronize()


def test_cuda_array_interface_import_orders_after_its_stream():
    torch = cuda_torch()
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    x = slow_fill(torch, producer, 9.0)

    class Exporter:
        def __init__(self):
            self.__cuda_array_interface__ = dict(x.__cuda_array_interface__, version=3,
                                                 stream=producer.cuda_stream)

    t = hd.as_tensor(Exporter())
    assert t.data == x.data_ptr() and t.readiness_stream == producer.cuda_stream
    assert not producer.query()
    with torch.cuda.stream(consumer):
        total = torch.from_dlpack(t).sum().item()
    assert total == 9.0 * ROWS * COLS


def test_fan_out_release_waits_for_both_streams(testing):
    torch = cuda_torch()
    short, long = torch.cuda.Stream(), torch.cuda.Stream()
    producer = OwningProducer(torch.ones(ROWS, COLS, device="cuda"))
    w = weakref.ref(producer)
    t = hd.from_dlpack(producer, stream=1)
    y = torch.from_dlpack(t)
    with torch.cuda.stream(short):
        torch.cuda._sleep(SLOW // 10)
        y.add_(1)
    with torch.cuda.stream(long):
        torch.cuda._sleep(SLOW * 5)
        y.mul_(2)
    assert t.set_deallocation_stream(short) and t.set_deallocation_stream(long)
    del producer, t, y
    gc.collect()
    assert w() is not None
    assert hd.pending_deferred_releases() == 1, "the release was not deferred"
    short.synchronize()
    time.sleep(0.01)
    assert not long.query(), "the long stream finished already: the race below proves nothing"
    assert w() is not None, "released after the first stream, before the second"
    long.synchronize()
    hd.flush_deferred_releases()
    assert w() is None, "not released once both streams finished"
    assert _release_threads[-1] == threading.get_ident(), "a release ran off a Python thread"


def test_release_thread_hands_python_releases_to_a_python_thread(testing):
    torch = cuda_torch()
    stream = torch.cuda.Stream()
    producer = OwningProducer(torch.ones(16, device="cuda"))
    w = weakref.ref(producer)
    t = hd.from_dlpack(producer, stream=1)
    with torch.cuda.stream(stream):
        torch.cuda._sleep(SLOW // 4)
    assert t.set_deallocation_stream(stream)
    del producer, t
    gc.collect()
    assert w() is not None, "released before the stream passed its point"
    # This thread runs Python throughout and never enters the module: the release thread must
    # queue the release for it, and the pending call runs it here, between two bytecodes. Before
    # Python 3.13 this thread notices a pending call added by another thread only when it takes
    # the GIL again (CPython gh-95820; docs/python.md, Known limits): the loop lets go of the GIL
    # there, as any blocking call does.
    deadline = time.monotonic() + 10
    while w() is not None:
        assert time.monotonic() < deadline, "the release thread never handed the release over"
        if sys.version_info < (3, 13):
            time.sleep(0)
    assert _release_threads[-1] == threading.get_ident(), "released off the Python thread"


def test_exit_with_releases_pending_on_the_gpu():
    cuda_torch()
    result = run_python(f"""
        import torch, holoscan_dlpack as hd
        x = torch.ones(1 << 20, device="cuda")
        t = hd.from_dlpack(x, stream=1)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            torch.cuda._sleep({SLOW * 2})
        t.set_deallocation_stream(s)
        del t, x
        print("pending at exit:", hd.pending_deferred_releases())
    """)
    assert result.returncode == 0, result.stderr
    assert "pending at exit: 1" in result.stdout
    assert "Fatal" not in result.stderr


def test_soak_round_trips_keep_memory_flat():
    torch = cuda_torch()
    stream = torch.cuda.Stream()
    x = torch.ones(64, 64, device="cuda")

    def rss():
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def round_trip():
        with torch.cuda.stream(stream):
            t = hd.from_dlpack(x, stream=stream)
            y = torch.from_dlpack(t)
            u = hd.from_dlpack(y, stream=stream)
            del t, y, u

    for _ in range(2000):
        round_trip()
    gc.collect()
    hd.flush_deferred_releases()
    torch.cuda.synchronize()
    gpu_before, rss_before = torch.cuda.memory_allocated(), rss()
    start, done = time.monotonic(), 0
    while done < 100_000 and time.monotonic() - start < 30:
        round_trip()
        done += 1
    gc.collect()
    hd.flush_deferred_releases()
    torch.cuda.synchronize()
    print(f"soak: {done} round trips in {time.monotonic() - start:.1f} s")
    assert done >= 10_000
    assert torch.cuda.memory_allocated() == gpu_before
    assert rss() - rss_before < 8 << 20, "resident memory grew during the soak"
    assert hd.pending_deferred_releases() == 0


def test_pinned_host_export_waits_for_its_producer(testing):
    # A pinned (kDLCUDAHost) tensor written by a slow copy on a stream: a host consumer gets no
    # stream to wait on, so the export waits on the host for the readiness point.
    torch = cuda_torch()
    np = pytest.importorskip("numpy")
    producer = torch.cuda.Stream()
    host, x = slow_pinned_fill(torch, producer, 2.0, ROWS * COLS)
    capsule = testing.make_capsule(shape=[ROWS * COLS], device=(KDL_CUDA_HOST, 0),
                                   address=host.data_ptr())
    t = hd.from_dlpack(capsule, stream=producer)  # readiness: the producer stream, now
    assert t.has_readiness_stream_contract()
    assert not producer.query(), "the producer finished before the export: no race to see"
    assert float(np.from_dlpack(t).sum()) == 2.0 * ROWS * COLS, "read before the copy landed"
    with torch.cuda.stream(producer):
        torch.cuda._sleep(SLOW)
        host.copy_(x.fill_(3.0), non_blocking=True)
    t.set_readiness_stream(producer)
    assert not producer.query()
    assert float(np.asarray(t).sum()) == 3.0 * ROWS * COLS, "__array_interface__ did not wait"
    torch.cuda.synchronize()


def test_import_of_a_writable_host_tensor_waits_for_its_readiness():
    # A writable host block (kDLCPU) whose readiness point is on a busy stream: importing it makes
    # a read-only wrapper, a new import without that point, so the import waits on the host for
    # it; a host read of the wrapper must never come before the point.
    torch = cuda_torch()
    np = pytest.importorskip("numpy")
    producer = torch.cuda.Stream()
    block = hd.TensorPool(memory="host", block_bytes=64, block_count=1).allocate((4,), "float32")
    np.asarray(block)[:] = 7.0
    with torch.cuda.stream(producer):
        torch.cuda._sleep(SLOW)
    block.set_readiness_stream(producer)
    assert not producer.query(), "the spin finished before the import: no race to see"
    wrapper = hd.from_dlpack(block)
    assert wrapper is not block and wrapper.is_read_only
    assert producer.query(), "the import did not wait for the block's readiness point"
    assert float(np.asarray(wrapper).sum()) == 28.0


def test_torch_is_imported_through_its_c_exchange_api():
    torch = pytest.importorskip("torch")
    if getattr(torch.Tensor, "__dlpack_c_exchange_api__", None) is None:
        pytest.skip(f"torch {torch.__version__} has no DLPack C exchange API")
    calls = []

    class Spy(torch.Tensor):
        def __dlpack__(self, *args, **kwargs):
            calls.append("__dlpack__")
            return super().__dlpack__(*args, **kwargs)

    x = torch.arange(6, dtype=torch.float32).as_subclass(Spy)
    for import_ in (hd.as_tensor, hd.from_dlpack):
        t = import_(x)
        assert t.data == x.data_ptr() and t.shape == (6,) and t.is_read_only
    assert calls == [], "the C exchange API comes first"
    assert hd.from_dlpack(x, copy=True).data != x.data_ptr()
    assert calls == ["__dlpack__"], "a copy is asked of __dlpack__"


def test_torch_and_cupy_take_the_versioned_read_only_export():
    torch = cuda_torch()
    x = torch.arange(8, dtype=torch.float32, device="cuda")
    t = hd.from_dlpack(x)
    assert t.is_read_only
    assert torch.from_dlpack(t).data_ptr() == x.data_ptr()  # versioned: no BufferError
    cupy = cuda_cupy()
    assert cupy.from_dlpack(t).data.ptr == x.data_ptr()
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__(stream=1)  # what a consumer of legacy capsules would ask


def test_stream_ordered_allocate_never_overwrites_what_a_reader_still_reads(testing):
    """allocate(shape, dtype, stream=producer) hands out a block whose last reader is still
    reading (nothing names it), and orders the producer's stream after that reader: the new
    write lands only once the slow read is done, so the read sees the old values."""
    torch = cuda_torch()
    pool = hd.TensorPool(memory="device", block_bytes=ROWS * COLS * 4, block_count=1)
    reader, producer = torch.cuda.Stream(), torch.cuda.Stream()
    first = pool.allocate((ROWS, COLS), "float32")
    torch.from_dlpack(first).fill_(1.0)
    torch.cuda.synchronize()
    with torch.cuda.stream(reader):
        torch.cuda._sleep(SLOW * 5)
        seen = torch.from_dlpack(first).clone()  # the old values, read late
    assert first.set_deallocation_stream(reader)
    del first
    assert not reader.query(), "the reader finished before the test could race it"
    with pytest.raises(hd.errors.ResourceExhaustedError):
        pool.allocate((ROWS, COLS), "float32")  # without a stream: only a block nobody reads
    second = pool.allocate((ROWS, COLS), "float32", stream=producer)
    with torch.cuda.stream(producer):
        torch.from_dlpack(second).fill_(2.0)
    assert second.set_readiness_stream(producer)
    torch.cuda.synchronize()
    assert float(seen.min()) == float(seen.max()) == 1.0, "the new owner wrote under the reader"
    assert float(torch.from_dlpack(second).min()) == 2.0
