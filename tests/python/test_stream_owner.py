"""The consumer stream a copy's export keeps alive (python/src/stream_owner.cpp, copy_export.cpp).

A copy is exported through the wrapping deleter only for CUDA memory, which needs a GPU: the CPU
tests check the lookup through the test extension's find_stream_owner, with a stand-in for
"cupy.cuda" in sys.modules, and that a host copy never looks; the GPU tests follow a real CuPy
stream's reference count through the export's deleter on every path that can call it."""

import ctypes
import gc
import sys
import types
import weakref

import pytest

import holoscan_dlpack as hd
from conftest import cuda_cupy, run_python

np = pytest.importorskip("numpy")

HANDLE = 0x7F00_1234_5000


class FakeStream:
    """What CuPy's Stream offers the lookup: its handle as `ptr`."""

    def __init__(self, ptr):
        self.ptr = ptr


def install_fake_cupy(monkeypatch):
    """A stand-in "cupy.cuda" module whose current stream the test sets; counts the lookups."""
    module = types.ModuleType("cupy.cuda")
    module.current = FakeStream(HANDLE)
    module.calls = 0

    def get_current_stream():
        module.calls += 1
        if isinstance(module.current, BaseException):
            raise module.current
        return module.current

    module.get_current_stream = get_current_stream
    monkeypatch.setitem(sys.modules, "cupy.cuda", module)
    return module


@pytest.fixture
def fake_cupy(monkeypatch):
    """install_fake_cupy's module, for the test's length."""
    return install_fake_cupy(monkeypatch)


def test_the_current_stream_with_the_handle_is_kept_and_let_go(testing, fake_cupy):
    stream = fake_cupy.current
    before = sys.getrefcount(stream)
    owner = testing.find_stream_owner(HANDLE)
    held = sys.getrefcount(stream)  # outside the asserts: their rewriting holds temporaries
    assert owner is stream
    assert held == before + 1  # the reference an export holds
    del owner
    after = sys.getrefcount(stream)
    assert after == before
    assert fake_cupy.calls == 1


def test_a_current_stream_with_another_handle_is_not_kept(testing, fake_cupy):
    stream = fake_cupy.current
    before = sys.getrefcount(stream)
    assert testing.find_stream_owner(HANDLE + 0x100) is None
    after = sys.getrefcount(stream)
    assert after == before


@pytest.mark.parametrize("ptr", [None, "0x7f0012345000", -1, 1 << 70, float(HANDLE)])
def test_a_stream_whose_ptr_is_no_handle_is_not_kept(testing, fake_cupy, ptr):
    stream = fake_cupy.current = FakeStream(ptr)
    before = sys.getrefcount(stream)
    assert testing.find_stream_owner(HANDLE) is None  # and no error is left set
    after = sys.getrefcount(stream)  # outside the assert: its rewriting holds temporaries
    assert after == before


def test_a_stream_without_ptr_is_not_kept(testing, fake_cupy):
    fake_cupy.current = object()
    assert testing.find_stream_owner(HANDLE) is None


def test_a_failing_lookup_is_cleared(testing, fake_cupy):
    fake_cupy.current = RuntimeError("no CUDA device")
    assert testing.find_stream_owner(HANDLE) is None  # raised nothing, left nothing set
    assert fake_cupy.calls == 1


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, SystemExit, MemoryError])
def test_an_interrupted_lookup_is_raised_not_cleared(testing, fake_cupy, interruption):
    # Cleared like any failure before, a Ctrl-C there was lost, and a MemoryError left the
    # copy's consumer stream without its owner.
    fake_cupy.current = interruption()
    with pytest.raises(interruption):
        testing.find_stream_owner(HANDLE)


class InterruptingPtr:
    """A stream whose `ptr` (a property) raises KeyboardInterrupt."""

    @property
    def ptr(self):
        raise KeyboardInterrupt


def test_an_interrupted_ptr_is_raised_and_the_stream_let_go(testing, fake_cupy):
    stream = fake_cupy.current = InterruptingPtr()
    before = sys.getrefcount(stream)
    with pytest.raises(KeyboardInterrupt):
        testing.find_stream_owner(HANDLE)
    after = sys.getrefcount(stream)  # outside the assert: its rewriting holds temporaries
    assert after == before


def test_nothing_is_imported_when_cupy_is_not_loaded(testing, monkeypatch):
    monkeypatch.delitem(sys.modules, "cupy.cuda", raising=False)
    assert testing.find_stream_owner(HANDLE) is None
    assert "cupy.cuda" not in sys.modules


@pytest.mark.parametrize("versioned", [True, False])
def test_a_host_copy_never_looks_for_a_stream_owner(fake_cupy, versioned):
    t = hd.from_dlpack(np.arange(8.0))
    if not versioned:
        t = t.copy()  # a read-only tensor gets no legacy capsule, a copy neither
    capsule = t.__dlpack__(max_version=(1, 0) if versioned else None, copy=True)
    del capsule
    assert fake_cupy.calls == 0  # host memory is not wrapped: no CPU test reaches the wrapper


class CopyOnStream:
    """Asks `tensor` for a copy for `stream` (what cupy.from_dlpack(copy=True) passes)."""

    def __init__(self, tensor, stream):
        self.tensor = tensor
        self.stream = stream

    def __dlpack__(self, max_version=None):
        return self.tensor.__dlpack__(max_version=max_version, stream=self.stream.ptr, copy=True)


def device_tensor_and_stream():
    cupy = cuda_cupy()
    return cupy, hd.from_dlpack(cupy.arange(16, dtype=cupy.float32)), cupy.cuda.Stream(
        non_blocking=True)


def test_gpu_an_unconsumed_copy_lets_the_stream_go():
    _, t, stream = device_tensor_and_stream()
    with stream:
        before = sys.getrefcount(stream)
        capsule = CopyOnStream(t, stream).__dlpack__(max_version=(1, 0))
        held = sys.getrefcount(stream)  # outside the asserts: their rewriting holds temporaries
        del capsule  # never consumed: the capsule's destructor runs the deleter, with the GIL
        after = sys.getrefcount(stream)
    assert held == before + 1, "the export did not keep its stream"
    assert after == before
    stream.synchronize()


def test_gpu_an_interrupted_owner_lookup_raises_from_the_copys_export(monkeypatch):
    # The copy's export looks for the owner of an int stream handle: a KeyboardInterrupt there
    # reaches the caller (the copy made for the export given back first), and the next export
    # finds its owner as before.
    _, t, stream = device_tensor_and_stream()  # CuPy imported before its stand-in replaces it
    fake_cupy = install_fake_cupy(monkeypatch)
    fake_cupy.current = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        t.__dlpack__(max_version=(1, 0), stream=stream.ptr, copy=True)
    assert fake_cupy.calls == 1
    fake_cupy.current = stream
    before = sys.getrefcount(stream)
    capsule = t.__dlpack__(max_version=(1, 0), stream=stream.ptr, copy=True)
    held = sys.getrefcount(stream)  # outside the asserts: their rewriting holds temporaries
    del capsule
    after = sys.getrefcount(stream)
    assert held == before + 1, "the export did not keep its stream"
    assert after == before
    stream.synchronize()


def test_gpu_a_deleter_on_a_foreign_thread_hands_the_stream_to_python(testing):
    _, t, stream = device_tensor_and_stream()
    before = sys.getrefcount(stream)
    with stream:  # the current stream, as cupy.from_dlpack(copy=True) would find it
        testing.hold(CopyOnStream(t, stream))
    held = sys.getrefcount(stream)  # outside the asserts: their rewriting holds temporaries
    finished, _, _ = testing.drop_held_on_foreign_thread(timeout=10.0)
    hd.pending_deferred_releases()  # any entry into the module drains the queued release
    after = sys.getrefcount(stream)
    assert finished, "the deleter on the foreign thread waited for the GIL"
    assert held == before + 1, "the export did not keep its stream"
    assert after == before
    stream.synchronize()


def test_gpu_a_deleter_after_finalization_leaks_the_stream_quietly():
    cuda_cupy()
    done = run_python("""
        import cupy, holoscan_dlpack as hd, holoscan_dlpack_testing as testing
        t = hd.from_dlpack(cupy.arange(16, dtype=cupy.float32))
        stream = cupy.cuda.Stream(non_blocking=True)
        class CopyOnStream:
            def __dlpack__(self, max_version=None):
                return t.__dlpack__(max_version=max_version, stream=stream.ptr, copy=True)
        with stream:
            testing.hold_until_exit(CopyOnStream())
        print("held")
    """)
    assert done.returncode == 0, done.stderr
    assert "held" in done.stdout and "post-finalization drop" in done.stdout, done.stdout


class OwnStream:
    """A consumer's own stream object (the `__cuda_stream__` protocol), never CuPy's current."""

    def __init__(self, cupy):
        self.inner = cupy.cuda.Stream(non_blocking=True)

    def __cuda_stream__(self):
        return (0, self.inner.ptr)


def test_gpu_a_stream_object_passed_is_kept_until_the_copy_goes():
    cupy, t, stream = device_tensor_and_stream()
    before = sys.getrefcount(stream)
    capsule = t.__dlpack__(max_version=(1, 0), stream=stream, copy=True)  # not the current one
    held = sys.getrefcount(stream)  # outside the asserts: their rewriting holds temporaries
    del capsule
    after = sys.getrefcount(stream)
    assert held == before + 1, "the export did not keep the stream object it was given"
    assert after == before

    own = OwnStream(cupy)
    alive = weakref.ref(own)
    capsule = t.__dlpack__(max_version=(1, 0), stream=own, copy=True)
    del own
    gc.collect()
    kept = alive() is not None  # the copy's deleter still records on its handle
    del capsule
    gc.collect()
    assert kept, "the stream object went while the copy's deleter would still use its handle"
    assert alive() is None
    stream.synchronize()


class _VersionedHead(ctypes.Structure):
    """The start of a DLManagedTensorVersioned: its version, manager_ctx and deleter."""
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


def test_gpu_a_flush_waits_for_what_a_python_producers_deleter_defers():
    # A Python producer's deleter runs on a Python thread (the release thread holds no GIL), where
    # it may drop owners whose releases are deferred in turn: the flush waits for those as well.
    from gpu_writers import CupyWriter
    cuda_cupy()
    outer_writer = CupyWriter(256, spin=200_000_000)  # about 0.1 s
    inner_writer = CupyWriter(256, spin=1_000_000_000)  # about 0.6 s
    inner = hd.from_dlpack(inner_writer.new())
    inner_writer.write(inner, 1)
    assert inner.set_deallocation_stream(inner_writer.stream.ptr)

    class Holder:  # the base of a NumPy array, keeping `inner` until NumPy's deleter drops it
        def __init__(self, kept):
            self.kept = kept
            self.buffer = np.zeros(4)
            self.__array_interface__ = self.buffer.__array_interface__

    array = np.asarray(Holder(inner))
    del inner
    outer = hd.from_dlpack(array)
    del array
    outer_writer.write(outer_writer.new(), 1)
    assert outer.set_deallocation_stream(outer_writer.stream.ptr)
    del outer  # released on the release thread once the outer stream is done
    hd.flush_deferred_releases()
    assert hd.pending_deferred_releases() == 0
    assert not inner_writer.busy()


def test_gpu_a_copys_export_has_one_consumer():
    # A device copy's export has a deleter of its own (a point on the consumer's stream); a second
    # import of its pointer, or one after its deleter ran, is refused as the library's are.
    from test_numpy_roundtrip import capsule_of
    _, t, stream = device_tensor_and_stream()
    capsule = t.__dlpack__(max_version=(1, 0), stream=stream.ptr, copy=True)
    again = capsule_of(capsule, b"dltensor_versioned")
    failed = hd.failed_releases()
    first = hd.from_dlpack(capsule)
    with pytest.raises(BufferError, match="this export was imported already"):
        hd.from_dlpack(again())
    del first
    gc.collect()
    hd.flush_deferred_releases()
    with pytest.raises(BufferError, match="this export's deleter ran already"):
        hd.from_dlpack(again())
    assert hd.failed_releases() == failed
    stream.synchronize()


def test_gpu_a_copys_deleter_called_twice_runs_once():
    # A consumer's bug (DLPack runs a deleter once): the copy's export took its owner's memory
    # back at the first call, and the second read freed memory. It is counted and ignored now, as
    # the library's own exports' second calls are.
    _, t, stream = device_tensor_and_stream()
    capsule = t.__dlpack__(max_version=(1, 0), stream=stream.ptr, copy=True)
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    set_name = ctypes.pythonapi.PyCapsule_SetName
    set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]
    pointer = get_pointer(capsule, b"dltensor_versioned")
    deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_VersionedHead.from_address(pointer).deleter)
    assert set_name(capsule, b"used_dltensor_versioned") == 0  # consumed: its end calls nothing
    before = hd.failed_releases()
    deleter(pointer)
    assert hd.failed_releases() == before
    deleter(pointer)  # the bug
    assert hd.failed_releases() == before + 1
    assert _VersionedHead.from_address(pointer).manager_ctx is None
    del capsule
    hd.flush_deferred_releases()
    stream.synchronize()
