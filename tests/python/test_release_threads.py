"""GIL safety of releases: the last owner dropped on a thread Python does not know (as the
library's release thread does) while a Python thread holds the GIL and waits; releases on Python
threads; flush while references are held; and interpreter shutdown with releases pending."""

import gc
import threading
import time
import weakref

import pytest

import holoscan_dlpack as hd
from conftest import run_python

np = pytest.importorskip("numpy")


def held_numpy_import(testing, size):
    """A weak reference to a NumPy array whose only owner is an import the helpers hold."""
    a = np.arange(float(size))
    w = weakref.ref(a)
    testing.hold(hd.from_dlpack(a))
    del a
    gc.collect()
    assert w() is not None
    return w


def test_foreign_thread_release_never_waits_for_the_gil(testing):
    w = held_numpy_import(testing, 100)
    # This thread keeps the GIL while the other drops the last owner: NumPy's deleter takes the
    # GIL, so running it there would never finish.
    finished, _, alive = testing.drop_held_on_foreign_thread(timeout=10.0, watch=w)
    assert finished, "the release on the foreign thread waited for the GIL (deadlock)"
    assert alive, "the release ran on the foreign thread instead of being handed over"
    hd.pending_deferred_releases()  # any entry into the module drains
    assert w() is None


def test_gil_taking_deleter_runs_on_a_python_thread(testing, collect):
    calls = testing.deleter_calls()
    testing.hold(hd.from_dlpack(testing.make_capsule(gil_deleter=True)))
    finished, deleted, _ = testing.drop_held_on_foreign_thread(timeout=10.0)
    assert finished
    assert deleted == calls, "the producer's deleter ran on the foreign thread"
    collect()
    assert testing.deleter_calls() == calls + 1
    assert testing.last_deleter_thread() == threading.get_ident()


def test_pending_call_drains_without_entering_the_module(testing):
    w = held_numpy_import(testing, 10)
    testing.drop_held_on_foreign_thread()
    # The main thread runs pending calls between bytecodes. Before Python 3.13 it notices one
    # added by a foreign thread only once it takes the GIL again (any blocking call does).
    for _ in range(1000):
        time.sleep(0)
        if w() is None:
            break
    assert w() is None, "the pending call never drained the queue"


def test_drains_between_pending_calls_never_fill_the_interpreters_table(testing):
    """Releases handed over while the main thread is blocked in C, each drained by an entry into
    the module from another thread, register one pending call in all: CPython's table (32 slots,
    shared by every extension) keeps room for others."""
    import ctypes

    callback_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
    ran = []

    @callback_type
    def third_party(_):
        ran.append(True)
        return 0

    add_pending_call = ctypes.pythonapi.Py_AddPendingCall
    add_pending_call.argtypes = [callback_type, ctypes.c_void_p]
    add_pending_call.restype = ctypes.c_int
    added = []

    def worker():
        for _ in range(64):
            testing.hold(hd.from_dlpack(np.arange(4.0)))
            finished, _, _ = testing.drop_held_on_foreign_thread()
            assert finished
            hd.pending_deferred_releases()  # an entry into the module drains the queue
        added.append(add_pending_call(third_party, None))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()  # the main thread waits in C: no pending call runs meanwhile
    assert added == [0], "the interpreter's table of pending calls was full"
    for _ in range(1000):
        time.sleep(0)
        if ran:
            break
    assert ran


def test_python_thread_releases_on_itself(testing):
    calls = testing.deleter_calls()
    t = hd.from_dlpack(testing.make_capsule(gil_deleter=True))
    box = [t]
    del t
    seen = []

    def drop():
        box.clear()  # the last owner goes on this thread, which holds the GIL: released now
        seen.append((testing.deleter_calls(), threading.get_ident()))

    worker = threading.Thread(target=drop)
    worker.start()
    worker.join()
    assert seen == [(calls + 1, worker.ident)]
    assert testing.last_deleter_thread() == worker.ident


def test_many_threads_drop_concurrently(testing, collect):
    calls = testing.deleter_calls()
    tensors = [hd.from_dlpack(testing.make_capsule(gil_deleter=True)) for _ in range(64)]
    for t in tensors[:32]:
        testing.hold(t)
    del t
    barrier = threading.Barrier(4)

    def drop(part):
        barrier.wait()
        part.clear()

    parts = [tensors[i::4] for i in range(4)]
    del tensors
    threads = [threading.Thread(target=drop, args=(part,)) for part in parts]
    for thread in threads:
        thread.start()
    finished, _, _ = testing.drop_held_on_foreign_thread()
    for thread in threads:
        thread.join()
    assert finished
    collect()
    assert testing.deleter_calls() == calls + 64


def test_flush_while_holding_references(testing):
    keep = [hd.from_dlpack(np.arange(i + 1)) for i in range(8)]
    w = held_numpy_import(testing, 5)
    testing.drop_held_on_foreign_thread()
    hd.flush_deferred_releases()  # releases the GIL, then drains what was queued for it
    assert w() is None
    assert hd.pending_deferred_releases() == 0
    for i, t in enumerate(keep):  # the held ones are untouched
        np.testing.assert_array_equal(np.from_dlpack(t), np.arange(i + 1))

    flushed = []
    flusher = threading.Thread(target=lambda: flushed.append(hd.flush_deferred_releases()))
    flusher.start()
    flusher.join(timeout=10)
    assert flushed == [None], "flush from another Python thread did not return"


def test_shutdown_runs_queued_releases_before_finalization():
    result = run_python("""
        import atexit, weakref
        import numpy as np
        seen = []
        atexit.register(lambda: print("producer released before finalization:", w() is None))
        import holoscan_dlpack as hd
        import holoscan_dlpack_testing as _testing
        a = np.arange(10.0)
        w = weakref.ref(a)
        _testing.hold(hd.from_dlpack(a))
        del a
        # Runs before holoscan_dlpack's own exit hook (atexit is last in, first out).
        atexit.register(_testing.drop_held_on_foreign_thread)
    """)
    assert result.returncode == 0, result.stderr
    assert "producer released before finalization: True" in result.stdout
    assert "Fatal" not in result.stderr and "Exception" not in result.stderr


def test_release_after_finalization_leaks_instead_of_touching_python():
    result = run_python("""
        import numpy as np
        import holoscan_dlpack as hd
        import holoscan_dlpack_testing as _testing
        # Dropped by a C atexit handler, after Py_Finalize: must not call into Python.
        _testing.hold_until_exit(hd.from_dlpack(np.arange(1000.0)))
        _testing.hold_until_exit(hd.from_dlpack(_testing.make_capsule(gil_deleter=True)))
        # Dropped on a foreign thread while the interpreter shuts down.
        for i in range(20):
            _testing.hold(hd.from_dlpack(np.arange(i + 1)))
            _testing.drop_held_later(0.001 * i)
        print("main done")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["main done",
                                          "post-finalization drop: 0 producer deleter calls"]
    assert result.stderr == ""


def test_a_fork_while_releases_are_queued_leaves_the_child_usable(testing):
    # A thread the parent does not wait for hands releases to Python (it takes the queue's lock
    # for each) while the parent forks: a child copied with that lock taken waited for it for
    # ever at its first entry into the module (about 1 fork in 100 here before the fix).
    result = run_python("""
        import os, time, warnings
        import numpy as np
        import holoscan_dlpack as hd
        import holoscan_dlpack_testing as testing
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads, on purpose
        hung = 0
        for round in range(500):
            for _ in range(3000):
                testing.hold(hd.from_dlpack(np.arange(4.0)))
            testing.drop_held_later(0.0)
            time.sleep(0.00003 * (round % 10))  # forks at spread moments of the drops
            pid = os.fork()
            if pid == 0:
                hd.pending_deferred_releases()  # an entry into the module: drains the queue
                hd.as_tensor(np.zeros(3))
                os._exit(0)
            deadline = time.monotonic() + 10
            while os.waitpid(pid, os.WNOHANG)[0] == 0:
                if time.monotonic() > deadline:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    hung += 1
                    break
                time.sleep(0.001)
            hd.flush_deferred_releases()
        print("hung children:", hung)
        """, timeout=900)
    assert result.returncode == 0, result.stderr
    assert "hung children: 0" in result.stdout, result.stdout + result.stderr
