"""NumPy both ways: versioned capsules, read-only authority, shapes NumPy makes awkward (0-d,
zero-size, non-contiguous, negative strides), the array interface, and the producer's lifetime."""

import ctypes
import gc
import weakref

import pytest

import holoscan_dlpack as hd
from conftest import FLAG_IS_COPIED, FLAG_READ_ONLY, KDL_CPU

np = pytest.importorskip("numpy")


def test_import_describes_the_array_and_shares_its_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = hd.from_dlpack(a)
    assert t.shape == (3, 4)
    assert t.strides == (16, 4)  # bytes, as Holoscan
    assert t.dtype == hd.DLDataType(hd.DLDataTypeCode.DLFLOAT, 32, 1)
    assert t.device == hd.DLDevice(hd.DLDeviceType.DLCPU, 0)
    assert t.__dlpack_device__() == (KDL_CPU, 0)
    assert (t.size, t.nbytes, t.ndim, t.itemsize, t.byte_offset) == (12, 48, 2, 4, 0)
    assert t.data == a.ctypes.data
    assert t.is_contiguous()
    assert t.is_read_only, "a zero-copy import has read-only authority"
    assert not t.has_readiness_stream_contract()
    assert t.readiness_stream is None
    assert repr(t) == ("Tensor(shape=(3, 4), dtype=DLDataType(code=DLFLOAT, bits=32, lanes=1), "
                       "device=DLDevice(device_type=kDLCPU, device_id=0), "
                       "is_read_only=True)")


def test_round_trip_is_zero_copy_and_read_only():
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    t = hd.Tensor.from_dlpack(a)
    b = np.from_dlpack(t)
    assert b.ctypes.data == a.ctypes.data
    assert not b.flags.writeable, "NumPy honours the exported READ_ONLY flag"
    np.testing.assert_array_equal(b, a)
    a[1, 2] = 99  # the producer still writes; the import sees it
    assert b[1, 2] == 99


def test_arrays_of_as_many_dimensions_as_numpy_makes_cross_both_ways():
    shape = (2,) + (1,) * 62 + (3,)  # 64 dimensions, NumPy 2's limit
    try:
        a = np.arange(6, dtype=np.int32).reshape(shape)
    except ValueError:
        pytest.skip("this NumPy makes at most 32 dimensions")
    t = hd.from_dlpack(a)
    assert t.ndim == 64 and t.shape == shape and t.size == 6
    np.testing.assert_array_equal(np.from_dlpack(t), a)


def test_versioned_and_legacy_exports(testing):
    t = hd.from_dlpack(np.ones(3))
    versioned = t.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(versioned)
    assert hd.from_dlpack(versioned).flags & FLAG_READ_ONLY
    for legacy_request in ({}, {"max_version": None}, {"max_version": (0, 8)}):
        # Legacy DLPack cannot carry read-only authority; Holoscan 5.0's sentence comes first.
        with pytest.raises(BufferError,
                           match="^Legacy DLPack cannot represent read-only Tensor authority "
                           "or an active read lease"):
            t.__dlpack__(**legacy_request)
    pool = hd.TensorPool(memory="host", block_bytes=256, block_count=1)
    writable = pool.allocate([3], "float64")
    legacy = writable.__dlpack__()
    assert '"dltensor"' in repr(legacy)
    assert hd.from_dlpack(legacy).flags == 0  # the legacy layout has no flags
    assert "used_dltensor" in repr(legacy)


def capsule_version(capsule):
    """(major, minor) of a versioned capsule's DLManagedTensorVersioned, read in place."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    words = (ctypes.c_uint32 * 2).from_address(get(capsule, b"dltensor_versioned"))
    return words[0], words[1]


def capsule_of(capsule, name):
    """The pointer a capsule holds, and a maker of new capsules (no destructor) around it."""
    api = ctypes.pythonapi
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_New.restype = ctypes.py_object
    api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    pointer = api.PyCapsule_GetPointer(capsule, name)
    return lambda: api.PyCapsule_New(pointer, name, None)


@pytest.mark.parametrize("max_version,name", [((1, 0), b"dltensor_versioned"),
                                              (None, b"dltensor")])
def test_one_export_pointer_has_one_consumer(max_version, name):
    # The library's export seen again through another capsule (a consumer's bug, or a capsule
    # renamed back): the import wrapped its deleter and so took it twice, and the second owner,
    # let go, ran the deleter of the export that reused the first's owner, or read freed memory.
    source = hd.from_dlpack(np.full(64, 7.0)).copy()  # writable: a legacy export may carry it
    capsule = source.__dlpack__(max_version=max_version, copy=True)  # an owning copy's export
    again = capsule_of(capsule, name)
    failed = hd.failed_releases()
    first = hd.from_dlpack(capsule)
    with pytest.raises(BufferError, match="this export was imported already"):
        hd.from_dlpack(again())
    assert (np.asarray(first) == 7.0).all()
    del first
    gc.collect()
    hd.flush_deferred_releases()
    with pytest.raises(BufferError, match="this export's deleter ran already"):
        hd.from_dlpack(again())
    assert hd.failed_releases() == failed  # the deleter ran once


def test_versioned_exports_take_the_consumers_minor_version(testing):
    # The array API recommends the consumer's max_version where the producer supports it; 5.0
    # stamps (1, min(minor, its own)) for a major-1 consumer, its own version for a newer major.
    newest = hd.DLPACK_VERSION[1]
    t = hd.from_dlpack(testing.make_capsule(shape=[3], minor=0))  # a DLPack 1.0 producer
    pool = hd.TensorPool(memory="host", block_bytes=64, block_count=1)
    sources = {"1.0 import": lambda v: t.__dlpack__(max_version=v),
               "pool block": lambda v: pool.allocate([3], "float32").__dlpack__(max_version=v),
               "copy": lambda v: t.__dlpack__(max_version=v, copy=True)}
    for name, export in sources.items():
        for minor in range(newest + 1):
            assert capsule_version(export((1, minor))) == (1, minor), (name, minor)
        for request in ((1, newest + 5), (1, -1), (2, 0)):
            assert capsule_version(export(request)) == (1, newest), (name, request)


def test_a_minor_version_too_old_for_the_tensor_is_not_stamped(testing):
    if hd.DLPACK_VERSION < (1, 1):
        pytest.skip("built against DLPack 1.0, which has no float8 types")
    float8 = hd.from_dlpack(testing.make_capsule(minor=1, dtype=(10, 8, 1)))  # DLPack 1.1's
    assert capsule_version(float8.__dlpack__(max_version=(1, 0))) == (1, 1)


def test_flags_of_the_producer_are_kept_and_read_only_exported():
    a = np.arange(4.0)
    a.flags.writeable = False
    t = hd.from_dlpack(a)
    assert t.flags & FLAG_READ_ONLY and t.is_read_only
    assert not np.from_dlpack(t).flags.writeable


@pytest.mark.parametrize("make", [
    lambda: np.array(3.5, dtype=np.float64),
    lambda: np.zeros((0,), dtype=np.float32),
    lambda: np.zeros((3, 0, 2), dtype=np.uint8),
    lambda: np.arange(24, dtype=np.int32).reshape(4, 6)[:, ::2],
    lambda: np.arange(24, dtype=np.int64).reshape(4, 6).T,
    lambda: np.arange(10, dtype=np.float32)[::-1],
    lambda: np.arange(24, dtype=np.float32).reshape(4, 6)[::-2, 1::3],
    lambda: np.arange(8, dtype=np.complex64),
    lambda: np.array([True, False, True]),
    lambda: np.arange(6, dtype=np.float16).reshape(2, 3),
], ids=["0-d", "empty", "zero-extent", "step", "transposed", "negative-stride",
        "negative-2d", "complex", "bool", "float16"])
def test_awkward_layouts_round_trip(make):
    a = make()
    t = hd.from_dlpack(a)
    assert t.shape == a.shape
    assert t.ndim == a.ndim
    assert t.size == a.size
    if a.size:
        assert t.data == a.ctypes.data
        assert t.strides == a.strides
    assert t.is_contiguous() == (a.flags.c_contiguous or a.size <= 1)
    for back in (np.from_dlpack(t), np.asarray(t)):
        assert back.shape == a.shape and back.dtype == a.dtype
        np.testing.assert_array_equal(back, a)
        if a.size:
            assert back.ctypes.data == a.ctypes.data


@pytest.mark.parametrize("make", [
    lambda: np.arange(24, dtype=np.float32).reshape(4, 6),
    lambda: np.arange(24, dtype=np.float32).reshape(4, 6)[1:2, 2:3],
    lambda: np.zeros((0, 3), np.float32),
    lambda: np.zeros((2, 0, 3), np.int16),
], ids=["contiguous", "one-element slice", "empty", "empty 3-d"])
def test_array_interface_strides_are_the_tensors_as_in_holoscan_5_0(make):
    # Holoscan 5.0 gives the byte strides whenever the DLPack view has strides, contiguous or not,
    # so that NumPy's view keeps them; its keys come in this order.
    a = make()
    t = hd.from_dlpack(a)
    interface = t.__array_interface__
    assert interface["strides"] == tuple(t.strides) == a.strides
    assert list(interface) == ["shape", "typestr", "data", "version", "strides", "descr"]
    assert np.asarray(t).strides == a.strides


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
def test_array_interface_of_a_producer_without_strides_has_none(testing, versioned):
    # A compact tensor whose producer gave no strides (DLPack before 1.2 allowed it): None, as
    # Holoscan 5.0 gives, though the import fills the strides in.
    t = hd.as_tensor(testing.make_capsule(shape=[2, 3], versioned=versioned))
    assert t.strides == (12, 4)
    assert t.__array_interface__["strides"] is None
    assert np.asarray(t).strides == (12, 4)


def test_array_interface_of_an_interface_producer_without_strides_has_none():
    # The same for an array-interface producer that gave None (compact): the import filled the
    # strides in and reported them as if the producer had given them.
    class Interface:
        def __init__(self, array):
            self.__array_interface__ = array.__array_interface__

    a = np.arange(6.0).reshape(2, 3)
    assert a.__array_interface__["strides"] is None
    t = hd.as_tensor(Interface(a))
    assert t.strides == (24, 8)
    assert t.__array_interface__["strides"] is None
    np.testing.assert_array_equal(np.asarray(t), a)
    strided = a[:, ::2]
    assert hd.as_tensor(Interface(strided)).__array_interface__["strides"] == strided.strides


def test_array_interface_of_a_0d_tensor_has_no_strides():
    interface = hd.from_dlpack(np.array(3.0, dtype=np.float32)).__array_interface__
    assert interface["shape"] == () and interface["strides"] is None


def test_array_interface_describes_a_host_tensor():
    a = np.arange(12, dtype=np.uint16).reshape(3, 4)[:, 1:3]
    t = hd.from_dlpack(a)
    interface = t.__array_interface__
    assert interface["version"] == 3
    assert interface["shape"] == (3, 2)
    assert interface["typestr"] == "<u2"
    assert interface["data"] == (a.ctypes.data, True)
    assert interface["strides"] == (8, 2)
    # Holoscan 5.0's dict also carries descr, as NumPy's own does.
    assert interface["descr"] == [("", "<u2")] == a.__array_interface__["descr"]
    view = np.asarray(t)
    assert view.base is t, "NumPy keeps the Tensor (and so the memory) alive"
    assert not view.flags.writeable
    with pytest.raises(AttributeError):
        t.__cuda_array_interface__  # noqa: B018: a host tensor has none


def test_as_tensor_takes_every_protocol():
    a = np.arange(5, dtype=np.float64)
    t = hd.as_tensor(a)
    assert hd.as_tensor(t) is t
    assert t.data == a.ctypes.data

    class ArrayInterfaceOnly:
        def __init__(self, array):
            self.array = array
            self.__array_interface__ = array.__array_interface__

    b = np.arange(6, dtype=np.int32).reshape(2, 3)[:, ::2]
    owner = ArrayInterfaceOnly(b)
    w = weakref.ref(owner)
    u = hd.as_tensor(owner)
    assert u.shape == (2, 2) and u.strides == (12, 8) and u.data == b.ctypes.data
    assert u.is_read_only
    np.testing.assert_array_equal(np.from_dlpack(u), b)
    del owner
    gc.collect()
    assert w() is not None, "the tensor keeps the exporting object alive"
    del u
    gc.collect()
    assert w() is None

    class CudaArrayInterfaceOnly:
        def __init__(self, array):
            self.array = array
            self.__cuda_array_interface__ = dict(array.__array_interface__, version=3,
                                                 stream=None)

    # Host memory behind a CUDA interface: the pointer query reports where it really lives.
    v = hd.as_tensor(CudaArrayInterfaceOnly(a))
    assert v.shape == (5,) and v.data == a.ctypes.data

    with pytest.raises(TypeError, match="does not support __dlpack_c_exchange_api__, __dlpack__"):
        hd.as_tensor(object())


def test_array_interface_imports_reject_what_they_cannot_describe():
    class Interface:
        def __init__(self, **entries):
            self.__array_interface__ = dict({"shape": (2,), "typestr": "<f4", "version": 3,
                                             "data": (np.zeros(2, np.float32).ctypes.data, False)},
                                            **entries)

    with pytest.raises(hd.errors.InvalidArgumentError, match="mask"):
        hd.as_tensor(Interface(mask=np.ones(2)))
    with pytest.raises(hd.errors.InvalidArgumentError, match="dldatatype_from_typestr"):
        hd.as_tensor(Interface(typestr=">f4"))
    with pytest.raises(hd.errors.InvalidArgumentError, match="multiple"):
        hd.as_tensor(Interface(strides=(3,)))
    with pytest.raises(TypeError, match="pointer"):
        hd.as_tensor(Interface(data=b"abcd"))


def test_producer_dies_exactly_when_the_last_owner_goes():
    a = np.arange(1000.0)
    w = weakref.ref(a)
    t = hd.from_dlpack(a)
    u = hd.as_tensor(t)
    capsule = t.__dlpack__(max_version=(1, 0))
    consumer = np.from_dlpack(hd.from_dlpack(capsule))
    del a, capsule
    gc.collect()
    assert w() is not None
    del t
    assert w() is not None, "u shares the first import"
    del u
    assert w() is not None, "NumPy holds the export of the first import, through a second one"
    del consumer
    assert w() is None, "the producer outlived its last owner"


def test_unconsumed_export_is_freed_by_its_capsule():
    a = np.arange(10)
    w = weakref.ref(a)
    t = hd.from_dlpack(a)
    capsules = [t.__dlpack__(max_version=(1, 0)), t.__dlpack__(max_version=(1, 0), copy=False)]
    del a, t
    gc.collect()
    assert w() is not None, "an unconsumed export still owns the memory"
    capsules.clear()
    assert w() is None, "the capsule destructor did not delete the export"


def test_unconsumed_legacy_export_is_freed_once_by_its_capsule(collect):
    pool = hd.TensorPool(memory="host", block_bytes=64, block_count=1)
    capsule = pool.allocate([4], "float32").__dlpack__()  # writable: a legacy capsule
    assert '"dltensor"' in repr(capsule)
    collect()
    with pytest.raises(hd.errors.ResourceExhaustedError):
        pool.allocate([4], "float32")  # the capsule's export still holds the only block
    del capsule
    collect()
    again = pool.allocate([4], "float32")  # the capsule's destructor freed its export
    del again
    collect()
    pool.allocate([4], "float32")


def test_export_arguments_follow_the_array_api():
    t = hd.from_dlpack(np.arange(3))
    assert t.__dlpack__(copy=False, max_version=(1, 0)) is not None
    assert t.__dlpack__(dl_device=(KDL_CPU, 0), max_version=(1, 0)) is not None
    with pytest.raises(ValueError, match="dl_device must be a tuple"):  # as Holoscan 5.0 says
        t.__dlpack__(dl_device=hd.DLDevice(KDL_CPU, 0), max_version=(1, 0))
    with pytest.raises(BufferError, match="copy=False cannot satisfy"):
        t.__dlpack__(dl_device=(2, 0), copy=False, max_version=(1, 0))
    with pytest.raises(TypeError):
        t.__dlpack__(None)  # keyword-only, as the array API says
    with pytest.raises(ValueError, match="max_version"):
        t.__dlpack__(max_version=1)
    with pytest.raises(TypeError, match="copy"):
        t.__dlpack__(copy=1)


@pytest.mark.parametrize("make", [
    lambda: np.arange(12, dtype=np.float32).reshape(3, 4),
    lambda: np.arange(24, dtype=np.int16).reshape(4, 6)[::-2, 1::2],
    lambda: np.arange(24, dtype=np.int64).reshape(2, 3, 4).transpose(2, 0, 1),
    lambda: np.array(7.5),
    lambda: np.zeros((3, 0), dtype=np.uint8),
    lambda: np.arange(6, dtype=np.complex128)[::-1],
], ids=["compact", "negative-steps", "transposed-3d", "0-d", "empty", "reversed"])
@pytest.mark.parametrize("max_version", [(1, 0), None])
def test_copy_is_owning_contiguous_and_writable(make, max_version):
    a = make()
    t = hd.from_dlpack(a)
    if not max_version:
        # A read-only tensor gets no legacy capsule, a copy neither (Holoscan 5.0's docstring):
        # the legacy copy is of a writable one.
        t = t.copy()
    capsule = t.__dlpack__(copy=True, max_version=max_version)
    u = hd.from_dlpack(capsule)
    assert u.shape == a.shape and u.dtype == t.dtype and u.is_contiguous()
    if max_version:
        assert u.flags & FLAG_IS_COPIED and not u.flags & FLAG_READ_ONLY, "a copy is writable"
    if a.size:
        assert u.data != a.ctypes.data
    copied = np.from_dlpack(u)
    np.testing.assert_array_equal(copied, a)
    before = a.copy()
    a[...] = 0 if a.dtype != bool else False  # the copy does not follow the source
    np.testing.assert_array_equal(copied, before)


def test_numpy_copy_requests_get_a_writable_copy():
    a = np.arange(4.0)
    t = hd.from_dlpack(a)
    b = np.from_dlpack(t, copy=True)
    assert b.flags.writeable and b.ctypes.data != a.ctypes.data
    np.testing.assert_array_equal(b, a)
    assert np.from_dlpack(t, copy=False).ctypes.data == t.data


def test_the_copy_lives_as_long_as_its_capsule_or_consumer(testing, collect):
    calls = testing.deleter_calls()
    t = hd.from_dlpack(testing.make_capsule(shape=[8]))
    unconsumed = t.__dlpack__(copy=True, max_version=(1, 0))
    consumer = np.from_dlpack(hd.from_dlpack(t.__dlpack__(copy=True, max_version=(1, 0))))
    del t
    collect()
    assert testing.deleter_calls() == calls + 1, "a copy does not hold the source"
    assert consumer.shape == (8,)
    del unconsumed, consumer  # each copy frees itself; nothing is counted twice
    collect()
    assert testing.deleter_calls() == calls + 1
