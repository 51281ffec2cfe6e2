"""Exports of device tensors, checked without a GPU: a producer that reports CUDA memory (host
memory underneath, never touched by a kernel) stands in for one."""

import pytest

import holoscan_dlpack as hd
from conftest import KDL_CUDA


@pytest.fixture
def device_tensor(testing):
    return hd.from_dlpack(testing.make_capsule(shape=[2, 3], device=(KDL_CUDA, 0)), stream=-1)


def test_stream_arguments_follow_the_array_api(device_tensor):
    with pytest.raises(ValueError, match="ambiguous"):
        device_tensor.__dlpack__(stream=0)
    for stream in (None, -1, 1, 2):
        assert device_tensor.__dlpack__(stream=stream, max_version=(1, 0)) is not None
    with pytest.raises(BufferError, match="dl_device"):
        device_tensor.__dlpack__(dl_device=(KDL_CUDA, 1))
    assert device_tensor.__dlpack_device__() == (KDL_CUDA, 0)


def test_cuda_array_interface_of_a_device_tensor(device_tensor):
    interface = device_tensor.__cuda_array_interface__
    assert interface["version"] == 3
    assert interface["shape"] == (2, 3)
    assert interface["typestr"] == "<f4"
    assert interface["data"] == (device_tensor.data, True)
    assert interface["strides"] is None
    assert interface["stream"] is None, "no readiness point: nothing to wait for"
    with pytest.raises(AttributeError, match="host tensors"):
        device_tensor.__array_interface__  # noqa: B018


def test_cuda_array_interface_import_checks_its_stream():
    class Interface:
        def __init__(self, stream):
            self.__cuda_array_interface__ = {"shape": (0,), "typestr": "<f4", "version": 3,
                                             "data": (0, False), "stream": stream}

    assert hd.as_tensor(Interface(None)).device == (KDL_CUDA, 0)
    with pytest.raises(ValueError, match="ambiguous"):
        hd.as_tensor(Interface(0))


def test_dtype_names_for_types_numpy_lacks(testing):
    for dtype, name in [((4, 16, 1), "bfloat16"), ((10, 8, 1), "float8_e4m3fn"),
                        ((2, 32, 4), "float32x4")]:
        t = hd.from_dlpack(testing.make_capsule(dtype=dtype))
        assert t.dtype == name
        assert t.dl_dtype == dtype
        with pytest.raises(BufferError, match="numpy_dtype"):
            t.__array_interface__  # noqa: B018
