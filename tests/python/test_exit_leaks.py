"""Nothing of ours outlives the interpreter: a fresh interpreter runs the imports, exports and
dtype comparisons that the framework tests run, keeps some of the objects in module globals until
exit (as a test module's parametrize values are kept), and nanobind's exit check must report no
leaked instance, type or function.

The check belongs in a child: the pytest process itself can end with nanobind's report while none
of our references is at fault. With torch imported and a plugin that pytest loads through its
assertion rewriter (pytest-mock, anyio, jaxtyping), the whole session graph (every item and its
parametrize values: DLDataType(2, 16, 1), from_dlpack, the error classes and with them ErrorCode)
is still alive when nanobind counts, and a plain Python object in a parametrize list is never
finalized either (pyproject.toml turns plugin autoloading off for this suite)."""

import os

import pytest

from conftest import cuda_torch, run_python

np = pytest.importorskip("numpy")

NUMPY_SEQUENCE = """
    import numpy as np
    import holoscan_dlpack as hd

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = hd.from_dlpack(a)
    u = hd.as_tensor(a)
    w = hd.Tensor.as_tensor(hd.Tensor.from_dlpack(a))
    assert t.dtype == hd.DLDataType(2, 32, 1) and t.dtype != 5 and t.dtype != None
    assert t.device == hd.DLDevice(1, 0) and t.device != "cpu"
    assert np.from_dlpack(t).sum() == a.sum()  # an export consumed by NumPy
    assert np.asarray(u).sum() == a.sum()  # through __array_interface__
    unconsumed = t.__dlpack__(max_version=(1, 0))
    copy = t.__dlpack__(max_version=(1, 0), copy=True)
    pool = hd.TensorPool(memory="host", block_bytes=256, block_count=2)
    pooled = pool.allocate([4], hd.DLDataType(2, 16, 1))
    try:
        hd.from_dlpack(a, stream=0)
    except hd.errors.InvalidArgumentError as error:
        kept_error = error  # its traceback holds this module's frame
    kept = [hd.DLDataType(2, 16, 1), hd.from_dlpack, hd.as_tensor, hd.Tensor.from_dlpack,
            hd.Tensor.as_tensor, hd.errors.InvalidArgumentError, hd.ErrorCode.FAILURE]
    print("ran")
"""

TORCH_SEQUENCE = """
    import torch

    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    tx = hd.from_dlpack(x)
    ux = hd.as_tensor(x)
    assert tx.dtype == hd.DLDataType(2, 32, 1)
    y = torch.from_dlpack(tx)  # an export consumed by torch
    z = torch.as_tensor(np.asarray(ux))
    assert float(y.sum()) == float(z.sum()) == float(x.sum())
    back = hd.from_dlpack(y)
    print("ran with torch")
"""


def assert_no_leak_at_exit(source, ran):
    result = run_python(source)
    assert result.returncode == 0, result.stderr
    assert ran in result.stdout, result.stdout
    assert "nanobind: leaked" not in result.stderr, result.stderr


def test_nothing_leaks_at_exit_with_numpy():
    assert_no_leak_at_exit(NUMPY_SEQUENCE, "ran")


def test_nothing_leaks_at_exit_with_torch():
    pytest.importorskip("torch")
    assert_no_leak_at_exit(NUMPY_SEQUENCE + TORCH_SEQUENCE, "ran with torch")


def producer_class(capsule):
    """Source of a `Producer(name)` over `self.a` (four float64) whose __dlpack__ returns
    `capsule` and whose finalizer prints "finalized NAME"."""
    return f"""
    import sys
    import numpy as np
    sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
    from null_deleter import null_deleter_capsule

    class Producer:
        def __init__(self, name):
            self.name = name
            self.a = np.arange(4.0)

        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kwargs):
            return {capsule}

        def __del__(self):
            print("finalized", self.name, flush=True)
"""


# The import keeps these producers (their tensors have no deleter), so their last owners drop them.
PYTHON_PRODUCER_AT_EXIT = producer_class(
    "null_deleter_capsule(self, self.a.ctypes.data, [4], dtype=(2, 64, 1))") + """
    import atexit

    cache = {}
    atexit.register(cache.clear)  # runs after the package's own atexit hook (registered later)
    import holoscan_dlpack as hd

    t = hd.from_dlpack(Producer("global"))
    u = hd.from_dlpack(t)  # another owner of the memory until the modules' globals go
    cache["t"] = hd.from_dlpack(Producer("cached"))
    print("ran")
"""


def test_producers_dropped_at_exit_are_released_by_the_finalizing_thread():
    """The last owner dropped while the interpreter finalizes (a module's globals, an atexit
    cleanup that runs after the package's hook) releases a Python producer on the thread that
    finalizes, which holds the GIL: it is not leaked, and neither is what it keeps alive."""
    result = run_python(PYTHON_PRODUCER_AT_EXIT)
    assert result.returncode == 0, result.stderr
    assert "ran" in result.stdout, result.stdout
    assert "finalized global" in result.stdout, result.stdout + result.stderr
    assert "finalized cached" in result.stdout, result.stdout + result.stderr
    assert "nanobind: leaked" not in result.stderr, result.stderr


PRODUCER_WITH_A_VIEW_AT_EXIT = producer_class("self.a.__dlpack__(**kwargs)") + """
    import holoscan_dlpack as hd

    t = hd.from_dlpack(Producer("behind a view"))
    view = np.asarray(t)  # the array's base is t, and the producer's methods reach these globals
    capsule = t.__dlpack__(max_version=(1, 0))
    print("ran", flush=True)
"""


def test_a_producer_behind_a_view_at_exit_is_finalized_and_nothing_leaks():
    """A module-level import with a NumPy view and an unconsumed capsule of it: the producer, whose
    tensor owns its memory, is not held by the import, so no cycle through the module's globals
    (which the collector cannot see through the view) keeps it past exit."""
    result = run_python(PRODUCER_WITH_A_VIEW_AT_EXIT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["finalized behind a view", "ran"], (
        result.stdout + result.stderr)
    assert "nanobind: leaked" not in result.stderr, result.stderr


WORKER_WITH_A_POOL_AT_EXIT = """
    import holoscan_dlpack as hd
    from holoscan_dlpack import ucx

    pool = hd.TensorPool(memory="host", block_bytes=256, block_count=2)
    worker = ucx.Worker(receive_pool=pool)  # closed by the modules' globals going at exit
    print("ran")
"""


def test_a_worker_closed_at_exit_releases_its_receive_pool():
    """A UCX worker still open at exit is closed as the interpreter finalizes: its receive pool,
    a Python object, was let go without the GIL and leaked (the pool and its blocks with it)."""
    pytest.importorskip("holoscan_dlpack.ucx")
    assert_no_leak_at_exit(WORKER_WITH_A_POOL_AT_EXIT, "ran")


# The producer's tensor is read on a stream that is still busy when the script ends: its release
# waits for the GPU past the interpreter's last bytecode.
PRODUCER_BEHIND_THE_GPU_AT_EXIT = producer_class(
    "null_deleter_capsule(self, self.a.ctypes.data, [4], dtype=(2, 64, 1))") + """
    import torch
    import holoscan_dlpack as hd

    stream = torch.cuda.Stream()
    torch.cuda._sleep(1000)  # loads the kernel: its first launch waits for the whole device
    torch.cuda.synchronize()
    t = hd.from_dlpack(Producer("behind the GPU"))
    with torch.cuda.stream(stream):
        torch.cuda._sleep(200_000_000)  # about a tenth of a second
    assert t.set_deallocation_stream(stream.cuda_stream)
    del t
    print("ran", flush=True)
"""


def test_gpu_a_release_behind_the_gpu_at_exit_still_finalizes_its_python_producer():
    """The package's atexit hook waits (within the exit drain's limit) for releases the GPU still
    holds: left to the C exit drain, after finalization, their Python producers could only leak."""
    cuda_torch()
    result = run_python(PRODUCER_BEHIND_THE_GPU_AT_EXIT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["ran", "finalized behind the GPU"], (
        result.stdout + result.stderr)
