"""Tensor as Holoscan 5.0's holoscan.Tensor: its properties, DLDevice and DLDataType with the
DLDeviceType and DLDataTypeCode IntEnums spelled as 5.0 spells them, and the old spellings kept
as deprecated aliases that warn."""

import re

import pytest

import holoscan_dlpack as hd

np = pytest.importorskip("numpy")

DEVICE_TYPES = {"DLCPU": 1, "DLCUDA": 2, "DLCUDAHOST": 3, "DLOPENCL": 4, "DLVULKAN": 7,
                "DLMETAL": 8, "DLVPI": 9, "DLROCM": 10, "DLROCMHOST": 11, "DLEXTDEV": 12,
                "DLCUDAMANAGED": 13, "DLONEAPI": 14, "DLWEBGPU": 15, "DLHEXAGON": 16,
                "DLMAIA": 17, "DLTRN": 18}
TYPE_CODES = {"DLINT": 0, "DLUINT": 1, "DLFLOAT": 2, "DLOPAQUEHANDLE": 3, "DLBFLOAT": 4,
              "DLCOMPLEX": 5, "DLBOOL": 6, "DLFLOAT8_E3M4": 7, "DLFLOAT8_E4M3": 8,
              "DLFLOAT8_E4M3B11FNUZ": 9, "DLFLOAT8_E4M3FN": 10, "DLFLOAT8_E4M3FNUZ": 11,
              "DLFLOAT8_E5M2": 12, "DLFLOAT8_E5M2FNUZ": 13, "DLFLOAT8_E8M0FNU": 14,
              "DLFLOAT6_E2M3FN": 15, "DLFLOAT6_E3M2FN": 16, "DLFLOAT4_E2M1FN": 17}


def test_enums_are_holoscan_50s():
    assert {m.name: m.value for m in hd.DLDeviceType} == DEVICE_TYPES
    assert {m.name: m.value for m in hd.DLDataTypeCode} == TYPE_CODES
    assert issubclass(hd.DLDeviceType, int) and issubclass(hd.DLDataTypeCode, int)


def test_properties_of_a_strided_import():
    a = np.arange(60, dtype=np.int16).reshape(5, 12)[1:, ::3]
    t = hd.Tensor.from_dlpack(a)
    assert (t.ndim, t.shape, t.strides, t.size) == (2, (4, 4), (24, 6), 16)
    assert (t.itemsize, t.nbytes, t.is_contiguous()) == (2, 32, False)
    assert t.data == a.ctypes.data and t.byte_offset == 0
    assert t.is_read_only is True
    assert t.dtype == hd.DLDataType(hd.DLDataTypeCode.DLINT, 16, 1)
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (0, 16, 1)
    assert type(t.dtype.code) is int, "5.0 types code as int"
    assert t.device.device_type is hd.DLDeviceType.DLCPU and t.device.device_id == 0


def test_byte_offset_is_the_producers(testing):
    t = hd.from_dlpack(testing.make_capsule(shape=[4], byte_offset=16))
    assert t.byte_offset == 16
    again = hd.from_dlpack(t.__dlpack__(max_version=(1, 0)))
    assert (again.data, again.byte_offset) == (t.data, 16)
    assert np.from_dlpack(t).ctypes.data == t.data, "data is the first element's address"


def test_dl_device_and_dl_data_type_values():
    cuda = hd.DLDevice(hd.DLDeviceType.DLCUDA, 1)
    assert (cuda.device_type, cuda.device_id) == (hd.DLDeviceType.DLCUDA, 1)
    assert cuda == hd.DLDevice(2, 1) and cuda != hd.DLDevice(2, 0)
    assert hash(cuda) == hash(hd.DLDevice(2, 1))
    assert repr(cuda) == "DLDevice(device_type=kDLCUDA, device_id=1)"  # as Holoscan 5.0 writes it
    assert repr(hd.DLDevice(99, 0)) == "DLDevice(device_type=99, device_id=0)"
    assert hd.DLDevice(99, 0).device_type == 99
    with pytest.raises(AttributeError):
        cuda.device_id = 0  # read-only, as in 5.0
    dtype = hd.DLDataType(2, 32, 1)
    assert repr(dtype) == "DLDataType(code=DLFLOAT, bits=32, lanes=1)"
    assert repr(hd.DLDataType(200, 8, 1)) == "DLDataType(code=200, bits=8, lanes=1)"  # unnamed
    dtype.lanes = 4  # writable fields, as in 5.0
    assert dtype == hd.DLDataType(2, 32, 4) and dtype != hd.DLDataType(2, 32, 1)
    with pytest.raises(TypeError):
        hd.DLDataType(2, 256, 1)  # bits are 8 bits wide


def test_dl_data_type_hashes_by_value():
    # Hashable as in 5.0, and consistent with the value equality: equal values hash equal.
    f32, again, f64 = hd.DLDataType(2, 32, 1), hd.DLDataType(2, 32, 1), hd.DLDataType(2, 64, 1)
    assert f32 is not again and hash(f32) == hash(again)
    assert {f32, again, f64} == {f32, f64} and len({f32, again, f64}) == 2
    names = {f32: "float32", f64: "float64"}
    assert names[hd.DLDataType(2, 32, 1)] == "float32"
    assert hd.from_dlpack(np.arange(3, dtype=np.float64)).dtype in names
    vector = hd.DLDataType(2, 32, 1)
    vector.lanes = 4
    assert hash(vector) == hash(hd.DLDataType(2, 32, 4)) != hash(f32)


@pytest.mark.parametrize("kind", ["DLDevice", "DLDataType"])
@pytest.mark.parametrize("other", [None, 5, object(), [1, 0]])
def test_dl_values_are_unequal_to_other_objects(kind, other):
    # Python's rule for ==: another type is unequal, never an error (`value == None` included).
    value = hd.DLDevice(1, 0) if kind == "DLDevice" else hd.DLDataType(2, 32, 1)
    assert not value == other and value != other
    assert not other == value and other != value


def test_old_spellings_warn_and_still_work():
    a = np.arange(6, dtype=np.float32)
    t = hd.from_dlpack(a)
    with pytest.deprecated_call(match="is_read_only"):
        assert t.read_only is True
    with pytest.deprecated_call(match="DLDataType"):
        assert t.dl_dtype == (2, 32, 1)
    with pytest.deprecated_call(match="NumPy type string"):
        assert t.dtype == "<f4"
    with pytest.deprecated_call(match="NumPy type string"):
        assert t.dtype != "<f8"
    with pytest.deprecated_call(match="tuple"):
        assert t.device == (1, 0)
    with pytest.deprecated_call(match="tuple"):
        device_type, device_id = t.device
    assert (device_type, device_id) == (1, 0)
    with pytest.deprecated_call(match="tuple"):
        assert t.device[1] == 0
    with pytest.deprecated_call(match="synchronize_for_consumer_stream"):
        assert t.synchronize_for_consumer(1) is False  # no readiness point: nothing to order
    assert t.synchronize_for_consumer_stream(1) is False


def test_tensor_has_no_public_constructor():
    with pytest.raises(TypeError):
        hd.Tensor()


@pytest.mark.parametrize("duplicate", ["pickle.dumps", "copy.copy", "copy.deepcopy"])
def test_a_tensor_is_not_pickled_or_copied_by_the_copy_module(duplicate):
    # As Holoscan 5.0's Tensor (its stub declares no pickling): a Tensor is a handle on memory that
    # may be a device's or a producer's; an owning copy is Tensor.copy() or copy_to(), asked for.
    import copy
    import pickle

    call = {"pickle.dumps": pickle.dumps, "copy.copy": copy.copy,
            "copy.deepcopy": copy.deepcopy}[duplicate]
    with pytest.raises(TypeError) as raised:
        call(hd.as_tensor(np.arange(3.0)))
    # Python 3.12 names the type with its module ("holoscan_dlpack._core.Tensor"), 3.11 without.
    assert re.fullmatch(r"cannot pickle '(holoscan_dlpack\._core\.)?Tensor' object",
                        str(raised.value)), str(raised.value)


def test_the_tensor_submodule_holds_50s_value_types():
    # Holoscan 5.0 keeps the DLPack value types in holoscan.tensor, beside holoscan.Tensor.
    from holoscan_dlpack import tensor

    assert hd.tensor is tensor
    assert (tensor.DLDevice, tensor.DLDataType, tensor.DLDeviceType, tensor.DLDataTypeCode) == (
        hd.DLDevice, hd.DLDataType, hd.DLDeviceType, hd.DLDataTypeCode)
    t = hd.from_dlpack(np.arange(3.0))
    assert isinstance(t.device, tensor.DLDevice) and isinstance(t.dtype, tensor.DLDataType)
    assert {"DLDataType", "DLDataTypeCode", "DLDevice", "DLDeviceType",
            "is_tensor_like"} <= set(tensor.__all__)


class Attributes:
    """An object with the given attributes and nothing else."""

    def __init__(self, *names):
        for name in names:
            setattr(self, name, None)


class CountingInterface:
    """An array interface whose every read is counted (a property may synchronize)."""

    reads = 0

    @property
    def __array_interface__(self):
        type(self).reads += 1
        return np.arange(3).__array_interface__


@pytest.mark.parametrize("obj, like", [
    (np.arange(3), True),
    (hd.from_dlpack(np.arange(3)), True),
    (Attributes("__dlpack__", "__dlpack_device__"), True),
    (Attributes("__cuda_array_interface__"), True),
    (Attributes("__array_interface__"), True),
    (Attributes("__dlpack__"), False),  # the DLPack protocol is both methods
    (Attributes("__dlpack_device__"), False),
    (3, False),
    ([1, 2], False),
    ("text", False),
], ids=["numpy", "tensor", "dlpack", "cuda-interface", "host-interface", "dlpack-only",
        "device-only", "int", "list", "str"])
def test_is_tensor_like_names_what_as_tensor_takes(obj, like):
    from holoscan_dlpack.tensor import is_tensor_like

    assert is_tensor_like(obj) is like


def test_is_tensor_like_reads_no_interface():
    from holoscan_dlpack.tensor import is_tensor_like

    assert is_tensor_like(CountingInterface())
    assert CountingInterface.reads == 0, "is_tensor_like evaluated the interface"


class ForwardingProxy:
    """A proxy that forwards every attribute it lacks to the object it wraps (``__getattr__``)."""

    def __init__(self, wrapped):
        self._wrapped = wrapped

    def __getattr__(self, name):
        return getattr(self._wrapped, name)


@pytest.mark.parametrize("wrapped, like", [
    (np.arange(3.0), True),
    (Attributes("__array_interface__"), True),
    (Attributes("__dlpack__"), False),
    (3, False),
], ids=["numpy", "host-interface", "dlpack-only", "int"])
def test_is_tensor_like_asks_an_object_that_forwards_its_attributes(wrapped, like):
    # Holoscan 5.0: "whether an object is convertible to a Tensor". as_tensor takes a proxy whose
    # __getattr__ forwards the protocol, so is_tensor_like names it too.
    from holoscan_dlpack.tensor import is_tensor_like

    proxy = ForwardingProxy(wrapped)
    assert is_tensor_like(proxy) is like
    if like and isinstance(wrapped, np.ndarray):
        assert hd.as_tensor(proxy).shape == (3,)


def test_is_tensor_like_takes_a_failing_dynamic_lookup_as_absent():
    from holoscan_dlpack.tensor import is_tensor_like

    class Failing:
        def __getattr__(self, name):
            raise RuntimeError(name)

    assert is_tensor_like(Failing()) is False


def test_is_tensor_like_looks_up_the_exchange_api_on_the_type():
    # DLPack's C exchange API is a type attribute: as_tensor (and Holoscan 5.0's is_tensor_like)
    # look it up on type(obj), so an instance's own attribute of that name converts nothing.
    from holoscan_dlpack.tensor import is_tensor_like

    on_instance = Attributes()
    on_instance.__dlpack_c_exchange_api__ = hd.Tensor.__dlpack_c_exchange_api__
    assert is_tensor_like(on_instance) is False
    with pytest.raises(TypeError, match="does not support __dlpack_c_exchange_api__"):
        hd.as_tensor(on_instance)

    class OnType:
        __dlpack_c_exchange_api__ = hd.Tensor.__dlpack_c_exchange_api__

    assert is_tensor_like(OnType()) is True


def test_the_stream_hooks_take_none_as_the_null_stream():
    # docs/python.md: None or 0 is the null stream; None was refused before the argument was read.
    hooks = ("set_readiness_stream", "set_deallocation_stream", "synchronize_for_consumer_stream")
    for hook in hooks:
        with_none = getattr(hd.as_tensor(np.zeros(4, np.float32)), hook)(None)
        with_zero = getattr(hd.as_tensor(np.zeros(4, np.float32)), hook)(0)
        assert with_none == with_zero, hook
    with pytest.warns(DeprecationWarning):
        assert hd.as_tensor(np.zeros(4)).synchronize_for_consumer(None) is False


def test_a_tensor_can_be_weakly_referenced_as_holoscans_can():
    import gc
    import weakref

    tensor = hd.as_tensor(np.arange(4, dtype=np.float32))
    ref = weakref.ref(tensor)
    cache = weakref.WeakValueDictionary()
    cache["t"] = tensor
    assert ref() is tensor and cache["t"] is tensor
    del tensor
    gc.collect()
    assert ref() is None and "t" not in cache
