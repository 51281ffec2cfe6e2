"""Exports of device tensors, checked without a GPU: a producer that reports CUDA memory (host
memory underneath, never touched by a kernel) stands in for one. The stream-argument table of
`__dlpack__`, the CUDA array interface, copies that need a device, and dtype names."""

import pytest

import holoscan_dlpack as hd
from conftest import FLAG_IS_COPIED, KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, cuda_device_present


@pytest.fixture
def device_tensor(testing):
    # A bare capsule without a stream records no readiness, so that no stream is touched here.
    return hd.as_tensor(testing.make_capsule(shape=[2, 3], device=(KDL_CUDA, 0)))


class CudaStreamProtocol:
    """An object with the CUDA stream protocol's __cuda_stream__() -> (version, handle)."""

    def __init__(self, handle, version=0):
        self.handle, self.version, self.calls = handle, version, 0

    def __cuda_stream__(self):
        self.calls += 1
        return (self.version, self.handle)


# Holoscan 5.0's table: None/1 legacy default, 2 per-thread default, -1 no synchronization, a
# stream pointer, or an object with __cuda_stream__(); the legacy default object is a 0 handle.
VALID_STREAMS = [None, 1, 2, -1, CudaStreamProtocol(0), CudaStreamProtocol(1),
                 CudaStreamProtocol(2)]


@pytest.mark.parametrize("stream", VALID_STREAMS, ids=repr)
def test_every_valid_stream_is_taken(device_tensor, stream):
    capsule = device_tensor.__dlpack__(stream=stream, max_version=(1, 0))
    assert "dltensor_versioned" in repr(capsule)
    assert hd.from_dlpack(capsule).data == device_tensor.data


def test_a_stream_pointer_is_taken(device_tensor):
    if cuda_device_present():
        pytest.skip("a made-up stream handle would reach a real driver (GPU tests use real ones)")
    assert device_tensor.__dlpack__(stream=0x7F00DEAD, max_version=(1, 0)) is not None
    assert device_tensor.__dlpack__(stream=CudaStreamProtocol(0x7F00DEAD),
                                    max_version=(1, 0)) is not None


@pytest.mark.parametrize("stream, error, match", [
    (0, hd.errors.InvalidArgumentError, "ambiguous"),
    (-2, hd.errors.InvalidArgumentError, "not a stream"),
    (True, TypeError, "bool"),
    ("default", TypeError, "stream"),
    (1.0, TypeError, "stream"),
    (CudaStreamProtocol(5, version=1), hd.errors.InvalidArgumentError, "version must be 0"),
    # -1 means "no synchronization" only as the protocol's integer: an object's handle is a stream.
    (CudaStreamProtocol(-1), hd.errors.InvalidArgumentError,
     "__cuda_stream__ stream pointer must be non-negative, not -1"),
], ids=["zero", "negative", "bool", "str", "float", "protocol-version", "object-handle-minus-1"])
def test_invalid_streams_are_refused(device_tensor, stream, error, match):
    with pytest.raises(error, match=match) as raised:
        device_tensor.__dlpack__(stream=stream, max_version=(1, 0))
    if issubclass(error, hd.errors.HoloscanError):
        assert raised.value.code == hd.errors.ErrorCode.INVALID_ARGUMENT


def test_a_cuda_stream_object_is_asked_once(device_tensor):
    stream = CudaStreamProtocol(1)
    device_tensor.__dlpack__(stream=stream, max_version=(1, 0))
    assert stream.calls == 1


@pytest.mark.parametrize("device", [(KDL_CPU, 0), (KDL_CUDA_HOST, 0)], ids=["cpu", "pinned"])
def test_host_tensors_wait_on_no_stream_but_refuse_what_is_none(testing, device):
    # Holoscan 5.0 (its binary, run): "Ignored for host tensors", but a value that is no stream
    # (0, -2, a str, an unknown protocol version) is refused there as for any tensor.
    host = hd.from_dlpack(testing.make_capsule(shape=[2], device=device))
    for stream in (None, 1, 2, -1, 0x7F00DEAD, CudaStreamProtocol(2)):
        assert host.__dlpack__(stream=stream, max_version=(1, 0)) is not None
        assert host.__dlpack__(stream=stream, copy=True, dl_device=(KDL_CPU, 0),
                               max_version=(1, 0)) is not None
    for stream in (0, -2, "default", CudaStreamProtocol(5, version=1)):
        with pytest.raises((hd.errors.InvalidArgumentError, TypeError)):
            host.__dlpack__(stream=stream, max_version=(1, 0))


def test_a_host_tensors_copy_into_device_memory_still_checks_the_stream(testing):
    # The copy is queued on the consumer's stream: checked before anything is copied.
    host = hd.from_dlpack(testing.make_capsule(shape=[2]))
    with pytest.raises(hd.errors.InvalidArgumentError, match="ambiguous"):
        host.__dlpack__(stream=0, dl_device=(KDL_CUDA, 0), max_version=(1, 0))


def test_read_only_tensor_refuses_a_legacy_capsule(device_tensor):
    assert device_tensor.is_read_only
    with pytest.raises(BufferError, match="read-only"):
        device_tensor.__dlpack__()
    with pytest.raises(BufferError, match="read-only"):
        device_tensor.__dlpack__(max_version=(0, 8))
    assert device_tensor.__dlpack__(max_version=(1, 0)) is not None


def test_other_devices_need_a_copy(device_tensor):
    with pytest.raises(BufferError, match="copy=False cannot satisfy"):
        device_tensor.__dlpack__(dl_device=(KDL_CPU, 0), copy=False, max_version=(1, 0))
    with pytest.raises(BufferError, match="copy=False"):
        device_tensor.__dlpack__(dl_device=(KDL_CUDA, 1), copy=False)
    assert device_tensor.__dlpack__(dl_device=(KDL_CUDA, 0), max_version=(1, 0)) is not None
    assert device_tensor.__dlpack__(dl_device=(int(hd.DLDeviceType.DLCUDA), 0),
                                    copy=False, max_version=(1, 0)) is not None
    # Holoscan 5.0 takes a tuple only: a DLDevice or a name is a ValueError there too.
    for other in ("cuda:0", hd.DLDevice(KDL_CUDA, 0)):
        with pytest.raises(ValueError, match="^dl_device must be a tuple of"):
            device_tensor.__dlpack__(dl_device=other)
    assert device_tensor.__dlpack_device__() == (KDL_CUDA, 0)
    assert all(type(v) is int for v in device_tensor.__dlpack_device__())


KDL_CUDA_MANAGED = int(hd.DLDeviceType.DLCUDAMANAGED)


@pytest.mark.parametrize("stored, reported", [
    ((KDL_CPU, 3), (KDL_CPU, 0)),
    ((KDL_CUDA_HOST, 2), (KDL_CUDA_HOST, 0)),
    ((KDL_CUDA_MANAGED, 1), (KDL_CUDA_MANAGED, 0)),
    ((KDL_CUDA, 1), (KDL_CUDA, 1)),
], ids=["cpu", "pinned", "managed", "cuda"])
def test_dlpack_device_reports_device_id_0_for_memory_no_device_owns(testing, stored, reported):
    # Holoscan 5.0: CUDA tensors keep their ordinal; CPU, pinned and managed ones report 0.
    t = hd.as_tensor(testing.make_capsule(shape=[2], device=stored))
    assert t.__dlpack_device__() == reported
    assert all(type(v) is int for v in t.__dlpack_device__())
    assert (t.device.device_type, t.device.device_id) == stored, "the producer's id is kept"
    # The device reported is the tensor's own: asking for it needs no copy.
    capsule = t.__dlpack__(dl_device=reported, copy=False, max_version=(1, 0))
    assert hd.from_dlpack(capsule).data == t.data


@pytest.mark.parametrize("stored", [(KDL_CPU, 3), (KDL_CUDA_HOST, 2)], ids=["cpu", "pinned"])
def test_an_import_through_the_protocol_is_not_a_copy(testing, stored):
    # from_dlpack asks for no dl_device: the producer's own device, no copy.
    t = hd.as_tensor(testing.make_capsule(shape=[2], device=stored))
    asked = []

    class Producer:
        def __dlpack_device__(self):
            return t.__dlpack_device__()

        def __dlpack__(self, **kwargs):
            asked.append(sorted(kwargs))
            return t.__dlpack__(**kwargs)

    again = hd.from_dlpack(Producer())
    assert again.data == t.data and not again.flags & FLAG_IS_COPIED
    assert asked == [["copy", "max_version"]]


@pytest.mark.parametrize("stored", [(KDL_CPU, 3), (KDL_CUDA_HOST, 2)], ids=["cpu", "pinned"])
def test_an_export_without_dl_device_is_of_the_tensors_own_device(testing, stored):
    # No dl_device asks for the tensor's own device, whatever host id it stores (as in Holoscan
    # 5.0); it was refused as "a host device other than 0".
    t = hd.as_tensor(testing.make_capsule(shape=[2], device=stored))
    again = hd.from_dlpack(t.__dlpack__(max_version=(1, 0)))
    assert again.data == t.data and not again.flags & FLAG_IS_COPIED
    assert (again.device.device_type, again.device.device_id) == stored


@pytest.mark.parametrize("reported", [(KDL_CPU, 0), (KDL_CPU, 3)], ids=["id 0", "id 3"])
def test_a_host_producer_reporting_any_host_id_is_imported_as_in_holoscan_5_0(reported):
    # NumPy refuses any dl_device but (1, 0): a producer that reports another host id and hands
    # the keywords on to NumPy was refused while its own answer was handed back as dl_device.
    np = pytest.importorskip("numpy")
    array = np.arange(4.0)

    class Producer:
        def __dlpack_device__(self):
            return reported

        def __dlpack__(self, **kwargs):
            return array.__dlpack__(**kwargs)

    t = hd.from_dlpack(Producer())
    assert t.data == array.ctypes.data and list(np.from_dlpack(t)) == [0.0, 1.0, 2.0, 3.0]


def test_copies_of_device_memory_need_the_gpu(device_tensor):
    if cuda_device_present():
        pytest.skip("the stand-in's memory is host memory: GPU tests copy real device memory")
    # Tensor::copy_to on the consumer's stream, which CUDA cannot use here.
    for request in (dict(dl_device=(KDL_CPU, 0)), dict(copy=True)):
        with pytest.raises(BufferError, match="^kFailure: .*cudaErrorInsufficientDriver"):
            device_tensor.__dlpack__(max_version=(1, 0), **request)
    with pytest.raises(hd.errors.FailureError, match="cudaErrorInsufficientDriver"):
        device_tensor.copy()
    with pytest.raises(hd.errors.FailureError, match="cudaErrorInsufficientDriver"):
        device_tensor.copy_to((KDL_CPU, 0))


KDL_CUDA_MANAGED = 13


@pytest.mark.parametrize("source, request_", [
    ((KDL_CUDA, 0), dict(copy=True)),
    ((KDL_CUDA, 0), dict(dl_device=(KDL_CPU, 0))),
    ((KDL_CUDA_MANAGED, 0), dict(copy=True)),
    ((KDL_CPU, 0), dict(dl_device=(KDL_CUDA, 0))),
    ((KDL_CPU, 0), dict(dl_device=(KDL_CUDA_MANAGED, 0), copy=True)),
], ids=["device", "device-to-host", "managed", "host-to-device", "host-to-managed"])
def test_a_device_copy_without_synchronization_is_refused(testing, collect, source, request_):
    # Holoscan 5.0: a copy from or to device memory is queued on the consumer's stream, and -1
    # names none; refused before any copy is made (no CUDA call: this runs without a driver).
    deleted = testing.deleter_calls()
    t = hd.as_tensor(testing.make_capsule(shape=[4], device=source))
    with pytest.raises(BufferError, match="stream=-1 cannot order an explicit Tensor copy"):
        t.__dlpack__(max_version=(1, 0), stream=-1, **request_)
    del t
    collect()
    assert testing.deleter_calls() == deleted + 1, "the refused export leaked or freed twice"


def test_cuda_array_interface_of_a_device_tensor(device_tensor):
    interface = device_tensor.__cuda_array_interface__
    assert interface["version"] == 3
    assert interface["shape"] == (2, 3)
    assert interface["typestr"] == "<f4"
    assert interface["data"] == (device_tensor.data, True)
    # The test producer gives no strides (compact): None, as Holoscan 5.0 gives then; keys in its
    # order.
    assert interface["strides"] is None
    assert list(interface)[:6] == ["shape", "typestr", "data", "version", "strides", "descr"]
    # Holoscan 5.0 names the legacy default stream in every device dict, readiness point or not.
    assert interface["stream"] == 1
    # Holoscan 5.0's dict also carries descr (one unnamed field) and an absent mask.
    assert interface["descr"] == [("", "<f4")]
    assert "mask" in interface and interface["mask"] is None
    with pytest.raises(AttributeError, match="host tensors"):
        device_tensor.__array_interface__  # noqa: B018


def test_cuda_array_interface_of_a_zero_size_tensor_gives_address_0(testing):
    # The CUDA Array Interface: "For zero-size arrays, use 0 here."
    t = hd.as_tensor(testing.make_capsule(shape=[2, 0], device=(KDL_CUDA, 0)))
    assert t.size == 0
    assert t.data != 0, "the test needs a tensor whose view has an address"
    assert t.__cuda_array_interface__["data"] == (0, True)


def test_cuda_array_interface_names_the_legacy_stream_once_ready(testing):
    if not cuda_device_present():
        pytest.skip("a readiness point needs a CUDA driver (GPU test)")
    t = hd.from_dlpack(testing.make_capsule(shape=[2], device=(KDL_CUDA, 0)), stream=2)
    assert t.has_readiness_stream_contract()
    assert t.__cuda_array_interface__["stream"] == 1


def test_cuda_array_interface_import_checks_its_stream():
    class Interface:
        def __init__(self, stream):
            self.__cuda_array_interface__ = {"shape": (0,), "typestr": "<f4", "version": 3,
                                             "data": (0, False), "stream": stream}

    assert hd.as_tensor(Interface(None)).device == hd.DLDevice(KDL_CUDA, 0)
    with pytest.raises(hd.errors.InvalidArgumentError, match="ambiguous"):
        hd.as_tensor(Interface(0))
    with pytest.raises(hd.errors.InvalidArgumentError, match="-1"):
        hd.as_tensor(Interface(-1))


def test_dtype_of_types_numpy_lacks(testing):
    for dtype in [(4, 16, 1), (10, 8, 1), (2, 32, 4)]:
        t = hd.from_dlpack(testing.make_capsule(dtype=dtype))
        assert t.dtype == hd.DLDataType(*dtype)
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == dtype
        with pytest.raises(BufferError, match="numpy_dtype"):
            t.__array_interface__  # noqa: B018
