"""Checks shared by the endpoints of ipc and ucx: a blocking wait gives way to signals, and a
close() from another thread ends it with ClosedError."""

import signal
import threading
import time

import pytest

import holoscan_dlpack as hd


def assert_gives_way_to_signals(wait, close):
    """`wait()` (no time limit) ends with what a SIGALRM handler raises, within 5 s. Should the
    wait ignore the signal, `close()` ends it after 10 s with ClosedError instead."""

    class Alarm(Exception):
        pass

    def ring(signum, frame):
        raise Alarm()

    watchdog = threading.Timer(10, close)
    previous = signal.signal(signal.SIGALRM, ring)
    try:
        watchdog.start()
        start = time.monotonic()
        with pytest.raises(Alarm):
            # Armed inside the block: an alarm that rang before it would escape pytest.raises.
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            wait()
        assert time.monotonic() - start < 5
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        watchdog.cancel()


def assert_close_ends_a_wait(wait, close, message, patience_s=60):
    """`wait()` on another thread ends with ClosedError `message` once this one calls `close()`."""
    outcome = {}

    def waiting():
        try:
            outcome["got"] = wait()
        except hd.errors.HoloscanError as error:
            outcome["error"] = error

    thread = threading.Thread(target=waiting)
    thread.start()
    wait_until_polling(thread.native_id)  # inside the wait (else the close would come first)
    close()
    thread.join(timeout=patience_s)
    assert not thread.is_alive()
    assert str(outcome.get("error")) == message, outcome


def wait_until_polling(native_id, patience_s=10):
    """Returns True once thread `native_id` (threading.get_native_id()) sleeps in poll(),
    epoll_wait() or nanosleep(), as an endpoint's wait does once it holds the endpoint. A sleep instead would
    guess: a loaded machine may not have run the thread into its wait yet. Where the kernel shows
    no wait channel (no such file, or never one of these), it waits `patience_s` at most, or 0.3 s
    when the file is missing, and returns False."""
    deadline = time.monotonic() + patience_s
    channel = f"/proc/self/task/{native_id}/wchan"
    while time.monotonic() < deadline:
        try:
            with open(channel) as wchan:
                where = wchan.read()
                if "poll" in where or "nanosleep" in where:
                    return True
        except OSError:
            time.sleep(0.3)  # nothing to read the wait from: the old guess
            return False
        time.sleep(0.005)
    return False
