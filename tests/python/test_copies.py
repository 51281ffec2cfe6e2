"""Owning copies: `__dlpack__(copy=True)`, `__dlpack__(dl_device=...)` and the Tensor.copy /
Tensor.copy_to extensions, all made by the C++ Tensor::copy_to. Host copies and every refusal run
here, with their exact classes and messages; copies of device memory, written by a slow producer
kernel and read on other streams, run on a GPU (skipped with the reason elsewhere)."""

import numpy as np
import pytest

import holoscan_dlpack as hd
from conftest import (FLAG_IS_COPIED, FLAG_READ_ONLY, KDL_CPU, KDL_CUDA, KDL_CUDA_HOST,
                      SLOW_CYCLES as SLOW, cuda_cupy, cuda_torch, slow_pinned_fill)

FLAG_SUBBYTE_PADDED = 1 << 2
FLOAT4 = (17, 4, 1)  # kDLFloat4_e2m1fn

SOURCES = [
    lambda: np.arange(12, dtype=np.float32).reshape(3, 4),
    lambda: np.arange(24, dtype=np.int16).reshape(4, 6)[::-2, 1::2],
    lambda: np.arange(24, dtype=np.int64).reshape(2, 3, 4).transpose(2, 0, 1),
    lambda: np.array(7.5),
    lambda: np.zeros((3, 0), dtype=np.uint8),
]
SOURCE_IDS = ["compact", "negative-steps", "transposed-3d", "0-d", "empty"]


def host_copies(t):
    """Every way to ask for a host copy of the host tensor `t`."""
    cpu = hd.DLDevice(hd.DLDeviceType.DLCPU, 0)
    return {
        "copy()": t.copy(),
        "copy_to(tuple)": t.copy_to((KDL_CPU, 0)),
        "copy_to(DLDevice)": t.copy_to(cpu, stream=2),
        "__dlpack__(copy=True)": hd.from_dlpack(t.__dlpack__(copy=True, max_version=(1, 0))),
    }


@pytest.mark.parametrize("make", SOURCES, ids=SOURCE_IDS)
def test_host_copies_are_owning_compact_and_writable(make):
    a = make()
    t = hd.from_dlpack(a)
    for how, c in host_copies(t).items():
        assert c.shape == a.shape and c.dtype == t.dtype and c.is_contiguous(), how
        assert c.device == hd.DLDevice(KDL_CPU, 0), how
        assert c.flags & FLAG_IS_COPIED, how
        if how != "__dlpack__(copy=True)":  # that one is imported again: read-only, as imports are
            assert not c.is_read_only and not c.flags & FLAG_READ_ONLY, how
        copied = np.from_dlpack(c)
        if a.size:
            assert c.data != a.ctypes.data, how
        np.testing.assert_array_equal(copied, a)
    before = a.copy()
    copies = [np.from_dlpack(c) for c in host_copies(t).values()]
    a[...] = 0  # no copy follows its source
    for copied in copies:
        np.testing.assert_array_equal(copied, before)


def test_a_copy_is_writable_through_numpy():
    c = hd.from_dlpack(np.arange(4.0)).copy()
    view = np.from_dlpack(c)
    assert view.flags.writeable
    view[:] = 9.0
    # The writer's export is alive: a second is refused, as Holoscan 5.0 refuses it.
    with pytest.raises(BufferError, match="active mutable DLPack export"):
        np.from_dlpack(c)
    del view
    np.testing.assert_array_equal(np.from_dlpack(c), np.full(4, 9.0))


def test_a_copy_does_not_hold_its_source(testing, collect):
    calls = testing.deleter_calls()
    t = hd.from_dlpack(testing.make_capsule(shape=[8]))
    copies = [t.copy(), t.copy_to((KDL_CPU, 0)), t.__dlpack__(copy=True, max_version=(1, 0))]
    del t
    collect()
    assert testing.deleter_calls() == calls + 1, "the source went with its last owner, once"
    assert copies[0].shape == (8,)
    copies.clear()
    collect()
    assert testing.deleter_calls() == calls + 1
    assert hd.pending_deferred_releases() == 0


@pytest.mark.parametrize("stream", [None, 1, 2, -1, 0x7F00DEAD], ids=repr)
def test_host_copies_take_every_valid_stream(stream):
    # Host memory to the host is copied by the host: the stream orders nothing there.
    a = np.arange(6, dtype=np.int32)
    t = hd.from_dlpack(a)
    np.testing.assert_array_equal(
        np.from_dlpack(hd.from_dlpack(t.__dlpack__(copy=True, stream=stream, max_version=(1, 0)))),
        a)
    if stream != -1:
        np.testing.assert_array_equal(np.from_dlpack(t.copy(stream=stream)), a)


def test_a_host_pool_takes_a_copy(testing, collect):
    calls = testing.deleter_calls()
    pool = hd.TensorPool(memory="host", block_bytes=64, block_count=1)
    t = hd.from_dlpack(np.arange(24, dtype=np.int16).reshape(4, 6)[:, ::3])
    c = t.copy_to(pool)
    assert c.is_contiguous() and not c.is_read_only and c.flags & FLAG_IS_COPIED
    assert pool.available_blocks() == 0
    np.testing.assert_array_equal(np.from_dlpack(c),
                                  np.arange(24, dtype=np.int16).reshape(4, 6)[:, ::3])
    with pytest.raises(hd.errors.ResourceExhaustedError) as raised:
        t.copy_to(pool)
    assert str(raised.value) == "kResourceExhausted: pool exhausted"
    del c
    collect()
    assert pool.available_blocks() == 1, "the block came back with the copy"
    big = hd.from_dlpack(testing.make_capsule(shape=[100]))
    with pytest.raises(hd.errors.InvalidArgumentError) as raised:
        big.copy_to(pool)
    assert str(raised.value) == \
        "kInvalidArgument: TensorPool::allocate: 400 bytes do not fit a block of 256"
    del big
    collect()
    assert testing.deleter_calls() == calls + 1 and pool.available_blocks() == 1


def test_unsupported_targets_are_refused(testing, collect):
    calls = testing.deleter_calls()
    t = hd.from_dlpack(testing.make_capsule(shape=[4]))
    message = "kInvalidArgument: Tensor::copy_to: Tensor copy target device is unsupported (9)"
    with pytest.raises(hd.errors.InvalidArgumentError) as raised:
        t.copy_to((9, 0))
    assert str(raised.value) == message and raised.value.token == "INVALID_ARGUMENT"
    with pytest.raises(BufferError) as raised:  # the DLPack protocol's exception
        t.__dlpack__(dl_device=(9, 0), max_version=(1, 0))
    assert str(raised.value) == message
    del t
    collect()
    assert testing.deleter_calls() == calls + 1
    assert hd.pending_deferred_releases() == 0


def test_bad_arguments_are_refused_before_any_copy():
    t = hd.from_dlpack(np.arange(4))
    with pytest.raises(TypeError, match="device must be a"):
        t.copy_to("cpu")
    with pytest.raises(TypeError):
        t.copy((KDL_CPU, 0))  # keyword-only stream
    with pytest.raises(hd.errors.InvalidArgumentError, match="^kInvalidArgument: stream -3 is not"):
        t.copy(stream=-3)
    with pytest.raises(TypeError, match="bool"):
        t.copy_to((KDL_CPU, 0), stream=True)
    with pytest.raises(hd.errors.InvalidArgumentError, match="ambiguous"):
        t.__dlpack__(dl_device=(KDL_CUDA, 0), stream=0, max_version=(1, 0))


def test_padded_sub_byte_copies_keep_their_flag(testing):
    t = hd.from_dlpack(testing.make_capsule(shape=[4], dtype=FLOAT4, flags=FLAG_SUBBYTE_PADDED,
                                            minor=1))
    c = t.copy()
    assert c.flags == FLAG_IS_COPIED | FLAG_SUBBYTE_PADDED and c.nbytes == t.nbytes
    versioned = hd.from_dlpack(t.__dlpack__(copy=True, max_version=(1, 1)))
    assert versioned.flags & FLAG_SUBBYTE_PADDED
    with pytest.raises(BufferError) as raised:
        c.__dlpack__(copy=True)  # legacy, of a writable tensor (a read-only one is refused first)
    assert str(raised.value) == (
        "kInvalidArgument: Tensor::to_dlpack: the tensor's sub-byte elements are padded "
        "(IS_SUBBYTE_TYPE_PADDED), which a legacy DLManagedTensor cannot say; use "
        "to_dlpack_versioned")
    pool = hd.TensorPool(memory="host", block_bytes=64, block_count=1)
    with pytest.raises(hd.errors.NotSupportedError) as raised:
        t.copy_to(pool)
    assert str(raised.value) == ("kNotSupported: Tensor::copy_to(TensorPool&): a pool block holds "
                                 "packed sub-byte elements, not padded ones")
    assert pool.available_blocks() == 1


# ---- device copies (GPU) ----

ROWS, COLS = 256, 1024  # 1 MiB of float32


def slow_import(torch, value, producer):
    """A read-only Tensor of torch memory that `producer` fills with `value` after a long spin;
    its readiness point is the producer's work now. A reader not ordered after it sees zeros."""
    with torch.cuda.stream(producer):
        x = torch.zeros(ROWS, COLS, device="cuda")
        torch.cuda._sleep(SLOW)
        x.fill_(value)
        t = hd.from_dlpack(x)  # torch's current stream is the readiness point
    assert t.readiness_stream == producer.cuda_stream
    return x, t


def all_equal_on(torch, stream, tensor, value):
    """Whether every element of `tensor` is `value`, checked on `stream`."""
    with torch.cuda.stream(stream):
        return bool(torch.all(tensor == value).item())


def test_a_device_copy_export_waits_for_a_slow_producer():
    torch = cuda_torch()
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    x, t = slow_import(torch, 7.0, producer)
    capsule = t.__dlpack__(copy=True, stream=consumer.cuda_stream, max_version=(1, 0))
    assert not producer.query(), "the producer finished before the copy: no race to see"
    with torch.cuda.stream(consumer):
        y = torch.from_dlpack(capsule)
    assert y.data_ptr() != x.data_ptr() and y.device == x.device
    assert all_equal_on(torch, consumer, y, 7.0), "the copy read before the producer finished"


def test_a_device_to_host_export_waits_for_a_slow_producer():
    torch = cuda_torch()
    producer = torch.cuda.Stream()
    _, t = slow_import(torch, 5.0, producer)
    assert not producer.query(), "the producer finished before the copy: no race to see"
    capsule = t.__dlpack__(dl_device=(KDL_CPU, 0), max_version=(1, 0))  # NumPy's request
    host = hd.from_dlpack(capsule)
    assert host.device == hd.DLDevice(KDL_CPU, 0) and host.flags & FLAG_IS_COPIED
    assert (np.from_dlpack(host) == 5.0).all(), "the copy read before the producer finished"
    _, t = slow_import(torch, 6.0, producer)
    assert (np.from_dlpack(t.copy_to((KDL_CPU, 0))) == 6.0).all()


def test_a_pinned_to_device_export_waits_for_a_slow_writer(testing):
    # Pinned memory written by a slow device-to-host copy: the copy to the device, on the
    # consumer's stream, must wait for it, or it takes the zeros.
    torch = cuda_torch()
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    host, _ = slow_pinned_fill(torch, producer, 4.0, ROWS * COLS)
    t = hd.from_dlpack(testing.make_capsule(shape=[ROWS * COLS], device=(KDL_CUDA_HOST, 0),
                                            address=host.data_ptr()), stream=producer)
    capsule = t.__dlpack__(dl_device=(KDL_CUDA, 0), stream=consumer.cuda_stream,
                           max_version=(1, 0))
    assert not producer.query(), "the writer finished before the copy: no race to see"
    with torch.cuda.stream(consumer):
        y = torch.from_dlpack(capsule)
    assert y.is_cuda
    assert all_equal_on(torch, consumer, y, 4.0), "the copy took the pinned memory too early"
    torch.cuda.synchronize()


def test_copy_on_a_busy_stream_orders_its_consumers():
    # The copy waits for the producer and for what its own stream had queued; a consumer on a
    # third stream waits for the copy's readiness point.
    torch = cuda_torch()
    producer, copier, consumer = (torch.cuda.Stream() for _ in range(3))
    _, t = slow_import(torch, 3.0, producer)
    with torch.cuda.stream(copier):
        torch.cuda._sleep(SLOW)
    c = t.copy(stream=copier)
    assert c.readiness_stream == copier.cuda_stream
    assert c.flags & FLAG_IS_COPIED and not c.is_read_only
    assert c.device == hd.DLDevice(KDL_CUDA, torch.cuda.current_device())
    assert not copier.query(), "the copy's stream finished early: no race to see"
    with torch.cuda.stream(consumer):
        y = torch.from_dlpack(c)  # torch passes `consumer`: it waits for the copy
    assert all_equal_on(torch, consumer, y, 3.0), "the consumer read before the copy landed"


def test_a_device_pool_takes_a_copy_in_stream_order():
    torch = cuda_torch()
    producer, copier, consumer = (torch.cuda.Stream() for _ in range(3))
    pool = hd.TensorPool(memory="device", block_bytes=ROWS * COLS * 4, block_count=1)
    _, t = slow_import(torch, 8.0, producer)
    c = t.copy_to(pool, stream=copier)
    assert pool.available_blocks() == 0 and c.readiness_stream == copier.cuda_stream
    assert not producer.query()
    with torch.cuda.stream(consumer):
        y = torch.from_dlpack(c)
    assert all_equal_on(torch, consumer, y, 8.0)
    del y, c
    hd.flush_deferred_releases()
    assert pool.available_blocks() == 1


def test_an_exported_copy_outlives_the_consumers_kernels():
    # The consumer holds the only handle on an exported copy. It drops it while a kernel it
    # queued still has to read it: the memory must not be handed out again before that kernel
    # ran, or a copy made next (cudaMallocAsync reuses freed memory) overwrites it under it.
    torch = cuda_torch()
    consumer, other = torch.cuda.Stream(), torch.cuda.Stream()
    ones, twos = torch.ones(ROWS, COLS, device="cuda"), torch.full((ROWS, COLS), 2.0, device="cuda")
    torch.cuda.synchronize()
    first, second = hd.from_dlpack(ones), hd.from_dlpack(twos)
    capsule = first.__dlpack__(copy=True, stream=consumer.cuda_stream, max_version=(1, 0))
    with torch.cuda.stream(consumer):
        y = torch.from_dlpack(capsule)
        torch.cuda._sleep(SLOW)
        late = y.sum()  # reads the copy after the spin
    assert not consumer.query(), "the consumer finished before the release: no race to see"
    del y, capsule
    hd.flush_deferred_releases()  # the copy's memory goes back as soon as the library lets it
    refill = second.copy(stream=other)
    with torch.cuda.stream(consumer):
        total = late.item()
    assert total == 1.0 * ROWS * COLS, "the copy's memory was reused under the consumer's kernel"
    del refill
    torch.cuda.synchronize()


def test_cupy_asks_for_a_copy_on_its_stream():
    torch = cuda_torch()
    cupy = cuda_cupy()
    producer = torch.cuda.Stream()
    x, t = slow_import(torch, 9.0, producer)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        try:
            y = cupy.from_dlpack(t, copy=True)
        except TypeError as error:
            pytest.skip(f"CuPy {cupy.__version__} has no from_dlpack(copy=...): {error}")
        assert y.data.ptr != x.data_ptr()
        assert bool((y == 9.0).all()), "CuPy's copy read before the producer finished"
