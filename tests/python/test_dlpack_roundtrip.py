"""DLPack round trips through holoscan-dlpack with real producers and consumers (PyTorch, CuPy):
import a versioned capsule, check what it describes, export it back, share memory both ways and
check that every producer's deleter runs once everything is released."""

import ctypes
import gc
import os

import pytest

KDL_CUDA = 2
KDL_FLOAT = 2
FLAG_READ_ONLY = 1 << 0
# Module-level bytes: a capsule keeps the name pointer, so it must outlive every capsule.
VERSIONED = b"dltensor_versioned"
USED_VERSIONED = b"used_dltensor_versioned"
ROWS, COLS = 256, 1024  # 1 MiB of float32: large enough to show in the frameworks' pool counters

_api = ctypes.pythonapi
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", _api))
_get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", _api))
_new_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", _api))
# Raw-pointer forms for the capsule destructor: the dying capsule must not be reference-counted.
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))

_bridge = None


def _capsule_destructor(capsule):
    # Only an unconsumed capsule still owns the export; a consumer renamed it "used_...".
    if _raw_is_valid(capsule, VERSIONED):
        _bridge.hdl_delete_versioned(_raw_get_pointer(capsule, VERSIONED))


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_capsule_destructor)


def _load_bridge():
    path = os.environ.get("HOLOSCAN_DLPACK_BRIDGE")
    if not path:
        pytest.skip("HOLOSCAN_DLPACK_BRIDGE does not name the bridge library")
    lib = ctypes.CDLL(path)
    vp, u64, i32, i64, sz = (ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int32, ctypes.c_int64,
                             ctypes.c_size_t)
    err = ctypes.c_char_p
    signatures = {
        "hdl_import_versioned": (vp, [vp, err, sz]),
        "hdl_release": (None, [vp]),
        "hdl_data": (ctypes.c_size_t, [vp]),
        "hdl_ndim": (i32, [vp]),
        "hdl_shape": (i32, [vp, ctypes.POINTER(i64), i32]),
        "hdl_flags": (u64, [vp]),
        "hdl_device": (None, [vp, ctypes.POINTER(i32), ctypes.POINTER(i32)]),
        "hdl_dtype": (None, [vp, ctypes.POINTER(i32), ctypes.POINTER(i32), ctypes.POINTER(i32)]),
        "hdl_handle_claims": (i64, [vp]),
        "hdl_set_readiness_stream": (ctypes.c_int, [vp, ctypes.c_size_t]),
        "hdl_synchronize_for_consumer": (ctypes.c_int, [vp, ctypes.c_size_t, err, sz]),
        "hdl_set_deallocation_stream": (ctypes.c_int, [vp, ctypes.c_size_t]),
        "hdl_to_dlpack_versioned": (vp, [vp, err, sz]),
        "hdl_delete_versioned": (None, [vp]),
        "hdl_flush_deferred_releases": (None, []),
        "hdl_pending_deferred_releases": (sz, []),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


@pytest.fixture(scope="module")
def bridge():
    global _bridge
    _bridge = _load_bridge()
    yield _bridge
    _bridge.hdl_flush_deferred_releases()


class Imported:
    """A holoscan Tensor made from a producer's capsule (which this takes over)."""

    def __init__(self, bridge, capsule):
        assert _get_name(capsule) == VERSIONED, "the producer did not give a versioned capsule"
        managed = _get_pointer(capsule, VERSIONED)
        assert managed
        # DLPack consumer rule: rename before use, so the capsule's destructor no longer deletes.
        assert _set_name(capsule, USED_VERSIONED) == 0
        error = ctypes.create_string_buffer(512)
        self.bridge = bridge
        self.handle = bridge.hdl_import_versioned(managed, error, len(error))
        assert self.handle, error.value.decode()

    def data(self):
        return self.bridge.hdl_data(self.handle)

    def shape(self):
        dims = (ctypes.c_int64 * 8)()
        ndim = self.bridge.hdl_shape(self.handle, dims, 8)
        return tuple(dims[i] for i in range(ndim))

    def device(self):
        kind, index = ctypes.c_int32(), ctypes.c_int32()
        self.bridge.hdl_device(self.handle, ctypes.byref(kind), ctypes.byref(index))
        return kind.value, index.value

    def dtype(self):
        code, bits, lanes = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32()
        self.bridge.hdl_dtype(self.handle, ctypes.byref(code), ctypes.byref(bits),
                              ctypes.byref(lanes))
        return code.value, bits.value, lanes.value

    def claims(self):
        return self.bridge.hdl_handle_claims(self.handle)

    def set_readiness_stream(self, stream):
        assert self.bridge.hdl_set_readiness_stream(self.handle, stream) == 1

    def release(self):
        self.bridge.hdl_release(self.handle)
        self.handle = None


class Exported:
    """Hands the imported tensor to a DLPack consumer (torch.from_dlpack, cupy.from_dlpack)."""

    def __init__(self, imported):
        self.imported = imported
        self.capsules = []
        self.consumer_streams = []

    def __dlpack_device__(self):
        return self.imported.device()

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        bridge, handle = self.imported.bridge, self.imported.handle
        assert max_version is None or max_version[0] >= 1, "consumer cannot take DLPack 1.x"
        error = ctypes.create_string_buffer(512)
        if stream is not None and stream != -1:
            # The consumer's stream waits for the producer's readiness point, not the host.
            self.consumer_streams.append(stream)
            code = bridge.hdl_synchronize_for_consumer(handle, stream, error, len(error))
            assert code == 0, error.value.decode()
        managed = bridge.hdl_to_dlpack_versioned(handle, error, len(error))
        assert managed, error.value.decode()
        capsule = _new_capsule(managed, VERSIONED, ctypes.cast(_CAPSULE_DESTRUCTOR, ctypes.c_void_p))
        self.capsules.append(capsule)
        return capsule

    def all_consumed(self):
        return all(_get_name(c) == USED_VERSIONED for c in self.capsules)


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


def _cupy():
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("cupy sees no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError as error:
        pytest.skip(f"cupy sees no CUDA device: {error}")
    return cupy


def _import_torch(bridge, torch):
    """A torch tensor made on a side stream, imported with that stream as its readiness point."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.arange(ROWS * COLS, dtype=torch.float32, device="cuda").reshape(ROWS, COLS)
        capsule = x.__dlpack__(stream=side.cuda_stream, max_version=(1, 0))
    imported = Imported(bridge, capsule)
    imported.set_readiness_stream(side.cuda_stream)
    return x, side, imported


def _import_cupy(bridge, cupy):
    side = cupy.cuda.Stream(non_blocking=True)
    with side:
        a = cupy.arange(ROWS * COLS, dtype=cupy.float32).reshape(ROWS, COLS)
        capsule = a.__dlpack__(stream=side.ptr, max_version=(1, 0))
    imported = Imported(bridge, capsule)
    imported.set_readiness_stream(side.ptr)
    return a, side, imported


def test_torch_round_trip(bridge):
    torch = _torch()
    torch.cuda.synchronize()
    gc.collect()
    baseline = torch.cuda.memory_allocated()
    x, side, imported = _import_torch(bridge, torch)

    assert imported.data() == x.data_ptr()
    assert imported.shape() == (ROWS, COLS)
    assert imported.dtype() == (KDL_FLOAT, 32, 1)
    assert imported.device() == (KDL_CUDA, x.device.index)
    assert bridge.hdl_flags(imported.handle) & FLAG_READ_ONLY == 0

    exported = Exported(imported)
    y = torch.from_dlpack(exported)
    assert exported.all_consumed(), "torch did not consume the capsule"
    assert exported.consumer_streams, "torch did not pass its stream"
    assert imported.claims() == 2  # the import and torch's hold on the export
    assert y.data_ptr() == x.data_ptr()
    assert y.shape == x.shape and y.dtype == x.dtype and y.device == x.device
    assert torch.equal(y, torch.arange(ROWS * COLS, dtype=torch.float32,
                                       device="cuda").reshape(ROWS, COLS))

    # Shared memory: a write through either is read through the other.
    y[0, 0] = 42.0
    torch.cuda.synchronize()
    assert x[0, 0].item() == 42.0
    side.synchronize()
    x[1, 1] = -7.0
    torch.cuda.synchronize()
    assert y[1, 1].item() == -7.0

    del x
    gc.collect()
    assert torch.cuda.memory_allocated() > baseline, "the import no longer holds torch's memory"
    del y
    gc.collect()
    assert imported.claims() == 1, "torch did not run the export's deleter"
    imported.release()
    bridge.hdl_flush_deferred_releases()
    assert bridge.hdl_pending_deferred_releases() == 0
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == baseline, "torch's deleter did not run"


def test_cupy_round_trip(bridge):
    cupy = _cupy()
    cupy.cuda.Device().synchronize()
    gc.collect()
    pool = cupy.get_default_memory_pool()
    baseline = pool.used_bytes()
    a, side, imported = _import_cupy(bridge, cupy)

    assert imported.data() == a.data.ptr
    assert imported.shape() == (ROWS, COLS)
    assert imported.dtype() == (KDL_FLOAT, 32, 1)
    assert imported.device() == (KDL_CUDA, a.device.id)

    exported = Exported(imported)
    b = cupy.from_dlpack(exported)
    assert exported.all_consumed(), "cupy did not consume the capsule"
    assert imported.claims() == 2
    assert b.data.ptr == a.data.ptr
    assert b.shape == a.shape and b.dtype == a.dtype
    expected = cupy.arange(ROWS * COLS, dtype=cupy.float32).reshape(ROWS, COLS)
    assert bool((b == expected).all())

    b[0, 0] = 42.0
    cupy.cuda.Device().synchronize()
    assert float(a[0, 0]) == 42.0
    side.synchronize()
    a[1, 1] = -7.0
    cupy.cuda.Device().synchronize()
    assert float(b[1, 1]) == -7.0

    del a, expected
    gc.collect()
    assert pool.used_bytes() > baseline, "the import no longer holds cupy's memory"
    del b
    gc.collect()
    assert imported.claims() == 1, "cupy did not run the export's deleter"
    imported.release()
    bridge.hdl_flush_deferred_releases()
    cupy.cuda.Device().synchronize()
    assert pool.used_bytes() == baseline, "cupy's deleter did not run"


def test_torch_to_cupy_through_holoscan(bridge):
    torch = _torch()
    cupy = _cupy()
    torch.cuda.synchronize()
    gc.collect()
    baseline = torch.cuda.memory_allocated()
    x, side, imported = _import_torch(bridge, torch)

    exported = Exported(imported)
    c = cupy.from_dlpack(exported)
    assert exported.all_consumed()
    assert c.data.ptr == x.data_ptr()
    assert c.shape == (ROWS, COLS)
    c[2, 3] = 5.5
    cupy.cuda.Device().synchronize()
    assert x[2, 3].item() == 5.5
    assert float(c[ROWS - 1, COLS - 1]) == float(ROWS * COLS - 1)

    del c
    gc.collect()
    assert imported.claims() == 1
    del x
    imported.release()
    bridge.hdl_flush_deferred_releases()
    gc.collect()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == baseline


def test_unconsumed_export_is_deleted_by_its_capsule(bridge):
    torch = _torch()
    torch.cuda.synchronize()
    gc.collect()
    baseline = torch.cuda.memory_allocated()
    x, side, imported = _import_torch(bridge, torch)
    exported = Exported(imported)
    capsule = exported.__dlpack__(stream=None, max_version=(1, 0))
    assert imported.claims() == 2
    del capsule
    exported.capsules.clear()
    gc.collect()
    assert imported.claims() == 1, "the capsule destructor did not delete the unconsumed export"
    imported.release()
    del x
    gc.collect()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == baseline
