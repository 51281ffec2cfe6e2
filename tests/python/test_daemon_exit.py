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


def test_a_daemon_thread_waiting_in_ipc_accept_does_not_abort_the_exit(tmp_path):
    path = os.fspath(tmp_path / "sock")
    result = run_python(f"""
        import threading, time
        from holoscan_dlpack import ipc
        listener = ipc.Listener({path!r})
        threading.Thread(target=lambda: listener.accept(timeout_ms=None), daemon=True).start()
        time.sleep(0.3)
        print("main exits", flush=True)
    """)
    assert_clean_exit(result)


def test_a_daemon_thread_waiting_in_ucx_receive_does_not_abort_the_exit():
    pytest.importorskip("holoscan_dlpack.ucx")
    result = run_python("""
        import threading, time
        from holoscan_dlpack import ucx
        worker = ucx.Worker()
        threading.Thread(target=lambda: worker.receive(timeout_ms=None), daemon=True).start()
        time.sleep(0.3)
        print("main exits", flush=True)
    """)
    assert_clean_exit(result)



def test_a_daemon_thread_dropping_the_last_worker_with_a_receive_pool_does_not_abort_the_exit():
    # The worker keeps its receive pool's Python object. A receive() under way keeps the worker
    # after close(); its slice drops the last reference without the GIL. Once finalization has
    # begun, giving the pool's reference back must not wait for the GIL on that thread (nanobind's
    # own shared_ptr does: PyGILState_Ensure, then pthread_exit() through noexcept destructors).
    pytest.importorskip("holoscan_dlpack.ucx")
    result = run_python("""
        import threading, time
        import holoscan_dlpack as hd
        from holoscan_dlpack import ucx
        pool = hd.TensorPool(memory="host", block_bytes=64, block_count=1)
        worker = ucx.Worker(receive_pool=pool)
        del pool

        def wait():
            try:
                worker.receive(timeout_ms=None)
            except hd.errors.ClosedError:
                pass

        threading.Thread(target=wait, daemon=True).start()
        time.sleep(0.3)
        worker.close()  # the receive under way keeps the worker until its slice ends

        class SlowTeardown:  # finalization lasts beyond that slice (at most 100 ms)
            def __del__(self, sleep=time.sleep):
                sleep(0.5)

        slow = SlowTeardown()
        print("main exits", flush=True)
    """)
    assert_clean_exit(result)


def test_daemon_threads_raising_library_errors_do_not_abort_the_exit():
    # Each library failure becomes its holoscan_dlpack.errors exception inside the extension. Had
    # that run Python code, the thread could give the GIL away there, and a daemon thread taking
    # it back once finalization had begun was ended by CPython (pthread_exit()) with the
    # extension's C++ frames on its stack: SIGSEGV or SIGABRT at exit, about one run in two.
    source = """
        import threading, time
        import holoscan_dlpack as hd
        from holoscan_dlpack import ipc

        mine, theirs = ipc.Channel.pair()
        theirs.close()

        def fail_for_ever(call):
            while True:
                try:
                    call()
                except hd.HoloscanError:
                    pass

        for call in (lambda: ipc.Importer(theirs),  # ClosedError
                     lambda: hd.TensorPool(memory="elsewhere", block_bytes=1, block_count=1)):
            threading.Thread(target=fail_for_ever, args=(call,), daemon=True).start()
        time.sleep(0.2)

        class SlowTeardown:  # the daemon threads wait for the GIL while finalization runs
            def __del__(self, sleep=time.sleep):
                sleep(0.3)

        slow = SlowTeardown()
        print("main exits", flush=True)
    """
    for _ in range(6):
        assert_clean_exit(run_python(source))


def test_a_daemon_thread_importing_a_python_producer_does_not_abort_the_exit():
    # A producer's __dlpack__ and __dlpack_device__ are Python code that the import runs from the
    # extension's C++ frames; a daemon thread ended inside them at exit must not unwind those.
    source = """
        import threading, time
        import numpy as np
        import holoscan_dlpack as hd

        array = np.arange(4.0)

        class Producer:
            def __dlpack__(self, **keywords):
                total = 0
                for i in range(200):  # bytecode long enough to give the GIL away
                    total += i
                return array.__dlpack__(**keywords)

            def __dlpack_device__(self):
                return (1, 0)

        def import_for_ever():
            while True:
                hd.from_dlpack(Producer())

        threading.Thread(target=import_for_ever, daemon=True).start()
        time.sleep(0.2)

        class SlowTeardown:  # the daemon thread waits for the GIL while finalization runs
            def __del__(self, sleep=time.sleep):
                sleep(0.3)

        slow = SlowTeardown()
        print("main exits", flush=True)
    """
    for _ in range(6):
        assert_clean_exit(run_python(source))


def test_a_daemon_thread_reading_an_array_interface_property_does_not_abort_the_exit():
    # An array interface is often a property (Numba's device arrays, wrappers): Python code that
    # as_tensor runs from its C++ frames, as a producer's __dlpack__ is.
    source = """
        import threading, time
        import numpy as np
        import holoscan_dlpack as hd

        array = np.arange(4.0)

        class Exporter:
            @property
            def __array_interface__(self):
                total = 0
                for i in range(200):  # bytecode long enough to give the GIL away
                    total += i
                return array.__array_interface__

        def import_for_ever():
            while True:
                hd.as_tensor(Exporter())

        threading.Thread(target=import_for_ever, daemon=True).start()
        time.sleep(0.2)

        class SlowTeardown:  # the daemon thread waits for the GIL while finalization runs
            def __del__(self, sleep=time.sleep):
                sleep(0.3)

        slow = SlowTeardown()
        print("main exits", flush=True)
    """
    for _ in range(6):
        assert_clean_exit(run_python(source))


def test_a_daemon_thread_dropping_imports_of_a_finalized_producer_does_not_abort_the_exit():
    # The last owner of an import drops the producer object, whose finalizer is Python code run
    # from the library's (noexcept) release path: a thread ended there at exit must park.
    source = """
        import threading, time
        import numpy as np
        import holoscan_dlpack as hd

        array = np.arange(4.0)

        class Producer:
            def __dlpack__(self, **keywords):
                return array.__dlpack__(**keywords)

            def __dlpack_device__(self):
                return (1, 0)

            def __del__(self):
                total = 0
                for i in range(300):  # bytecode long enough to give the GIL away
                    total += i

        def import_and_drop_for_ever():
            while True:
                tensor = hd.from_dlpack(Producer())
                del tensor

        threading.Thread(target=import_and_drop_for_ever, daemon=True).start()
        time.sleep(0.2)

        class SlowTeardown:  # the daemon thread waits for the GIL while finalization runs
            def __del__(self, sleep=time.sleep):
                sleep(0.3)

        slow = SlowTeardown()
        print("main exits", flush=True)
    """
    for _ in range(6):
        assert_clean_exit(run_python(source))


def test_a_daemon_thread_importing_through_a_proxy_does_not_abort_the_exit():
    # as_tensor asks a proxy for the protocol's names: its __getattr__ is Python code run from
    # the extension's C++ frames.
    source = """
        import threading, time
        import numpy as np
        import holoscan_dlpack as hd

        class Proxy:
            def __init__(self, target):
                self._target = target

            def __getattr__(self, name):
                total = 0
                for i in range(200):  # bytecode long enough to give the GIL away
                    total += i
                return getattr(self._target, name)

        proxy = Proxy(np.arange(4.0))

        def import_for_ever():
            while True:
                hd.as_tensor(proxy)

        threading.Thread(target=import_for_ever, daemon=True).start()
        time.sleep(0.2)

        class SlowTeardown:  # the daemon thread waits for the GIL while finalization runs
            def __del__(self, sleep=time.sleep):
                sleep(0.3)

        slow = SlowTeardown()
        print("main exits", flush=True)
    """
    for _ in range(6):
        assert_clean_exit(run_python(source))

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


def assert_clean_exit_with_a_daemon_thread_calling(setup, call):
    # `call` runs Python code (`setup`'s, which gives the GIL away with time.sleep(0)) from the
    # extension's C++ frames, for ever, on a daemon thread; finalization lasts long enough for
    # that thread to wait for the GIL once it has begun.
    source = f"""
import threading, time
import numpy as np
import holoscan_dlpack as hd
{textwrap.dedent(setup)}
try:  # works (or refuses as the library does) before the thread starts
    {call}
except hd.HoloscanError:
    pass

def call_for_ever():
    while True:
        try:
            {call}
        except hd.HoloscanError:
            pass

threading.Thread(target=call_for_ever, daemon=True).start()
time.sleep(0.2)

class SlowTeardown:
    def __del__(self, sleep=time.sleep):
        sleep(0.3)

slow = SlowTeardown()
print("main exits", flush=True)
"""
    for _ in range(4):
        assert_clean_exit(run_python(source))


def test_a_daemon_thread_reading_an_integer_through_index_does_not_abort_the_exit():
    # nanobind reads an __index__ from its noexcept integer caster: an unwinding through it aborts.
    assert_clean_exit_with_a_daemon_thread_calling("""
        tensor = hd.as_tensor(np.arange(4.0))

        class Index:
            def __index__(self):
                time.sleep(0)
                return 1
        """, "tensor.__dlpack__(max_version=(1, 0), dl_device=(Index(), 0))")


def test_a_daemon_thread_reading_a_custom_sequence_does_not_abort_the_exit():
    assert_clean_exit_with_a_daemon_thread_calling("""
        tensor = hd.as_tensor(np.arange(4.0))

        class Pair:
            def __len__(self):
                time.sleep(0)
                return 2

            def __getitem__(self, index):
                time.sleep(0)
                return (1, 0)[index]
        """, "tensor.__dlpack__(max_version=(1, 0), dl_device=Pair())")


def test_a_daemon_thread_reading_a_shape_from_a_custom_sequence_does_not_abort_the_exit():
    assert_clean_exit_with_a_daemon_thread_calling("""
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
    assert_clean_exit_with_a_daemon_thread_calling("""
        import warnings
        warnings.simplefilter("always")

        def showwarning(*arguments, **keywords):
            time.sleep(0)

        warnings.showwarning = showwarning
        tensor = hd.as_tensor(np.arange(4.0))
        """, "tensor.read_only")


def test_a_daemon_thread_reading_a_dtype_property_does_not_abort_the_exit():
    assert_clean_exit_with_a_daemon_thread_calling("""
        pool = hd.TensorPool(memory="host", block_bytes=64, block_count=4)

        class DtypeLike:
            @property
            def str(self):
                time.sleep(0)
                return "<f4"
        """, "pool.allocate((2,), DtypeLike())")


def test_a_daemon_thread_describing_a_refused_argument_does_not_abort_the_exit():
    # The error's text is the argument's str(): Python code run from the extension's C++ frames.
    assert_clean_exit_with_a_daemon_thread_calling("""
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
    assert_clean_exit_with_a_daemon_thread_calling("""
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
