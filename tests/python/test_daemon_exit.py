"""A daemon thread inside one of the package's waits without the GIL when the interpreter exits.
CPython (before 3.14) ends such a thread with pthread_exit() when it takes the GIL back; glibc
unwinds its stack by force, and an unwinding that reaches a noexcept destructor or a catch (...)
that does not rethrow aborts the process (status 134, after main() returned normally, without
the C atexit handlers, the library's exit drain among them). Such a thread must park instead, while
the thread that runs the finalization still takes the GIL back after a wait of its own."""

import os
import textwrap

import pytest

from conftest import run_python


def assert_clean_exit(result):
    assert "main exits" in result.stdout, result.stderr
    assert "terminate called" not in result.stderr, result.stderr
    assert result.returncode == 0, (
        f"status {result.returncode} at interpreter exit: {result.stderr.strip()}")


def assert_clean_exits_with_daemon_threads_calling(setup, *calls, runs=4, try_first=True,
                                                   settle_s=0.2, before_exit="", teardown_s=0.3):
    """Runs `runs` children that run `setup`, then each of `calls` (statements) for ever on a
    daemon thread of its own, and expects each child to exit cleanly. With `try_first`, each call
    runs once on the main thread first: it works, or refuses as the library does (a call that
    raised anything else would leave its thread's test checking nothing); a call that waits for
    ever asks for try_first=False. Past `settle_s` seconds the main thread runs `before_exit` and
    exits; a finalization that lasts `teardown_s` more seconds (None: no wait) has the threads
    wait for the GIL once it has begun."""
    def indented(code, spaces):
        return textwrap.indent(textwrap.dedent(code).strip(), " " * spaces)

    tried = "".join(f"""
try:
{indented(call, 4)}
except hd.HoloscanError:
    pass
""" for call in calls) if try_first else ""
    threads = "".join(f"""
def call_for_ever_{index}():
    while True:
        try:
{indented(call, 12)}
        except hd.HoloscanError:
            pass

threading.Thread(target=call_for_ever_{index}, daemon=True).start()
""" for index, call in enumerate(calls))
    teardown = "" if teardown_s is None else f"""
class SlowTeardown:
    def __del__(self, sleep=time.sleep):
        sleep({teardown_s})

slow = SlowTeardown()
"""
    source = f"""
import threading, time
import numpy as np
import holoscan_dlpack as hd
{textwrap.dedent(setup)}
{tried}
{threads}
time.sleep({settle_s})
{textwrap.dedent(before_exit)}
{teardown}
print("main exits", flush=True)
"""
    for _ in range(runs):
        assert_clean_exit(run_python(source))


def test_a_daemon_thread_waiting_in_ipc_accept_does_not_abort_the_exit(tmp_path):
    path = os.fspath(tmp_path / "sock")
    assert_clean_exits_with_daemon_threads_calling(f"""
        from holoscan_dlpack import ipc
        listener = ipc.Listener({path!r})
        """, "listener.accept(timeout_ms=None)", runs=1, try_first=False, settle_s=0.3,
        teardown_s=None)


def test_a_daemon_thread_waiting_in_ucx_receive_does_not_abort_the_exit():
    pytest.importorskip("holoscan_dlpack.ucx")
    assert_clean_exits_with_daemon_threads_calling("""
        from holoscan_dlpack import ucx
        worker = ucx.Worker()
        """, "worker.receive(timeout_ms=None)", runs=1, try_first=False, settle_s=0.3,
        teardown_s=None)


def test_a_daemon_thread_dropping_the_last_worker_with_a_receive_pool_does_not_abort_the_exit():
    # The worker keeps its receive pool's Python object. A receive() under way keeps the worker
    # after close(); its slice drops the last reference without the GIL. Once finalization has
    # begun, giving the pool's reference back must not wait for the GIL on that thread (nanobind's
    # own shared_ptr does: PyGILState_Ensure, then pthread_exit() through noexcept destructors).
    # Finalization lasts beyond that slice (at most 100 ms).
    pytest.importorskip("holoscan_dlpack.ucx")
    assert_clean_exits_with_daemon_threads_calling("""
        from holoscan_dlpack import ucx
        pool = hd.TensorPool(memory="host", block_bytes=64, block_count=1)
        worker = ucx.Worker(receive_pool=pool)
        del pool
        """, "worker.receive(timeout_ms=None)", runs=1, try_first=False, settle_s=0.3,
        before_exit="worker.close()", teardown_s=0.5)


def test_daemon_threads_raising_library_errors_do_not_abort_the_exit():
    # Each library failure becomes its holoscan_dlpack.errors exception inside the extension. Had
    # that run Python code, the thread could give the GIL away there, and a daemon thread taking
    # it back once finalization had begun was ended by CPython (pthread_exit()) with the
    # extension's C++ frames on its stack: SIGSEGV or SIGABRT at exit, about one run in two.
    assert_clean_exits_with_daemon_threads_calling("""
        from holoscan_dlpack import ipc

        mine, theirs = ipc.Channel.pair()
        theirs.close()
        """, "ipc.Importer(theirs)  # ClosedError",
        "hd.TensorPool(memory='elsewhere', block_bytes=1, block_count=1)", runs=6)


def test_a_daemon_thread_importing_a_python_producer_does_not_abort_the_exit():
    # A producer's __dlpack__ and __dlpack_device__ are Python code that the import runs from the
    # extension's C++ frames; a daemon thread ended inside them at exit must not unwind those.
    assert_clean_exits_with_daemon_threads_calling("""
        array = np.arange(4.0)

        class Producer:
            def __dlpack__(self, **keywords):
                total = 0
                for i in range(200):  # bytecode long enough to give the GIL away
                    total += i
                return array.__dlpack__(**keywords)

            def __dlpack_device__(self):
                return (1, 0)
        """, "hd.from_dlpack(Producer())", runs=6)


def test_a_daemon_thread_reading_an_array_interface_property_does_not_abort_the_exit():
    # An array interface is often a property (Numba's device arrays, wrappers): Python code that
    # as_tensor runs from its C++ frames, as a producer's __dlpack__ is.
    assert_clean_exits_with_daemon_threads_calling("""
        array = np.arange(4.0)

        class Exporter:
            @property
            def __array_interface__(self):
                total = 0
                for i in range(200):  # bytecode long enough to give the GIL away
                    total += i
                return array.__array_interface__
        """, "hd.as_tensor(Exporter())", runs=6)


def test_a_daemon_thread_dropping_imports_of_a_finalized_producer_does_not_abort_the_exit():
    # The last owner of an import drops the producer object (held since its tensor has no
    # deleter), whose finalizer is Python code run from the library's (noexcept) release path: a
    # thread ended there at exit must park.
    assert_clean_exits_with_daemon_threads_calling(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        from null_deleter import null_deleter_capsule

        array = np.arange(4.0)

        class Producer:
            def __dlpack__(self, **keywords):
                return null_deleter_capsule(self, array.ctypes.data, [4], dtype=(2, 64, 1))

            def __dlpack_device__(self):
                return (1, 0)

            def __del__(self):
                total = 0
                for i in range(300):  # bytecode long enough to give the GIL away
                    total += i
        """, """
        tensor = hd.from_dlpack(Producer())
        del tensor
        """, runs=6)


def test_a_daemon_thread_whose_producer_deleter_runs_a_finalizer_does_not_abort_the_exit():
    # NumPy's deleter drops the array it exported: a subclass's finalizer is Python code run
    # inside the producer's deleter, itself run from the library's (noexcept) release path.
    assert_clean_exits_with_daemon_threads_calling("""
        class Finalized(np.ndarray):
            def __del__(self, sleep=time.sleep):
                sleep(0.002)  # gives the GIL away: most of the thread's time is spent here

        class Producer:
            def __dlpack__(self, **keywords):
                return np.arange(4.0).view(Finalized).__dlpack__(**keywords)

            def __dlpack_device__(self):
                return (1, 0)
        """, """
        tensor = hd.from_dlpack(Producer())
        del tensor
        """, runs=6)


def test_a_daemon_thread_importing_through_a_proxy_does_not_abort_the_exit():
    # as_tensor asks a proxy for the protocol's names: its __getattr__ is Python code run from
    # the extension's C++ frames.
    assert_clean_exits_with_daemon_threads_calling("""
        class Proxy:
            def __init__(self, target):
                self._target = target

            def __getattr__(self, name):
                total = 0
                for i in range(200):  # bytecode long enough to give the GIL away
                    total += i
                return getattr(self._target, name)

        proxy = Proxy(np.arange(4.0))
        """, "hd.as_tensor(proxy)", runs=6)


def test_a_wait_during_finalization_on_the_finalizing_thread_completes():
    # __main__'s globals are cleared after finalization has begun, on the thread that runs it.
    result = run_python("""
        import os
        import holoscan_dlpack as hd

        class FlushesWhenCollected:
            def __del__(self, flush=hd.flush_deferred_releases, write=os.write):
                flush()
                write(1, b"flushed at exit\\n")

        late = FlushesWhenCollected()
        print("main exits", flush=True)
    """)
    assert_clean_exit(result)
    assert "flushed at exit" in result.stdout, result.stderr


def test_a_daemon_thread_reading_an_integer_through_index_does_not_abort_the_exit():
    # nanobind reads an __index__ from its noexcept integer caster: an unwinding through it aborts.
    assert_clean_exits_with_daemon_threads_calling("""
        tensor = hd.as_tensor(np.arange(4.0))

        class Index:
            def __index__(self):
                time.sleep(0)
                return 1

        class IndexedDevice:  # a producer whose device type is read through __index__
            def __dlpack_device__(self):
                return (Index(), 0)

            def __dlpack__(self, **kwargs):
                return np.arange(4.0).__dlpack__(**kwargs)
        """, "tensor.__dlpack__(max_version=(1, 0), dl_device=(Index(), 0))",
        "tensor.__dlpack__(max_version=(Index(), 0))",
        "hd.from_dlpack(IndexedDevice())")


def test_a_daemon_thread_reading_a_custom_sequence_does_not_abort_the_exit():
    assert_clean_exits_with_daemon_threads_calling("""
        tensor = hd.as_tensor(np.arange(4.0))

        class Pair:
            def __len__(self):
                time.sleep(0)
                return 2

            def __getitem__(self, index):
                time.sleep(0)
                return (1, 0)[index]
        """, "tensor.copy_to(Pair())")


def test_a_daemon_thread_reading_a_shape_from_a_custom_sequence_does_not_abort_the_exit():
    assert_clean_exits_with_daemon_threads_calling("""
        pool = hd.TensorPool(memory="host", block_bytes=64, block_count=4)

        class Shape:
            def __len__(self):
                return 1

            def __getitem__(self, index):
                time.sleep(0)
                if index != 0:
                    raise IndexError(index)
                return 2
        """, "pool.allocate(Shape(), 'float32')")


def test_a_daemon_thread_warning_through_a_python_showwarning_does_not_abort_the_exit():
    # logging.captureWarnings() and test runners put Python code behind every warning.
    assert_clean_exits_with_daemon_threads_calling("""
        import warnings
        warnings.simplefilter("always")

        def showwarning(*arguments, **keywords):
            time.sleep(0)

        warnings.showwarning = showwarning
        tensor = hd.as_tensor(np.arange(4.0))
        """, "tensor.read_only")


def test_a_daemon_thread_reading_a_dtype_property_does_not_abort_the_exit():
    assert_clean_exits_with_daemon_threads_calling("""
        pool = hd.TensorPool(memory="host", block_bytes=64, block_count=4)

        class DtypeLike:
            @property
            def str(self):
                time.sleep(0)
                return "<f4"
        """, "pool.allocate((2,), DtypeLike())")


def test_a_daemon_thread_describing_a_refused_argument_does_not_abort_the_exit():
    # The error's text is the argument's str(): Python code run from the extension's C++ frames.
    assert_clean_exits_with_daemon_threads_calling("""
        tensor = hd.as_tensor(np.arange(4.0))

        class Huge:
            def __index__(self):
                return 2 ** 40

            def __repr__(self):
                time.sleep(0)
                return "Huge()"
        """, "tensor.__dlpack__(max_version=(1, 0), dl_device=(Huge(), 0))")


def test_a_daemon_thread_looking_up_a_new_type_s_exchange_api_does_not_abort_the_exit():
    # Each new producer type is asked for __dlpack_c_exchange_api__: a metaclass's __getattr__.
    assert_clean_exits_with_daemon_threads_calling("""
        array = np.arange(4.0)

        class Meta(type):
            def __getattr__(cls, name):
                time.sleep(0)
                raise AttributeError(name)

        def producer():
            class Producer(metaclass=Meta):
                def __dlpack__(self, **keywords):
                    return array.__dlpack__(**keywords)

                def __dlpack_device__(self):
                    return (1, 0)
            return Producer()
        """, "hd.from_dlpack(producer())")


# Objects the import drops on its way out, an error's included, are dropped under the same guard
# as the producer's calls: their finalizers are Python code too.
REFUSED_IMPORT = """
try:
    hd.from_dlpack(Producer())
except (BufferError, TypeError):
    pass
"""


def test_a_daemon_thread_whose_refused_capsule_runs_a_finalizer_does_not_abort_the_exit():
    # Refused (another major version), the capsule still owns the tensor: dropping it runs
    # NumPy's deleter, which drops the array, whose finalizer is Python code.
    assert_clean_exits_with_daemon_threads_calling("""
        import ctypes
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype = ctypes.c_void_p
        get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

        class Finalized(np.ndarray):
            def __del__(self, sleep=time.sleep):
                sleep(0.002)

        class Producer:
            def __dlpack__(self, **keywords):
                capsule = np.arange(4.0).view(Finalized).__dlpack__(**keywords)
                major = get_pointer(capsule, b"dltensor_versioned")  # version.major comes first
                ctypes.c_uint32.from_address(major).value = 2
                return capsule

            def __dlpack_device__(self):
                return (1, 0)
        """, REFUSED_IMPORT, runs=6)


def test_a_daemon_thread_whose_producer_returns_no_capsule_with_a_finalizer_does_not_abort_the_exit():
    assert_clean_exits_with_daemon_threads_calling("""
        class NotACapsule:
            def __del__(self, sleep=time.sleep):
                sleep(0.002)

        class Producer:
            def __dlpack__(self, **keywords):
                return NotACapsule()

            def __dlpack_device__(self):
                return (1, 0)
        """, REFUSED_IMPORT, runs=6)


def test_a_daemon_thread_whose_device_answer_has_a_finalizer_does_not_abort_the_exit():
    assert_clean_exits_with_daemon_threads_calling("""
        class Device(tuple):
            def __del__(self, sleep=time.sleep):
                sleep(0.002)

        class Producer:
            def __dlpack__(self, **keywords):
                return np.arange(4.0).__dlpack__(**keywords)

            def __dlpack_device__(self):
                return Device((1, 0))
        """, REFUSED_IMPORT, runs=6)


def test_daemon_threads_whose_stream_and_dtype_answers_have_finalizers_do_not_abort_the_exit():
    # `__cuda_stream__()`'s pair and a dtype-like object's `str` are dropped under the same guard.
    assert_clean_exits_with_daemon_threads_calling("""
        pool = hd.TensorPool(memory="host", block_bytes=64, block_count=4)
        array = np.arange(4.0)

        class Pair(tuple):
            def __del__(self, sleep=time.sleep):
                sleep(0.002)

        class Stream:
            def __cuda_stream__(self):
                return Pair((0, 1))

        class Text(str):
            def __del__(self, sleep=time.sleep):
                sleep(0.002)

        class DtypeLike:
            @property
            def str(self):
                return Text("<f4")
        """, "hd.from_dlpack(array, stream=Stream())", "pool.allocate((2,), DtypeLike())",
        runs=6)


def test_daemon_threads_whose_attributes_and_pair_items_have_finalizers_do_not_abort_the_exit():
    # A property's value (a stream's `__cuda_stream__` method, an array interface's description)
    # and the items a sequence's `__getitem__` builds are fresh objects, dropped under the guard too.
    assert_clean_exits_with_daemon_threads_calling("""
        array = np.arange(4.0)

        class Finalized:
            def __del__(self, sleep=time.sleep):
                sleep(0.002)

        class Method(Finalized):
            def __call__(self):
                return (0, 1)

        class PropertyStream:
            @property
            def __cuda_stream__(self):
                return Method()

        class Index(Finalized):
            def __index__(self):
                return 1

        class Pair:
            def __len__(self):
                return 2

            def __getitem__(self, index):
                if index > 1:
                    raise IndexError(index)
                return 0 if index == 0 else Index()

        class PairStream:
            def __cuda_stream__(self):
                return Pair()

        class Producer:
            @property
            def __array_interface__(self):
                return dict(array.__array_interface__, extra=Finalized())

        class Meta(type):
            @property
            def __dlpack_c_exchange_api__(cls):
                return Finalized()  # no table: looked up anew for every new type

        def fresh_type_producer():
            class Fresh(metaclass=Meta):
                def __dlpack__(self, **keywords):
                    return array.__dlpack__(**keywords)

                def __dlpack_device__(self):
                    return (1, 0)
            return Fresh()
        """, "hd.from_dlpack(array, stream=PropertyStream())",
        "hd.from_dlpack(array, stream=PairStream())", "hd.as_tensor(Producer())",
        "hd.from_dlpack(fresh_type_producer())", runs=6)


def test_a_daemon_thread_setting_a_duration_whose_division_has_a_finalizer_does_not_abort_the_exit():
    assert_clean_exits_with_daemon_threads_calling("""
        import datetime

        class Count(int):
            def __del__(self, sleep=time.sleep):
                sleep(0.002)

        class Duration(datetime.timedelta):
            def __floordiv__(self, other):
                time.sleep(0)
                return Count(datetime.timedelta.__floordiv__(self, other))
        """, "hd.ReleaseThreadOptions(poll_interval=Duration(microseconds=50))", runs=6)
