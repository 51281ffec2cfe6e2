"""holoscan_dlpack.ucx: the UCX Worker from Python. Over TCP on the loopback, as the C++ UCX tests
run: NumPy tensors between two workers of one process and between two processes (spawned with
multiprocessing), every value checked; refusals with their exact class and message; the window
(BackpressuredError), a receiver and a sender killed with SIGKILL; waits that let go of the GIL
and give way to signals. On a GPU (skipped with the reason elsewhere): torch and CuPy tensors
written by slow kernels reach a receiver process's device pool over UCX's CUDA transports."""

import contextlib
import gc
import multiprocessing
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import holoscan_dlpack as hd
from conftest import ClosesOnIndex, cuda_cupy, cuda_torch, documented_example, run_python

ucx = pytest.importorskip("holoscan_dlpack.ucx")

import ucx_peers  # noqa: E402 -- imports holoscan_dlpack.ucx too
from ucx_peers import drain_sends  # noqa: E402
from gpu_writers import CupyWriter, TorchWriter  # noqa: E402
from waits import (  # noqa: E402
    assert_close_ends_a_wait,
    assert_gives_way_to_signals,
    wait_until_polling,
)

SPAWN = multiprocessing.get_context("spawn")
PATIENCE_MS = 60000
SPIN_CYCLES = 40_000_000  # a GPU writer's spin: about 20 ms on an H200, far longer than a send


def report(reports, timeout=60):
    """The next report of a child process; its failure, if it reported one, fails the test."""
    item = reports.get(timeout=timeout)
    assert item[0] != "error", f"the child failed: {item[1]}: {item[2]}"
    return item


class Pump:
    """Progresses workers on a thread of its own (Hellos and Acks go out) until stopped."""

    def __init__(self, *workers):
        self.workers, self.stop = list(workers), threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            for worker in self.workers:
                with contextlib.suppress(hd.errors.ClosedError):  # a test closed it
                    worker.progress()
            time.sleep(0.0005)

    def join(self):
        self.stop.set()
        self.thread.join()


@contextlib.contextmanager
def connected(window=16, stream_bandwidth_hint=True, **server_config):
    """(client, its peer id, server, its peer id): two workers of this process, connected over
    the loopback, progressed by a Pump while the test runs; `stream_bandwidth_hint` is both's."""
    with ucx.Worker(stream_bandwidth_hint=stream_bandwidth_hint, **server_config) as server, \
            ucx.Worker(window=window, stream_bandwidth_hint=stream_bandwidth_hint) as client:
        port = server.listen("127.0.0.1")
        pump = Pump(server)
        try:
            # The client is pumped only once connected: connect() sleeps on the worker's event
            # descriptor for its whole timeout, and a progress() on another thread can take the
            # event that would wake it (then it returns only when the timeout ends).
            client_peer = client.connect("127.0.0.1", port, timeout_ms=PATIENCE_MS)
            server_peer = server.accept(timeout_ms=PATIENCE_MS)
            assert server_peer is not None
            pump.workers.append(client)
            yield client, client_peer, server, server_peer
            client.close()  # while the server is pumped: the orderly leave needs its answer
            server.close()
        finally:
            pump.join()


@pytest.fixture
def pair():
    with connected() as workers:
        yield workers


@contextlib.contextmanager
def refusing_port():
    """A loopback port bound and never listened on while the block runs: a connect to it is
    refused, and no listener of a test running beside this one can be given it meanwhile."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        yield probe.getsockname()[1]


# ---- the module --------------------------------------------------------------------------------

def test_the_package_imports_ucx_on_first_use():
    done = run_python("""
        import sys
        import holoscan_dlpack as hd
        assert "holoscan_dlpack.ucx" not in sys.modules
        assert hd.ucx.Worker is hd._core.ucx.Worker and "ucx" in vars(hd)
        from holoscan_dlpack import ucx
        assert ucx is hd.ucx
    """)
    assert done.returncode == 0, done.stderr


def test_the_tests_load_the_ucx_the_package_was_built_with():
    module_dir = os.environ.get("UCX_MODULE_DIR")
    if module_dir is None:
        pytest.skip("UCX_MODULE_DIR is not set (no .deps/ucx in this checkout)")
    assert os.path.realpath(module_dir) == os.path.realpath(
        os.path.join(ucx.UCX_LIBRARY_DIR, "ucx"))


def test_importing_the_package_leaves_sighup_to_the_process():
    # Loading UCX installs its debug handler for SIGHUP; the process must still end on one.
    done = run_python("""
        import os, signal, time
        # A parent that ignores SIGHUP (nohup) passes that on: start from the default action.
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        import holoscan_dlpack
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(5)
        print("survived SIGHUP")
    """)
    assert done.returncode == -signal.SIGHUP, done.stdout + done.stderr


def test_refusals_name_their_class_and_message():
    def refused(error, message, call):
        with pytest.raises(error) as raised:
            call()
        assert str(raised.value) == message

    refused(hd.errors.InvalidArgumentError,
            "kInvalidArgument: ucx worker: window must be at least 1", lambda: ucx.Worker(window=0))
    refused(hd.errors.InvalidArgumentError,
            "kInvalidArgument: ucx worker: max_waiting_per_peer must be at least 1",
            lambda: ucx.Worker(max_waiting_per_peer=0))
    with ucx.Worker() as worker:
        worker.listen("127.0.0.1")
        refused(hd.errors.DuplicateNameError,
                "kDuplicateName: ucx listen on 127.0.0.1:0: this worker already listens",
                lambda: worker.listen("127.0.0.1"))
        refused(hd.errors.NotFoundError, "kNotFound: ucx send: no peer 42",
                lambda: worker.send(42, np.arange(3)))
        refused(hd.errors.NotFoundError, "kNotFound: ucx disconnect: no peer 42",
                lambda: worker.disconnect(42))
        assert worker.accept(timeout_ms=0) is None and worker.receive(timeout_ms=0) is None
        assert worker.next_send_result() is None and worker.in_flight() == 0
    with ucx.Worker() as worker:
        with pytest.raises(hd.errors.InvalidArgumentError, match="^kInvalidArgument: ucx listen "
                           "on 999.1.1.1:0: cannot resolve"):
            worker.listen("999.1.1.1")
        with refusing_port() as port:
            refused(hd.errors.ClosedError,
                    f"kClosed: ucx connect to 127.0.0.1:{port}: the connection failed",
                    lambda: worker.connect("127.0.0.1", port, timeout_ms=PATIENCE_MS))
        # connect() said so: receive() knows of no peer the caller was never given.
        assert worker.receive(timeout_ms=50) is None


def test_an_address_holding_a_nul_character_is_refused():
    # The resolver reads up to the NUL: the worker listened on (or would connect to) a host other
    # than the one named, which a caller that checked the whole name never meant.
    with ucx.Worker() as server, ucx.Worker() as client:
        port = server.listen("127.0.0.1")
        with pytest.raises(hd.errors.InvalidArgumentError) as raised:
            client.connect("127.0.0.1\0.example", port, timeout_ms=PATIENCE_MS)
        assert str(raised.value) == ("kInvalidArgument: ucx connect to "
                                     f"127.0.0.1\\0.example:{port}: the address holds a NUL "
                                     "character")
        assert server.accept(timeout_ms=0) is None
    with ucx.Worker() as worker:
        with pytest.raises(hd.errors.InvalidArgumentError, match="holds a NUL character$"):
            worker.listen("127.0.0.1\0.example")
        assert worker.listen("127.0.0.1") > 0, "the refusal left the worker without a listener"


def test_a_connect_without_a_time_limit_is_refused():
    # connect() is one wait without the GIL that no signal ends: a negative timeout would be a
    # wait that nothing but the listener ends (before, it waited until the listener progressed).
    with ucx.Worker() as server, ucx.Worker() as client:
        port = server.listen("127.0.0.1")
        pumps = []  # the listener answers only once a Pump starts, after 2 s
        answer = threading.Timer(2.0, lambda: pumps.append(Pump(server)))
        answer.start()
        try:
            with pytest.raises(hd.errors.InvalidArgumentError) as raised:
                client.connect("127.0.0.1", port, timeout_ms=-1)
        finally:
            answer.cancel()
            answer.join()
            for pump in pumps:
                pump.join()
        assert str(raised.value) == ("kInvalidArgument: ucx.Worker.connect: timeout_ms must be 0 "
                                     "or more, not -1 (the Hello is a wait that no signal "
                                     "interrupts)")
        assert not client.connected(1), "nothing was started"


# ---- two workers of one process ------------------------------------------------------------------

ARRAYS = [
    np.arange(12, dtype=np.int32).reshape(3, 4),
    np.linspace(-1.0, 1.0, 7),
    np.arange(24, dtype=np.uint8).reshape(2, 3, 4),
    np.zeros((0, 3), dtype=np.float32),
    np.array(2.5, dtype=np.float16),
]


def test_tensors_cross_with_their_values_and_every_send_ends_once(pair):
    client, peer, server, server_peer = pair
    pool = hd.TensorPool(memory="host", block_bytes=64, block_count=1)
    block = pool.allocate((4,), "int64")
    np.from_dlpack(block)[:] = [7, 8, 9, 10]
    sequences = [client.send(peer, a) for a in ARRAYS] + [client.send(peer, block)]
    assert sequences == list(range(1, len(ARRAYS) + 2)), "sequence numbers count per peer"
    for sequence, expected in zip(sequences, ARRAYS + [np.array([7, 8, 9, 10])]):
        got = server.receive(timeout_ms=PATIENCE_MS)
        assert (got.peer, got.sequence) == (server_peer, sequence)
        assert not got.tensor.is_read_only and got.tensor.is_contiguous()
        received = np.from_dlpack(got.tensor)
        assert received.dtype == expected.dtype and received.shape == expected.shape
        np.testing.assert_array_equal(received, expected)
        assert received.flags.writeable, "the receiver owns the memory"
    results = drain_sends(client, len(sequences))
    assert [(r.peer, r.sequence, r.delivered, r.error) for r in results] == \
        [(peer, s, True, None) for s in sequences]
    assert client.next_send_result() is None and client.in_flight() == 0
    stats = client.stats()
    assert (stats.sent, stats.delivered, stats.failed) == (len(sequences), len(sequences), 0)
    assert server.stats().received == len(sequences) and server.stats().peers_accepted == 1
    assert server.stats().landings_kept == 0, "no landing failed: every block comes back"
    assert stats.sends_kept == 0, "no send failed: every block comes back"
    del block
    hd.flush_deferred_releases()
    assert pool.available_blocks() == 1, "the worker let go of the block once UCX was done"


def test_a_collected_cycle_through_a_received_tensor_leaves_the_arrival_whole(pair):
    # `Received.tensor` is a view of the arrival's own Tensor, not a Tensor of its own: the
    # collector's clear of the view emptied the arrival's tensor while it was still held.
    client, peer, server, _ = pair
    client.send(peer, np.arange(4.0))
    got = server.receive(timeout_ms=PATIENCE_MS)
    gc.disable()  # the view must be cleared by the collection below, not by refcounting
    try:
        cycle = [got.tensor]
        cycle.append(cycle)
        del cycle
        gc.collect()
    finally:
        gc.enable()
    assert got.tensor.shape == (4,)
    np.testing.assert_array_equal(np.from_dlpack(got.tensor), np.arange(4.0))


def test_a_strided_tensor_is_refused(pair):
    client, peer, _, _ = pair
    with pytest.raises(hd.errors.HoloscanNotImplementedError) as raised:
        client.send(peer, np.arange(12).reshape(3, 4)[:, ::2])
    assert str(raised.value) == ("kNotImplemented: ucx send: the tensor is not contiguous "
                                 "(row-major, compact); copy it first")
    assert client.in_flight() == 0 and client.stats().sent == 0


def test_arrivals_land_in_the_receive_pool():
    pool = hd.TensorPool(memory="host", block_bytes=256, block_count=2)
    with connected(receive_pool=pool) as (client, peer, server, _):
        for i in range(3):
            client.send(peer, np.full(8, i, dtype=np.float64))
        first = server.receive(timeout_ms=PATIENCE_MS)
        second = server.receive(timeout_ms=PATIENCE_MS)
        assert pool.available_blocks() == 0 and pool.reuse_count == 0
        assert first.tensor.data != second.tensor.data
        del first  # its block is free again: the third arrival takes it
        hd.flush_deferred_releases()
        third = server.receive(timeout_ms=PATIENCE_MS)
        assert np.from_dlpack(third.tensor).tolist() == [2.0] * 8
        assert np.from_dlpack(second.tensor).tolist() == [1.0] * 8
        assert pool.reuse_count == 1
        assert [r.delivered for r in drain_sends(client, 3)] == [True] * 3


def test_tensors_past_the_receivers_bound_are_refused_as_backpressure():
    # The sender's window (6) is wider than the receiver's bound (2), and the receiver takes
    # nothing until all four came: the two past the bound are refused at once.
    with connected(window=6, max_waiting_per_peer=2) as (client, peer, server, server_peer):
        for i in range(4):
            client.send(peer, np.full(4, i, dtype=np.int32))
        refused = drain_sends(client, 2)
        assert [(r.sequence, r.delivered) for r in refused] == [(3, False), (4, False)]
        for result in refused:
            assert isinstance(result.error, hd.errors.BackpressuredError), result.error
            assert "(WorkerConfig::max_waiting_per_peer)" in str(result.error)
        for sequence in (1, 2):
            got = server.receive(timeout_ms=PATIENCE_MS)
            assert (got.peer, got.sequence) == (server_peer, sequence)
            assert np.from_dlpack(got.tensor).tolist() == [sequence - 1] * 4
        for sequence in (3, 4):
            with pytest.raises(hd.errors.BackpressuredError, match=f"tensor {sequence} refused$"):
                server.receive(timeout_ms=PATIENCE_MS)
        assert [(r.sequence, r.delivered) for r in drain_sends(client, 2)] == [(1, True), (2, True)]
        client.send(peer, np.arange(3))  # the connection still carries tensors
        assert np.from_dlpack(server.receive(timeout_ms=PATIENCE_MS).tensor).tolist() == [0, 1, 2]


def test_the_stream_bandwidth_hint_is_on_unless_turned_off():
    # The worker reports no config back: both signatures are written from WorkerConfig{}'s
    # defaults, as the keyword defaults are, so the text says what the C++ default is.
    for function in (ucx.Worker.create, ucx.Worker.__init__):
        (signature, _, _), = function.__nb_signature__
        assert ("window: int = 16, " in signature and "spin_us: int = 1000, " in signature
                and "stream_bandwidth_hint: bool = True)" in signature), signature
    for make in (ucx.Worker, ucx.Worker.create):
        with make(stream_bandwidth_hint=False) as worker:
            assert not worker.closed
    for wrong, type_name in ((0, "int"), ("no", "str"), (None, "NoneType")):
        for make in (ucx.Worker, ucx.Worker.create):  # a bool only: "no" is not quietly true
            with pytest.raises(TypeError) as raised:
                make(stream_bandwidth_hint=wrong)
            assert str(raised.value) == (
                f"stream_bandwidth_hint must be True or False, not {type_name}")


def test_a_stream_without_the_bandwidth_hint_crosses_intact():
    # Sent back to back, 256 KiB tensors stay in UCX for a while: the sends after the first are
    # posted while earlier ones still move, those the hint would mark (here without it).
    arrays = [np.arange(i, i + (1 << 16), dtype=np.int32) for i in range(4)] + ARRAYS
    with connected(stream_bandwidth_hint=False) as (client, peer, server, server_peer):
        sequences = [client.send(peer, a) for a in arrays]
        for sequence, expected in zip(sequences, arrays):
            got = server.receive(timeout_ms=PATIENCE_MS)
            assert (got.peer, got.sequence) == (server_peer, sequence)
            received = np.from_dlpack(got.tensor)
            assert received.dtype == expected.dtype and received.shape == expected.shape
            np.testing.assert_array_equal(received, expected)
        assert [(r.sequence, r.delivered, r.error) for r in drain_sends(client, len(arrays))] == \
            [(s, True, None) for s in sequences]
        assert client.stats().delivered == len(arrays) and server.stats().received == len(arrays)


def test_receive_waits_without_the_gil(pair):
    client, peer, server, _ = pair
    sender = threading.Timer(0.05, lambda: client.send(peer, np.arange(3)))
    sender.start()
    got = server.receive(timeout_ms=PATIENCE_MS)
    sender.join()
    assert got is not None, "the sending thread never ran"
    assert np.from_dlpack(got.tensor).tolist() == [0, 1, 2]


def test_receive_gives_way_to_signals(pair):
    _, _, server, _ = pair
    assert_gives_way_to_signals(server.receive, server.close)  # receive(): no limit


def test_close_from_another_thread_ends_a_receive(pair):
    _, _, server, _ = pair
    assert_close_ends_a_wait(lambda: server.receive(timeout_ms=PATIENCE_MS), server.close,
                             "kClosed: ucx.Worker: closed")


def test_close_from_another_thread_stops_the_worker_at_once(pair):
    # A receive() under way kept a closed worker serving for the rest of its 100 ms slice: a
    # tensor sent after close() returned was handed out to it, and confirmed to its sender.
    client, peer, server, _ = pair
    outcome = {}

    def waiting():
        try:
            outcome["got"] = server.receive(timeout_ms=None)
        except hd.errors.HoloscanError as error:
            outcome["error"] = str(error)

    thread = threading.Thread(target=waiting)
    thread.start()
    time.sleep(0.05)
    server.close()
    try:
        sequence = client.send(peer, np.arange(3))
    except hd.errors.ClosedError:
        sequence = None  # the client already saw the connection end: refused at once
    thread.join(timeout=PATIENCE_MS / 1000)
    assert not thread.is_alive()
    assert outcome == {"error": "kClosed: ucx.Worker: closed"}
    if sequence is not None:
        [result] = drain_sends(client, 1)
        assert (result.sequence, result.delivered) == (sequence, False)
        assert isinstance(result.error, hd.errors.ClosedError), result.error


@contextlib.contextmanager
def other_threads_keep_running():
    """Runs a counter on a thread of its own during the block (and 50 ms after it); asserts that
    it never stood still for half a second, as it would behind a thread that holds the GIL."""
    ticks, counting = [], threading.Event()

    def count():
        while counting.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    counting.set()
    counter = threading.Thread(target=count)
    counter.start()
    try:
        time.sleep(0.01)  # counting by now
        start = time.monotonic()
        yield
        time.sleep(0.05)  # a tick after the block
    finally:
        counting.clear()
        counter.join()
    gaps = [b - a for a, b in zip(ticks, ticks[1:]) if b > start]
    assert gaps and max(gaps) < 0.5, f"another thread stood still for {max(gaps):.2f} s"


def close_during(wait, worker):
    """Calls `wait()` on a thread, then `worker.close()` on this one. Asserts that close() returned
    at once and that other threads kept running (from the close until `wait` ended: the worker is
    destroyed there, as its last user); returns the error that `wait` raised (None if it
    returned) and how long after the close it ended."""
    outcome = {}

    def waiting():
        try:
            wait()
        except hd.errors.HoloscanError as error:
            outcome["error"] = error
        outcome["ended"] = time.monotonic()

    waiter = threading.Thread(target=waiting)
    waiter.start()
    try:
        wait_until_polling(waiter.native_id)
        with other_threads_keep_running():
            closing = time.monotonic()
            worker.close()
            closed = time.monotonic()
            waiter.join(timeout=30)
            assert not waiter.is_alive(), "the wait did not end after close()"
    finally:
        worker.close()
    assert closed - closing < 0.5, "close() waited for the other thread"
    return outcome.get("error"), outcome["ended"] - closing


def connect_unanswered(listening, connecting):
    """Connects `connecting` to `listening` (pumped meanwhile). Nothing progresses either worker
    afterwards, so neither answers the other's orderly leave: a close flushes for a second."""
    port = listening.listen("127.0.0.1")
    pump = Pump(listening)
    try:
        connecting.connect("127.0.0.1", port, timeout_ms=PATIENCE_MS)
        assert listening.accept(timeout_ms=PATIENCE_MS) is not None
    finally:
        pump.join()


@pytest.mark.parametrize("wait", ["receive", "accept"])
def test_a_close_during_a_wait_never_stalls_other_threads(wait):
    # Against a peer that makes no progress, the worker's orderly leave flushes for a whole second,
    # in the thread of the wait that let go of it last: that must happen without the GIL.
    with ucx.Worker() as idle:
        listener = ucx.Worker()
        connect_unanswered(listener, idle)
        error, ended = close_during(lambda: getattr(listener, wait)(timeout_ms=PATIENCE_MS),
                                    listener)
        assert str(error) == "kClosed: ucx.Worker: closed"
        assert ended < 10, "the wait noticed the close within a slice (plus the leave's flush)"


@pytest.mark.parametrize("wait", ["receive", "accept"])
def test_a_close_between_two_slices_of_a_wait_still_leaves_the_flush_to_the_wait(wait):
    # A signal handler runs between two slices of the wait (on the main thread, which waits).
    # When each slice took its own reference to the worker, a close() there was the worker's
    # last user and sat through its orderly leave's second-long flush itself; the wait now holds
    # the worker from its start to its end, so that close() only stops it, and the wait's end
    # flushes, without the GIL.
    with ucx.Worker() as idle:
        listener = ucx.Worker()
        connect_unanswered(listener, idle)
        closes = []

        def close_in_handler(signum, frame):
            started = time.monotonic()
            listener.close()
            closes.append((started, time.monotonic()))

        def signal_once_waiting(waiter):
            wait_until_polling(waiter)
            os.kill(os.getpid(), signal.SIGUSR1)

        previous = signal.signal(signal.SIGUSR1, close_in_handler)
        signaller = threading.Thread(target=signal_once_waiting, args=(threading.get_native_id(),))
        try:
            with other_threads_keep_running():
                signaller.start()
                with pytest.raises(hd.errors.ClosedError, match="^kClosed: ucx.Worker: closed$"):
                    getattr(listener, wait)(timeout_ms=PATIENCE_MS)
                ended = time.monotonic()
        finally:
            signaller.join()
            signal.signal(signal.SIGUSR1, previous)
            listener.close()
        [(started, closed)] = closes
        took = closed - started
        assert took < 0.5, f"close() took {took:.2f} s: it flushed the worker"
        assert ended - closed > 0.8, "the wait's end made no flush: the test no longer tests it"


def test_a_close_during_a_connect_ends_it_and_never_stalls_other_threads():
    # The close ends the connect() under way (the listener never answers); the worker then goes
    # with the connection it tried, flushing for a second without the GIL. Before close() stopped
    # the worker, the connect() ran on to its timeout.
    with ucx.Worker() as silent:
        port = silent.listen("127.0.0.1")
        client = ucx.Worker()
        error, ended = close_during(
            lambda: client.connect("127.0.0.1", port, timeout_ms=PATIENCE_MS), client)
        assert str(error) == "kClosed: ucx.Worker: closed"
        assert ended < PATIENCE_MS / 2000, "the connect ran on towards its timeout"


def test_a_worker_dropped_without_close_never_stalls_other_threads():
    # The last reference going (a function's local, a collected cycle) destroys the worker in
    # tp_dealloc: its leave to a peer that never answers flushes for a second, which held the GIL.
    with ucx.Worker() as idle:
        dropped = ucx.Worker()
        connect_unanswered(idle, dropped)
        with other_threads_keep_running():
            del dropped


def test_a_closed_worker_refuses_use():
    with ucx.Worker() as worker:
        assert worker.fileno() >= 0 and worker.fd == worker.fileno() and not worker.closed
    assert worker.closed and worker.fileno() == -1
    for call in (lambda: worker.listen(), lambda: worker.send(1, np.arange(2)),
                 lambda: worker.receive(timeout_ms=0), worker.progress, worker.next_send_result,
                 worker.stats, worker.arm):
        with pytest.raises(hd.errors.ClosedError) as raised:
            call()
        assert str(raised.value) == "kClosed: ucx.Worker: closed"
    worker.close()  # twice is fine


def test_a_forked_childs_copy_refuses_use_and_leaves_the_parents_connection_whole(pair):
    # UCX does not survive fork(): the child closing its copies (or exiting, which does the same)
    # took the parent's connection apart before, and UCX aborted the parent at its close.
    client, peer, server, _ = pair
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # a fork with the Pump's thread
        pid = os.fork()
    if pid == 0:
        failures = 0
        signal.alarm(20)  # a call that never returns ends the child, which the parent reports
        try:
            # accept(None) asked its copy again for ever (a forked copy has nobody to give and no
            # error to say so), at a whole core; it says NotSupportedError as the others do.
            refusals = ((lambda: client.send(peer, np.arange(4.0)),
                         "kNotSupported: ucx send: this worker is a forked child's copy"),
                        (lambda: server.accept(None),
                         "kNotSupported: ucx progress: this worker is a forked child's copy"),
                        (ucx.Worker, "forked while its parent had a UCX worker"))
            # The queries answered as an idle worker would (nobody connected, nothing in
            # flight), which Python code could not tell apart; they refuse as the calls do.
            refusals += tuple(
                (query, "kNotSupported: ucx.Worker.%s: this worker is a forked child's copy" % name)
                for name, query in (("connected", lambda: client.connected(peer)),
                                    ("in_flight", client.in_flight),
                                    ("waiting", client.waiting),
                                    ("stats", client.stats),
                                    ("next_send_result", client.next_send_result),
                                    ("arm", client.arm)))
            for call, expected in refusals:
                try:
                    call()
                    failures += 1
                except hd.errors.NotSupportedError as error:
                    failures += expected not in str(error)
            client.close()
            server.close()
        except BaseException:  # noqa: BLE001 -- any escape is a failure the parent reports
            failures += 100
        os._exit(failures)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child's copy did not refuse as expected"
    client.send(peer, np.arange(4.0))
    got = server.receive(timeout_ms=PATIENCE_MS)
    assert got is not None, "the parent's connection lost a tensor after the child's close"
    np.testing.assert_array_equal(np.from_dlpack(got.tensor), np.arange(4.0))


def test_fileno_works_with_selectors():
    with ucx.Worker() as server, ucx.Worker() as client:
        port = server.listen("127.0.0.1")
        pump = Pump(server)
        peer = client.connect("127.0.0.1", port, timeout_ms=PATIENCE_MS)
        assert server.accept(timeout_ms=PATIENCE_MS) is not None
        pump.join()
        with selectors.DefaultSelector() as selector:
            selector.register(server.fileno(), selectors.EVENT_READ)
            deadline, got, ready = time.monotonic() + PATIENCE_MS / 1000, None, []
            while not server.arm():  # what is pending first: then it is safe to sleep on fileno()
                server.progress()
            # Armed before the tensor leaves: only the descriptor can tell the server it came.
            client.send(peer, np.arange(5))
            while not ready and time.monotonic() < deadline:
                client.progress()
                ready = selector.select(timeout=0.05)
            assert ready, "fileno() never became readable for the arriving tensor"
            while got is None and time.monotonic() < deadline:
                server.progress()
                got = server.receive(timeout_ms=0)
        assert got is not None and np.from_dlpack(got.tensor).tolist() == [0, 1, 2, 3, 4]


# ---- two processes -----------------------------------------------------------------------------

def start(target, *args):
    """A spawned ucx_peers function that listens; (the child, its reports, its port)."""
    reports = SPAWN.Queue()
    child = SPAWN.Process(target=target, args=(reports, *args))
    child.start()
    _, port = report(reports)
    return child, reports, port


def finish(child, timeout=60):
    child.join(timeout=timeout)
    if child.is_alive():
        child.kill()
        child.join()


def test_tensors_go_to_another_process_and_come_back():
    child, reports, port = start(ucx_peers.echo, len(ARRAYS))
    try:
        with ucx.Worker() as worker:
            peer = worker.connect("127.0.0.1", port, timeout_ms=PATIENCE_MS)
            for a in ARRAYS:
                worker.send(peer, a)
            for i, a in enumerate(ARRAYS):
                got = worker.receive(timeout_ms=PATIENCE_MS)
                assert (got.peer, got.sequence) == (peer, i + 1)
                np.testing.assert_array_equal(np.from_dlpack(got.tensor), a + 1)
            assert [r.delivered for r in drain_sends(worker, len(ARRAYS))] == [True] * len(ARRAYS)
            _, results, received = report(reports)
            assert results == [(i + 1, True) for i in range(len(ARRAYS))]
            assert received == len(ARRAYS)
    finally:
        finish(child)
    assert child.exitcode == 0


@contextlib.contextmanager
def holding_receiver(window):
    """(this process's worker, its peer, the child, its reports, the child's inbox): a spawned
    ucx_peers.hold_then_receive, which takes nothing until told, connected to a worker here."""
    inbox, outbox = SPAWN.Pipe(duplex=False)
    child, reports, port = start(ucx_peers.hold_then_receive, inbox)
    try:
        with ucx.Worker(window=window) as worker:
            peer = worker.connect("127.0.0.1", port, timeout_ms=PATIENCE_MS)
            assert report(reports) == ("holding", child.pid)
            yield worker, peer, child, reports, outbox
    finally:
        finish(child)


def test_a_full_window_is_backpressure_until_the_receiver_takes_its_tensors():
    with holding_receiver(window=2) as (worker, peer, child, reports, outbox):
        worker.send(peer, np.arange(3))
        worker.send(peer, np.arange(3) + 10)
        for _ in range(20):  # UCX has long written them: only the receiver's receive() counts
            worker.progress()
            time.sleep(0.005)
        with pytest.raises(hd.errors.BackpressuredError) as raised:
            worker.send(peer, np.arange(3) + 20)
        assert str(raised.value) == ("kBackpressured: ucx send: 2 tensors in flight to "
                                     f"peer {peer} (the window)")
        assert raised.value.code == hd.errors.ErrorCode.BACKPRESSURED
        assert worker.in_flight(peer) == 2 and worker.next_send_result() is None
        outbox.send(("receive", 2))
        assert report(reports) == ("received", [(1, [0, 1, 2]), (2, [10, 11, 12])])
        assert [r.sequence for r in drain_sends(worker, 2) if r.delivered] == [1, 2]
        assert worker.send(peer, np.arange(3) + 20) == 3, "the window has room again"
        outbox.send(("receive", 1))
        assert report(reports) == ("received", [(3, [20, 21, 22])])
        assert drain_sends(worker, 1)[0].delivered
        outbox.send("exit")
    assert child.exitcode == 0


def test_a_killed_receiver_ends_every_send_once_as_closed():
    with holding_receiver(window=3) as (worker, peer, child, _, _):
        sequences = [worker.send(peer, np.arange(100) + i) for i in range(3)]
        with pytest.raises(hd.errors.BackpressuredError):
            worker.send(peer, np.arange(100))
        os.kill(child.pid, signal.SIGKILL)
        results = drain_sends(worker, 3)
        assert sorted(r.sequence for r in results) == sequences, "each send ended once"
        for result in results:
            assert not result.delivered and isinstance(result.error, hd.errors.ClosedError)
            assert result.error.code == hd.errors.ErrorCode.CLOSED
        assert worker.next_send_result() is None and worker.in_flight() == 0
        assert not worker.connected(peer)
        with pytest.raises(hd.errors.ClosedError):
            worker.send(peer, np.arange(3))
        stats = worker.stats()
        assert (stats.sent, stats.delivered, stats.failed, stats.peers_lost) == (3, 0, 3, 1)
    assert child.exitcode == -signal.SIGKILL


def test_a_killed_sender_is_reported_once_after_what_it_delivered():
    inbox, outbox = SPAWN.Pipe(duplex=False)
    reports = SPAWN.Queue()
    with ucx.Worker() as worker:
        port = worker.listen("127.0.0.1")
        child = SPAWN.Process(target=ucx_peers.send_then_die, args=(reports, port, 3, inbox))
        child.start()
        try:
            peer = worker.accept(timeout_ms=PATIENCE_MS)
            for i in range(3):  # each receive() progresses: the child's Hello is answered
                got = worker.receive(timeout_ms=PATIENCE_MS)
                assert got.peer == peer and np.from_dlpack(got.tensor).tolist() == \
                    [i, i + 1, i + 2, i + 3]
            assert report(reports) == ("sent", 3)
            outbox.send("die")
            with pytest.raises(hd.errors.ClosedError, match=rf"^kClosed: ucx: peer {peer} .* is "
                               "gone"):
                worker.receive(timeout_ms=PATIENCE_MS)
            assert worker.receive(timeout_ms=200) is None, "the loss is reported once"
            assert not worker.connected(peer) and worker.stats().peers_lost == 1
        finally:
            finish(child)
    assert child.exitcode == -signal.SIGKILL


def test_the_documented_example_runs_as_written(tmp_path):
    script = tmp_path / "across_hosts.py"
    script.write_text(documented_example("## Across hosts"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.endswith("tensors checked in the receiver\n"), done.stdout


# ---- device tensors (GPU) ----------------------------------------------------------------------

@pytest.mark.parametrize("transports", ["tcp,cuda_copy", "cuda_ipc,cuda_copy,tcp"])
@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_slowly_written_device_tensors_reach_a_receivers_device_pool(monkeypatch, framework,
                                                                     transports):
    cuda_torch() if framework == "torch" else cuda_cupy()
    monkeypatch.setenv("UCX_TLS", transports)  # this worker's and the spawned receiver's
    count = 12
    writer = (TorchWriter if framework == "torch" else CupyWriter)(ucx_peers.GPU_ROWS,
                                                                   SPIN_CYCLES)
    inbox, outbox = SPAWN.Pipe(duplex=False)
    child, reports, port = start(ucx_peers.receive_on_the_gpu, framework, count, inbox)
    try:
        with ucx.Worker() as worker:
            peer = worker.connect("127.0.0.1", port, timeout_ms=PATIENCE_MS)
            early = 0  # sends made while the write was still running
            for i in range(count):
                target = writer.new()
                writer.write(target, i)
                with writer.current():  # the import's readiness: the writer's stream, now
                    worker.send(peer, target)
                early += writer.busy()
                del target  # the worker holds it until UCX is done with it
                worker.progress()
            results = drain_sends(worker, count)
            _, wrong, received = report(reports, timeout=120)
            outbox.send("exit")
            assert [r.sequence for r in results if r.delivered] == list(range(1, count + 1))
    finally:
        finish(child)
    assert child.exitcode == 0
    assert received == count
    assert early == count, "a write finished before its send: no race to see"
    assert wrong == 0, "data left before the producer's kernel finished"


class Index:
    """An integer only through __index__, as NumPy's integers are."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


# The Worker's integers were read by nanobind's casters: a negative window, port or peer, or one
# past its C type, raised "incompatible function arguments", naming none of them, and True was 1.
@pytest.mark.parametrize("arguments, says", [
    ({"window": -1}, "window must be 1 to 2**64-1, not -1"),
    ({"window": 2**64}, "window must be 1 to 2**64-1, not 18446744073709551616"),
    ({"max_receive_bytes": -5}, "max_receive_bytes must be 0 to 2**64-1, not -5"),
    ({"max_waiting_per_peer": -1}, "max_waiting_per_peer must be 1 to 2**64-1, not -1"),
    ({"spin_us": 2**31}, "spin_us must be a 32-bit integer, not 2147483648"),
])
def test_worker_integers_out_of_range_name_the_argument(arguments, says):
    for make in (ucx.Worker, ucx.Worker.create):
        with pytest.raises(hd.errors.InvalidArgumentError) as raised:
            make(**arguments)
        assert str(raised.value) == "kInvalidArgument: ucx.Worker: " + says


@pytest.mark.parametrize("name", ["window", "max_receive_bytes", "max_waiting_per_peer",
                                  "spin_us"])
def test_worker_integers_are_no_bools_or_text(name):
    for value, type_name in ((True, "bool"), ("8", "str")):
        with pytest.raises(TypeError) as raised:
            ucx.Worker(**{name: value})
        assert str(raised.value) == f"{name} must be an integer, not {type_name}"


def test_worker_call_integers_out_of_range_name_the_call_and_argument():
    peer_range = "peer must be a peer id, 0 to 2**64-1"
    with ucx.Worker() as worker:
        cases = [
            (lambda: worker.listen("127.0.0.1", 65536),
             "ucx.Worker.listen: port must be 0 to 65535, not 65536"),
            (lambda: worker.connect("127.0.0.1", -1),
             "ucx.Worker.connect: port must be 0 to 65535, not -1"),
            (lambda: worker.connect("127.0.0.1", 1, timeout_ms=2**31),
             "ucx.Worker.connect: timeout_ms must be 0 to 2**31-1, not 2147483648"),
            (lambda: worker.accept(timeout_ms=2**31),
             "ucx.Worker.accept: timeout_ms must be None or -2**31 to 2**31-1, not 2147483648"),
            (lambda: worker.receive(timeout_ms=-2**31 - 1),
             "ucx.Worker.receive: timeout_ms must be None or -2**31 to 2**31-1, not -2147483649"),
            (lambda: worker.send(-1, np.arange(3)), f"ucx.Worker.send: {peer_range}, not -1"),
            (lambda: worker.disconnect(2**64),
             f"ucx.Worker.disconnect: {peer_range}, not 18446744073709551616"),
            (lambda: worker.connected(-2), f"ucx.Worker.connected: {peer_range}, not -2"),
            (lambda: worker.in_flight(-3), f"ucx.Worker.in_flight: {peer_range}, not -3"),
        ]
        for call, says in cases:
            with pytest.raises(hd.errors.InvalidArgumentError) as raised:
                call()
            assert str(raised.value) == "kInvalidArgument: " + says
        for call, says in ((lambda: worker.in_flight(True), "peer must be an integer, not bool"),
                           (lambda: worker.send(None, np.arange(3)),
                            "peer must be an integer, not NoneType"),
                           (lambda: worker.listen("127.0.0.1", None),
                            "port must be an integer, not NoneType")):
            with pytest.raises(TypeError) as raised:
                call()
            assert str(raised.value) == says
        with pytest.raises(TypeError, match="^as_tensor: object does not support"):
            worker.send(0, None)  # an object without a protocol, not nanobind's signature error
        # Integers through __index__ are integers; the worker still works after every refusal.
        assert worker.in_flight(Index(7)) == 0 and not worker.connected(Index(7))
        assert worker.receive(timeout_ms=Index(0)) is None
        port = worker.listen("127.0.0.1", Index(0))
        pump = Pump(worker)  # answers the client's Hello
        try:
            with ucx.Worker() as client:
                peer = client.connect("127.0.0.1", Index(port), timeout_ms=Index(PATIENCE_MS))
                assert client.connected(peer) and client.in_flight(peer) == 0
        finally:
            pump.join()


def test_a_peer_read_after_its_worker_closed_is_a_closed_error():
    # The peer's __index__ runs before the worker is looked up: one that closes the worker gets
    # ClosedError, not an answer from a worker that is gone.
    for ask in (lambda w, p: w.in_flight(p), lambda w, p: w.connected(p)):
        worker = ucx.Worker()
        with pytest.raises(hd.errors.ClosedError):
            ask(worker, ClosesOnIndex(worker))
    with pytest.raises(TypeError) as raised:
        ucx.Worker(stream_bandwidth_hint=np.True_)
    assert str(raised.value) == "stream_bandwidth_hint must be True or False, not numpy.bool"
    with ucx.Worker() as worker:
        with pytest.raises(TypeError) as raised:
            worker.listen("127.0.0.1", np.array(80.0))
        assert str(raised.value) == "port must be an integer, not numpy.ndarray"
