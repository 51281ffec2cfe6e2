"""Review (round ten): a daemon thread inside one of the package's waits without the GIL when the
interpreter exits. CPython (3.11-3.13) ends such a thread with pthread_exit() when it tries to take
the GIL back; glibc unwinds its stack by force, and the unwinding reaches nanobind's
gil_scoped_release destructor (noexcept, as every destructor) in the package's waits
(SharedHandle::call_without_gil, python/src/endpoint.hpp): std::terminate, SIGABRT, and the
process dies with status 134 after main() returned normally, without running the C atexit handlers
(the library's exit drain among them)."""

import os

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
