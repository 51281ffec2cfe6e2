"""Producers that publish DLPack 1.3's C exchange API (torch >= 2.10) are imported without any
Python call: the table's converter gives the tensor and its work stream becomes the readiness
point. A test producer type publishes such a table and counts what it is asked."""

import gc
import weakref

import pytest

import holoscan_dlpack as hd
from conftest import (KDL_CPU, KDL_CUDA, SLOW_CYCLES, cuda_device_present, cuda_torch,
                      run_python)

np = pytest.importorskip("numpy")


@pytest.fixture
def exchange(testing):
    if not hasattr(testing.ExchangeProducer, "__dlpack_c_exchange_api__"):
        pytest.skip("built against a dlpack.h older than 1.3 (no C exchange API)")
    return testing


def test_import_uses_the_table_not_dunder_methods(exchange, collect):
    calls, queries = exchange.exchange_counts()
    deleted = exchange.deleter_calls()
    producer = exchange.ExchangeProducer([2, 3])
    w = weakref.ref(producer)
    t = hd.from_dlpack(producer)
    assert exchange.exchange_counts() == (calls + 1, queries), "a host tensor needs no stream"
    assert producer.dlpack_calls == 0
    assert t.shape == (2, 3) and t.device == hd.DLDevice(KDL_CPU, 0) and t.is_read_only
    del producer
    gc.collect()
    assert w() is None, "the tensor owns its memory: the producer object is not held"
    assert exchange.deleter_calls() == deleted
    del t
    assert exchange.deleter_calls() == deleted + 1
    collect()
    assert exchange.deleter_calls() == deleted + 1


def test_copy_requests_go_through_dlpack(exchange):
    producer = exchange.ExchangeProducer([4])
    calls, _ = exchange.exchange_counts()
    hd.from_dlpack(producer, copy=True)
    assert producer.dlpack_calls == 1
    assert exchange.exchange_counts()[0] == calls


def test_rejected_tensor_is_freed_once_by_us(exchange, collect):
    deleted = exchange.deleter_calls()
    with pytest.raises(BufferError, match="shape"):
        hd.from_dlpack(exchange.ExchangeProducer([3, -1]))
    assert exchange.deleter_calls() == deleted + 1, "nobody else owns a rejected table import"
    collect()
    assert exchange.deleter_calls() == deleted + 1


@pytest.mark.parametrize("import_, stream", [
    (hd.from_dlpack, None), (hd.from_dlpack, 1), (hd.from_dlpack, 2), (hd.as_tensor, None),
])
def test_device_import_asks_for_the_work_stream(exchange, import_, stream, collect):
    exchange.set_work_stream(0)  # the legacy default stream
    _, queries = exchange.exchange_counts()
    if stream == 2 and not cuda_device_present():
        # Without a driver no readiness point can be recorded on the producer's stream, and the
        # consumer's per-thread stream is another: nothing would order the consumer after the
        # producer's work, so the import is refused (and the tensor freed once).
        deleted = exchange.deleter_calls()
        with pytest.raises(BufferError, match="no readiness point could be recorded"):
            import_(exchange.ExchangeProducer([8], KDL_CUDA), stream=stream)
        collect()
        assert exchange.exchange_counts()[1] == queries + 1
        assert exchange.deleter_calls() == deleted + 1
        return
    t = import_(exchange.ExchangeProducer([8], KDL_CUDA), stream=stream)
    assert exchange.exchange_counts()[1] == queries + 1
    assert t.device == hd.DLDevice(KDL_CUDA, 0)
    assert t.has_readiness_stream_contract() == cuda_device_present()
    # The producer's null work stream is its legacy default stream, recorded as cudaStreamLegacy.
    assert t.readiness_stream == (1 if t.has_readiness_stream_contract() else None)


@pytest.mark.parametrize("import_", [hd.from_dlpack, hd.as_tensor])
def test_imports_refuse_no_sync(exchange, import_):
    calls, queries = exchange.exchange_counts()
    with pytest.raises(hd.errors.InvalidArgumentError, match="stream=-1"):
        import_(exchange.ExchangeProducer([8], KDL_CUDA), stream=-1)
    assert exchange.exchange_counts() == (calls, queries), "refused before the producer is asked"


# --- The export side: holoscan_dlpack.Tensor publishes the table too (as Holoscan 5.0's does) ---

@pytest.fixture
def tensor_api(exchange):
    # Both extensions are built against one dlpack.h: with the test producer's table, Tensor
    # must publish one too.
    assert hasattr(hd.Tensor, "__dlpack_c_exchange_api__")
    return exchange


def test_tensor_exports_a_versioned_read_only_tensor(tensor_api, collect):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    w = weakref.ref(a)
    t = hd.from_dlpack(a)
    info = tensor_api.exchange_export(t)
    assert info["data"] == a.ctypes.data and info["shape"] == (3, 4)
    assert info["strides"] == (4, 1) and info["dtype"] == (2, 32, 1)
    assert info["device"] == (KDL_CPU, 0)
    assert info["flags"] & 1, "READ_ONLY travels with the export"
    assert info["version"][0] == 1  # NumPy's own version (Holoscan 5.0 stamps the producer's)
    del a, t
    collect()
    assert w() is not None, "the held export keeps the producer"
    tensor_api.drop_held_on_foreign_thread()
    collect()
    assert w() is None


def test_a_host_tensor_is_exported_once_its_readiness_point_passed(tensor_api):
    # A host consumer of the exchange API waits on no stream: for a host block whose readiness
    # point is on a busy stream, the converters wait on the host, as __dlpack__ does.
    torch = cuda_torch()
    producer = torch.cuda.Stream()
    pool = hd.TensorPool(memory="host", block_bytes=64, block_count=2)
    for convert in (tensor_api.exchange_export, tensor_api.exchange_view):
        block = pool.allocate((4,), "float32")
        with torch.cuda.stream(producer):
            torch.cuda._sleep(SLOW_CYCLES)
        block.set_readiness_stream(producer)
        assert not producer.query(), "the spin finished before the export: no race to see"
        convert(block)
        assert producer.query(), f"{convert.__name__} did not wait for the readiness point"
    tensor_api.drop_held_on_foreign_thread()


def test_an_export_carries_the_producers_dlpack_version(tensor_api, testing):
    # As Holoscan 5.0: the context's (producer's) version, not this build's.
    t = hd.from_dlpack(testing.make_capsule(minor=1))
    assert tensor_api.exchange_export(t)["version"] == (1, 1)
    tensor_api.drop_held_on_foreign_thread()


def test_a_borrowed_view_needs_writer_authority(tensor_api):
    with pytest.raises(BufferError, match="read-only"):
        tensor_api.exchange_view(hd.from_dlpack(np.arange(3)))
    pool = hd.TensorPool(memory="host", block_bytes=256, block_count=1)
    writable = pool.allocate([2, 5], "int16")
    view = tensor_api.exchange_view(writable)
    assert (view["data"], view["shape"], view["strides"]) == (writable.data, (2, 5), (5, 1))


def test_a_borrowed_view_of_padded_sub_byte_elements_is_refused(tensor_api, testing):
    # An unversioned DLTensor cannot say IS_SUBBYTE_TYPE_PADDED: its consumer would read the
    # padded bytes as packed elements. Refused, as the legacy capsule refuses it.
    padded = 1 << 2
    t = hd.from_dlpack(testing.make_capsule(minor=1, flags=padded, dtype=(17, 4, 1), shape=[2, 4]))
    writable = t.copy()
    assert not writable.is_read_only and writable.flags & padded
    with pytest.raises(BufferError, match="IS_SUBBYTE_TYPE_PADDED"):
        tensor_api.exchange_view(writable)
    assert tensor_api.exchange_export(writable)["flags"] & padded  # the versioned export says it
    tensor_api.drop_held_on_foreign_thread()


def test_the_table_refuses_what_is_not_a_tensor(tensor_api):
    class NotATensor:
        pass

    NotATensor.__dlpack_c_exchange_api__ = hd.Tensor.__dlpack_c_exchange_api__
    with pytest.raises(TypeError, match="holoscan_dlpack.Tensor"):
        tensor_api.exchange_export(NotATensor())
    with pytest.raises(TypeError, match="holoscan_dlpack.Tensor"):
        tensor_api.exchange_view(NotATensor())


def test_the_table_refuses_a_tensor_never_initialized(tensor_api):
    blank = hd.Tensor.__new__(hd.Tensor)  # no C++ Tensor was ever constructed in it
    with pytest.raises(TypeError, match="holoscan_dlpack.Tensor"):
        tensor_api.exchange_export(blank)
    with pytest.raises(TypeError, match="holoscan_dlpack.Tensor"):
        tensor_api.exchange_view(blank)


def test_a_managed_tensor_becomes_a_tensor(tensor_api, collect):
    deleted = tensor_api.deleter_calls()
    t = tensor_api.exchange_to_object(hd.Tensor, [2, 3])
    assert isinstance(t, hd.Tensor) and t.shape == (2, 3) and t.is_read_only
    assert tensor_api.deleter_calls() == deleted
    del t
    collect()
    assert tensor_api.deleter_calls() == deleted + 1


def test_a_refused_managed_tensor_is_freed_once(tensor_api, collect):
    deleted = tensor_api.deleter_calls()
    with pytest.raises(BufferError, match="major version"):
        tensor_api.exchange_to_object(hd.Tensor, [2], major=2)
    assert tensor_api.deleter_calls() == deleted + 1, "the stolen tensor is ours to free"
    with pytest.raises(BufferError, match="shape"):
        tensor_api.exchange_to_object(hd.Tensor, [2, -1])
    collect()
    assert tensor_api.deleter_calls() == deleted + 2


def test_the_table_allocates_nothing_and_works_on_the_legacy_stream(tensor_api):
    status, out_is_null, kind, message = tensor_api.exchange_allocate(hd.Tensor)
    assert (status, out_is_null, kind) == (-1, True, "NotImplementedError")
    assert "allocate" in message
    for device_type in (KDL_CPU, KDL_CUDA):
        assert tensor_api.exchange_work_stream(hd.Tensor, device_type) == 0


def test_the_table_refuses_null_output_pointers_and_frees_what_it_was_given(tensor_api, collect):
    # A C consumer's misuse: each converter wrote through the null pointer (a segmentation fault).
    # Holoscan 5.0 refuses each with the sentences checked here. The exports of a null object
    # read its type (a segmentation fault too) and are refused as well.
    deleted = tensor_api.deleter_calls()
    results = tensor_api.exchange_null_outputs(hd.Tensor)
    assert results == {
        "managed_tensor_from_py_object_no_sync": (-1, "DLPack output pointer must not be null"),
        "dltensor_from_py_object_no_sync": (-1, "DLPack output tensor must not be null"),
        "managed_tensor_from_py_object_no_sync, null object": (-1, "Python object must not be null"),
        "dltensor_from_py_object_no_sync, null object": (-1, "Python object must not be null"),
        "managed_tensor_to_py_object_no_sync": (-1, "Python object output pointer must not be null"),
        "current_work_stream": (-1, "DLPack stream output pointer must not be null"),
        "managed_tensor_allocator": (-1, ""),  # no SetError given: none called
    }
    collect()
    assert tensor_api.deleter_calls() == deleted + 1, "the stolen tensor is ours to free, once"


FAILING_TABLE = """
    import holoscan_dlpack as hd
    import holoscan_dlpack_testing as testing

    testing.set_work_stream(0)
    testing.set_exchange_failure({call!r}, sets_error={sets_error})
    deleted = testing.deleter_calls()
    try:
        hd.from_dlpack(testing.ExchangeProducer([8], {device_type}))
    except Exception as error:
        print(type(error).__name__ + ":", error)
    print("deleter calls:", testing.deleter_calls() - deleted)
"""


@pytest.mark.parametrize("call, sets_error, raised, deleted", [
    ("from_py_object", True, "ValueError: the test producer's table call fails", 0),
    ("from_py_object", False, "BufferError: DLPack C exchange managed export failed: "
     "__dlpack_c_exchange_api__ gave no tensor", 0),
    ("current_work_stream", True, "ValueError: the test producer's table call fails", 1),
    ("current_work_stream", False,
     "BufferError: DLPack C exchange current stream query failed: __dlpack_c_exchange_api__ gave "
     "no work stream", 1),
], ids=["converter-error", "converter-no-error", "work-stream-error", "work-stream-no-error"])
def test_a_failing_table_call_raises_and_frees_what_it_gave_once(exchange, call, sets_error,
                                                                 raised, deleted):
    # In a child: DLPack asks a failing call to set a Python error, and raising nanobind's
    # python_error without one aborts the process (before, the work stream's failure did).
    result = run_python(FAILING_TABLE.format(call=call, sets_error=sets_error,
                                             device_type=KDL_CUDA))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [raised, f"deleter calls: {deleted}"]


def test_an_export_another_import_took_is_refused_without_its_deleter(tensor_api, collect):
    # The table's import frees a refused tensor (it was handed over), but this library's export
    # that an import took, or whose deleter ran, was not the caller's to hand over: freeing it
    # would free the copy under the import that owns it.
    import ctypes
    from test_numpy_roundtrip import capsule_of
    api = ctypes.pythonapi
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    table = api.PyCapsule_GetPointer(hd.Tensor.__dlpack_c_exchange_api__, b"dlpack_exchange_api")
    # PYFUNCTYPE: called with the GIL held, and the error it sets raised on return.
    signature = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.py_object))
    # managed_tensor_to_py_object_no_sync: after the header (version, prev_api) and two entries
    to_object = signature(ctypes.c_void_p.from_address(table + 32).value)

    source = hd.from_dlpack(np.full(64, 7.0)).copy()
    capsule = source.__dlpack__(max_version=(1, 0), copy=True)
    pointer = api.PyCapsule_GetPointer(capsule, b"dltensor_versioned")
    failed = hd.failed_releases()
    first = hd.from_dlpack(capsule)
    out = ctypes.py_object()
    with pytest.raises(BufferError, match="this export was imported already"):
        to_object(pointer, ctypes.byref(out))
    collect()
    assert (np.asarray(first) == 7.0).all() and hd.failed_releases() == failed
    del first
    collect()
    hd.flush_deferred_releases()
    with pytest.raises(BufferError, match="this export's deleter ran already"):
        to_object(pointer, ctypes.byref(out))
    assert hd.failed_releases() == failed, "a deleter ran twice"
