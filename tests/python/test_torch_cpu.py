"""PyTorch CPU tensors both ways, on any machine with torch: zero-copy round trips (torch's C
exchange API in, our `__dlpack__` out), torch.utils.dlpack's capsules, the dtypes NumPy lacks
(bfloat16, float8), and the layouts torch makes (strided, zero-size, 0-d). torch cannot hold
negative strides, so those stay with the NumPy tests."""

import pytest

import holoscan_dlpack as hd
from conftest import FLAG_IS_COPIED, FLAG_READ_ONLY

torch = pytest.importorskip("torch")
dlpack = pytest.importorskip("torch.utils.dlpack")


def test_round_trip_is_zero_copy_and_read_only():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    t = hd.from_dlpack(x)
    assert t.data == x.data_ptr() and t.is_read_only
    assert (t.shape, t.strides) == ((3, 4), (16, 4))
    for back in (torch.from_dlpack(t), dlpack.from_dlpack(t)):
        assert back.data_ptr() == x.data_ptr()
        assert torch.equal(back, x)
    x[2, 3] = -1.0  # the producer still writes; every view sees it
    assert t.__array_interface__["data"][0] == x.data_ptr()
    assert torch.from_dlpack(t)[2, 3] == -1.0


def test_torch_consumers_get_the_read_only_flag_or_a_refusal():
    t = hd.from_dlpack(torch.arange(4, dtype=torch.int32))
    assert hd.from_dlpack(t.__dlpack__(max_version=(1, 0))).flags & FLAG_READ_ONLY
    with pytest.raises(BufferError, match="read-only"):
        dlpack.from_dlpack(t.__dlpack__())  # a legacy capsule cannot carry the flag
    pool = hd.TensorPool(memory="host", block_bytes=64, block_count=1)
    writable = pool.allocate([4], "int32")
    shared = dlpack.from_dlpack(writable.__dlpack__())  # a writable tensor may go legacy
    assert shared.data_ptr() == writable.data
    shared.fill_(7)
    with pytest.raises(BufferError, match="active mutable DLPack export"):
        torch.from_dlpack(writable)  # one mutable export at a time, as in Holoscan 5.0
    del shared
    assert torch.equal(torch.from_dlpack(writable), torch.full((4,), 7, dtype=torch.int32))


def test_an_exported_copy_is_torchs_own():
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3)[:, ::2]
    capsule = hd.from_dlpack(x).__dlpack__(copy=True, max_version=(1, 0))
    y = dlpack.from_dlpack(capsule)
    assert y.data_ptr() != x.data_ptr() and y.is_contiguous()
    assert torch.equal(y, x)
    y.zero_()
    assert x.abs().sum() > 0, "the copy wrote through to its source"
    copied = hd.from_dlpack(hd.from_dlpack(x).__dlpack__(copy=True, max_version=(1, 0)))
    assert copied.flags & FLAG_IS_COPIED and not copied.flags & FLAG_READ_ONLY


def dtypes():
    cases = [("bool", (6, 8, 1)), ("float16", (2, 16, 1)), ("bfloat16", (4, 16, 1)),
             ("int8", (0, 8, 1)), ("uint8", (1, 8, 1)), ("complex64", (5, 64, 1)),
             ("float8_e4m3fn", (10, 8, 1)), ("float8_e5m2", (12, 8, 1))]
    return [pytest.param(name, code, id=name) for name, code in cases]


@pytest.mark.parametrize("name, dl_dtype", dtypes())
def test_dtypes_keep_their_code_both_ways(name, dl_dtype):
    dtype = getattr(torch, name, None)
    if dtype is None:
        pytest.skip(f"torch {torch.__version__} has no {name}")
    if dl_dtype[0] > 6 and hd.DLPACK_VERSION < (1, 1):
        pytest.skip("built against DLPack 1.0, which has no float8 types")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3).to(dtype)
    for import_ in (hd.from_dlpack, hd.as_tensor):
        t = import_(x)
        assert t.dtype == hd.DLDataType(*dl_dtype)
        assert t.itemsize == x.element_size() and t.data == x.data_ptr()
        back = torch.from_dlpack(t)
        assert back.dtype == dtype and back.data_ptr() == x.data_ptr()
        assert torch.equal(back.view(torch.uint8), x.view(torch.uint8))


@pytest.mark.parametrize("make", [
    lambda: torch.arange(24, dtype=torch.int32).reshape(4, 6)[:, ::2],
    lambda: torch.arange(24, dtype=torch.int64).reshape(4, 6).t(),
    lambda: torch.arange(24, dtype=torch.float32).reshape(2, 3, 4).permute(2, 0, 1)[1:],
    lambda: torch.zeros((3, 0, 2), dtype=torch.uint8),
    lambda: torch.zeros((0,), dtype=torch.float32),
    lambda: torch.tensor(3.5, dtype=torch.float64),
    lambda: torch.arange(4.0).expand(3, 4),
], ids=["step", "transposed", "permuted", "zero-extent", "empty", "0-d", "broadcast"])
def test_layouts_round_trip(make):
    x = make()
    t = hd.from_dlpack(x)
    assert t.shape == tuple(x.shape) and t.ndim == x.dim() and t.size == x.numel()
    if x.numel():
        assert t.data == x.data_ptr()
        assert t.strides == tuple(s * x.element_size() for s in x.stride())
    assert t.is_contiguous() == (x.is_contiguous() or x.numel() <= 1)
    back = torch.from_dlpack(t)
    assert back.shape == x.shape and torch.equal(back, x)
    if x.numel():
        assert back.data_ptr() == x.data_ptr() and back.stride() == x.stride()
