"""TensorPool from Python: host blocks written through NumPy and read back through every path,
exhaustion and impossible requests, block reuse once every handle is gone."""

import gc

import pytest

import holoscan_dlpack as hd
from conftest import KDL_CPU, cuda_device_present

np = pytest.importorskip("numpy")


@pytest.fixture
def pool():
    return hd.TensorPool(memory="host", block_bytes=4096, block_count=2)


def test_pool_describes_itself(pool):
    assert (pool.block_count, pool.block_bytes) == (2, 4096)
    assert pool.device == hd.DLDevice(hd.DLDeviceType.DLCPU, 0)
    assert pool.available_blocks() == 2
    same = hd.TensorPool.create(memory=hd.PoolMemory.kHost, block_bytes=100, block_count=1)
    assert same.block_bytes == 256, "blocks are rounded up to 256 bytes"


def test_host_tensor_written_from_numpy_and_read_back(pool):
    t = pool.allocate((8, 16), "float32")
    assert not t.is_read_only, "pool tensors carry writer authority"
    assert t.shape == (8, 16) and t.dtype == hd.DLDataType(2, 32, 1)
    assert t.device == hd.DLDevice(KDL_CPU, 0)
    writer = np.asarray(t)
    assert writer.flags.writeable and writer.base is t
    writer[:] = np.arange(128, dtype=np.float32).reshape(8, 16)

    expected = np.arange(128, dtype=np.float32).reshape(8, 16)
    through_dlpack = np.from_dlpack(t)
    assert through_dlpack.flags.writeable, "no READ_ONLY flag on a writable export"
    np.testing.assert_array_equal(through_dlpack, expected)
    # Importing a writable Tensor gives a new read-only wrapper over the same memory (5.0).
    for imported in (hd.from_dlpack(t), hd.as_tensor(t), hd.Tensor.as_tensor(t)):
        assert imported is not t and imported.is_read_only and imported.data == t.data
        np.testing.assert_array_equal(np.asarray(imported), expected)
    assert not t.is_read_only, "the writer keeps its authority"
    np.asarray(t)[0, 0] = -1.0
    assert np.asarray(imported)[0, 0] == -1.0


@pytest.mark.parametrize("dtype, code", [
    ("<i2", (0, 16, 1)), ("uint8", (1, 8, 1)), ("bfloat16", (4, 16, 1)),
    ((5, 64, 1), (5, 64, 1)), ("bool", (6, 8, 1)), (hd.DLDataType(2, 16, 1), (2, 16, 1)),
    (np.dtype(np.float64), (2, 64, 1)),
])
def test_dtype_spellings(pool, dtype, code):
    assert pool.allocate([3], dtype).dtype == hd.DLDataType(*code)


def test_exhaustion_and_impossible_requests(pool):
    first = pool.allocate([4], "int32")
    second = pool.allocate([4], "int32")
    with pytest.raises(hd.errors.ResourceExhaustedError, match="kResourceExhausted") as raised:
        pool.allocate([4], "int32")
    assert raised.value.code == hd.ErrorCode.RESOURCE_EXHAUSTED
    with pytest.raises(hd.errors.InvalidArgumentError, match="kInvalidArgument"):
        pool.allocate([4096], "float64")  # can never fit a block, exhausted or not
    with pytest.raises(hd.errors.InvalidArgumentError):
        pool.allocate([2], "<q9")
    with pytest.raises(TypeError):
        pool.allocate([2], 3.5)
    del first, second
    gc.collect()
    assert pool.available_blocks() == 2


def test_blocks_come_back_only_when_every_handle_is_gone(pool):
    t = pool.allocate([16], "uint8")
    view = np.asarray(t)
    consumer = np.from_dlpack(t)
    # A writable block has one DLPack export at a time (Holoscan 5.0): the consumer's is alive.
    with pytest.raises(BufferError, match="active mutable DLPack export"):
        t.__dlpack__(max_version=(1, 0))
    del t
    gc.collect()
    assert pool.available_blocks() == 1
    del view
    gc.collect()
    assert pool.available_blocks() == 1, "the consumer's export still names the block"
    del consumer
    gc.collect()
    assert pool.available_blocks() == 2
    t = pool.allocate([16], "uint8")
    capsule = t.__dlpack__(max_version=(1, 0))
    del t
    gc.collect()
    assert pool.available_blocks() == 1, "an unconsumed export still names the block"
    del capsule
    assert pool.available_blocks() == 2
    both = [pool.allocate([16], "uint8"), pool.allocate([16], "uint8")]
    assert pool.reuse_count == 2, "the block handed out first came back twice"
    assert all(t.size == 16 for t in both)


def test_bad_pool_configurations():
    with pytest.raises(hd.errors.InvalidArgumentError, match="memory"):
        hd.TensorPool(memory="disk", block_bytes=256, block_count=1)
    with pytest.raises(TypeError):
        hd.TensorPool("host", 0, 256, 1)  # keyword-only, as the config's fields
    # Only a name or a PoolMemory: nothing that merely converts to one (False asked for a device
    # pool, True and 1 for a host pool, another enum by its value).
    for memory in (True, False, 1, hd.DLDeviceType.DLCPU):
        with pytest.raises(TypeError, match="memory must be 'device', 'host' or a PoolMemory"):
            hd.TensorPool(memory=memory, block_bytes=256, block_count=1)
    if not cuda_device_present():
        # A failed CUDA call is kFailure (Holoscan 5.0 has no CUDA code): FailureError.
        with pytest.raises(hd.errors.FailureError, match="kFailure") as raised:
            hd.TensorPool(memory="device", block_bytes=256, block_count=1)
        assert raised.value.token == "FAILURE"


def test_shareable_pools_are_device_pools():
    with pytest.raises(hd.errors.InvalidArgumentError) as raised:
        hd.TensorPool(memory="host", block_bytes=256, block_count=1, shareable=True)
    assert str(raised.value) == ("kInvalidArgument: TensorPool::create: only device memory can "
                                 "be shareable")
    if cuda_device_present():  # the VMM API, exportable as a POSIX fd
        shared = hd.TensorPool(memory="device", block_bytes=1 << 20, block_count=2, shareable=True)
        assert shared.allocate((16,), "float32").device.device_type == hd.DLDeviceType.DLCUDA


def test_allocate_takes_a_producer_stream_by_keyword():
    pool = hd.TensorPool(memory="host", block_bytes=256, block_count=1)
    with pytest.raises(TypeError):
        pool.allocate([4], "float32", 1)  # keyword-only
    with pytest.raises(TypeError, match="not a bool"):
        pool.allocate([4], "float32", stream=True)
    with pytest.raises(hd.errors.InvalidArgumentError, match="is not a stream"):
        pool.allocate([4], "float32", stream=-(2**70))
    if cuda_device_present():
        t = pool.allocate([4], "float32", stream=2)  # the per-thread default stream
        assert t.shape == (4,)
