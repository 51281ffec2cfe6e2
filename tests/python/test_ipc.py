"""holoscan_dlpack.ipc: sockets, the Hello exchange between threads and between processes (spawned
with multiprocessing), refusals with their exact class and message, closed peers and timeouts,
selectors, and waits that let go of the GIL and give way to signals. On a GPU (skipped with the
reason elsewhere): torch and CuPy tensors written by slow kernels reach a consumer process that
checks every value on its own stream, 1000 tensors go through a shareable pool and every claim
comes back, and consumers on the legacy default stream wait for the exporter too."""

import multiprocessing
import os
import selectors
import subprocess
import sys
import threading
import time

import pytest

import holoscan_dlpack as hd
import ipc_peers
from conftest import (ClosesOnIndex, KDL_CUDA, cuda_cupy, cuda_torch, documented_example,
                      run_python)
from holoscan_dlpack import ipc
from waits import assert_close_ends_a_wait, assert_gives_way_to_signals

HELLO_MS = 10000
SPAWN = multiprocessing.get_context("spawn")

HOST_REFUSAL = ("kInvalidArgument: ipc export: host memory that CUDA did not allocate cannot be "
                "shared between processes; copy it into a shareable TensorPool")
REFUSALS = {  # DLPack device type -> the exporter's refusal
    1: HOST_REFUSAL,
    3: "kInvalidArgument: ipc export: pinned host memory (cudaMallocHost, cudaHostRegister) "
       "cannot be shared between processes; copy it into a shareable TensorPool",
    13: "kInvalidArgument: ipc export: managed memory (cudaMallocManaged) cannot be shared "
        "between processes",
}


def connect_in_threads(hello_timeout_ms=HELLO_MS, readiness=None):
    """An Exporter with one peer and that peer's Importer (`readiness` None: the default), both
    here: the Importer is made on a thread once this one waits in add_peer, which only works if
    add_peer lets go of the GIL."""
    mine, theirs = ipc.Channel.pair()
    made = {}

    def make_importer():
        time.sleep(0.05)  # needs the GIL again afterwards: add_peer has begun by then
        try:
            options = {} if readiness is None else {"readiness": readiness}
            made["importer"] = ipc.Importer(theirs, hello_timeout_ms=hello_timeout_ms, **options)
        except hd.errors.HoloscanError as error:
            made["error"] = error

    thread = threading.Thread(target=make_importer)
    thread.start()
    exporter = ipc.Exporter()
    try:
        peer = exporter.add_peer(mine, hello_timeout_ms=hello_timeout_ms)
    finally:
        thread.join()
    assert "error" not in made, made.get("error")
    return exporter, peer, made["importer"]


@pytest.fixture
def endpoints():
    exporter, peer, importer = connect_in_threads()
    yield exporter, peer, importer
    importer.close()
    exporter.close()


def host_tensor():
    """A writable host tensor (a pool block)."""
    return hd.TensorPool(memory="host", block_bytes=64, block_count=1).allocate((4,), "int32")


def report(reports, timeout=60):
    """The next report of a child process; its failure, if it reported one, fails the test."""
    item = reports.get(timeout=timeout)
    assert item[0] != "error", f"the child failed: {item[1]}: {item[2]}"
    return item


def test_the_package_imports_ipc_on_first_use():
    done = run_python("""
        import sys
        import holoscan_dlpack as hd
        assert "holoscan_dlpack.ipc" not in sys.modules  # nor multiprocessing's pickler
        assert hd.ipc.Channel is hd._core.ipc.Channel and "ipc" in vars(hd)
        from holoscan_dlpack import ipc
        assert ipc is hd.ipc
    """)
    assert done.returncode == 0, done.stderr


# ---- sockets -----------------------------------------------------------------------------------

def test_listener_accepts_connections_and_removes_its_path(tmp_path):
    path = str(tmp_path / "endpoint")
    with ipc.Listener(path) as listener:
        assert listener.path == path and os.path.exists(path)
        assert listener.accept(timeout_ms=0) is None
        client = ipc.Channel.connect(path)
        server = listener.accept(timeout_ms=HELLO_MS)
        assert isinstance(server, ipc.Channel) and server.peer_pid == os.getpid()
        assert client.fileno() != server.fileno()
        with pytest.raises(hd.errors.FailureError, match=r"bind\(.*\) failed: Address already in"):
            ipc.Listener.listen(path)
    assert listener.closed and not os.path.exists(path)
    with pytest.raises(hd.errors.FailureError, match="connect failed: No such file"):
        ipc.Channel.connect(path)


def test_a_path_holding_a_nul_character_is_refused_with_the_whole_message(tmp_path):
    # The message names the path, the NUL written as \0 (a C string would end there); it was cut
    # at the NUL, losing the reason.
    path = str(tmp_path / "end") + "\0point"
    shown = path.replace("\0", "\\0")
    for call in (lambda: ipc.Listener(path), lambda: ipc.Channel.connect(path)):
        with pytest.raises(hd.errors.InvalidArgumentError) as raised:
            call()
        assert str(raised.value).endswith(f'socket path "{shown}" must be 1 to 107 bytes without '
                                          "NUL")


def full_backlog_listener(path):
    """A listening socket that never accepts, its backlog filled: a connect() to it must wait."""
    import socket
    server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server.bind(path)
    server.listen(0)
    fillers = []
    while True:
        filler = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        filler.setblocking(False)
        try:
            filler.connect(path)
        except BlockingIOError:
            filler.close()
            return server, fillers
        fillers.append(filler)


def test_connect_to_a_full_backlog_times_out_or_gives_way_to_signals(tmp_path):
    # It waited in one call without the GIL that nothing but the listener could end.
    path = str(tmp_path / "endpoint")
    server, fillers = full_backlog_listener(path)
    try:
        start = time.monotonic()
        with pytest.raises(hd.errors.HoloscanTimeoutError) as raised:
            ipc.Channel.connect(path, timeout_ms=150)
        assert time.monotonic() - start >= 0.15
        assert str(raised.value) == (f"kTimeout: ipc channel: connect to {path}: the listener's "
                                     "backlog stayed full for 150 ms")
        assert_gives_way_to_signals(lambda: ipc.Channel.connect(path), server.close)
        server.accept()[0].close()  # room for one
        ipc.Channel.connect(path, timeout_ms=HELLO_MS).close()
    finally:
        server.close()
        for filler in fillers:
            filler.close()


def test_accept_waits_without_the_gil(tmp_path):
    path = str(tmp_path / "endpoint")
    with ipc.Listener(path) as listener:
        connector = threading.Timer(0.05, lambda: ipc.Channel.connect(path).close())
        connector.start()
        assert listener.accept(timeout_ms=HELLO_MS) is not None, "the connecting thread never ran"
        connector.join()


def test_channel_pair_closes_once_and_refuses_use_after(endpoints):
    mine, theirs = ipc.Channel.pair()
    assert mine.peer_pid == theirs.peer_pid == os.getpid()
    assert mine.fd == mine.fileno() and "fd=" in repr(mine)
    with theirs:
        pass
    assert theirs.closed and repr(theirs) == "<Channel closed>"
    theirs.close()  # again: nothing happens
    assert theirs.fileno() == -1  # as a closed socket says
    with pytest.raises(hd.errors.ClosedError) as raised:
        theirs.detach()
    assert str(raised.value) == "kClosed: ipc.Channel: closed"
    exporter, _, _ = endpoints
    with pytest.raises(hd.errors.ClosedError, match="the Channel is closed"):
        exporter.add_peer(theirs)
    with pytest.raises(hd.errors.ClosedError, match="peer hung up"):
        ipc.Importer(mine, hello_timeout_ms=HELLO_MS)  # its peer is gone
    assert mine.closed, "an endpoint takes the channel, and a failed one closes it"


def test_detach_and_adopt_hand_a_socket_over():
    mine, theirs = ipc.Channel.pair()
    fd = theirs.detach()
    assert theirs.closed
    adopted = ipc.Channel.adopt(fd)
    with pytest.raises(OSError):
        os.fstat(fd)  # taken over: the channel holds its own duplicate
    assert adopted.peer_pid == os.getpid()
    read, write = os.pipe()
    with pytest.raises(hd.errors.InvalidArgumentError) as raised:
        ipc.Channel.adopt(read)
    assert str(raised.value) == ("kInvalidArgument: ipc channel: adopt needs a connected AF_UNIX "
                                 "SOCK_SEQPACKET socket")
    os.fstat(read)  # a refused descriptor stays the caller's
    os.close(read)
    os.close(write)
    # A number that is no open descriptor is the caller's argument too (it was FailureError).
    for bad in (-1, read):  # `read` is closed by now
        with pytest.raises(hd.errors.InvalidArgumentError) as raised:
            ipc.Channel.adopt(bad)
        assert str(raised.value) == (
            "kInvalidArgument: ipc channel: adopt needs a connected AF_UNIX SOCK_SEQPACKET socket "
            f"({bad} is no open file descriptor)")
    mine.close()
    adopted.close()


# ---- Hello, timeouts, closed peers ------------------------------------------------------------

def test_hello_exchange_runs_without_the_gil():
    exporter, peer, importer = connect_in_threads(hello_timeout_ms=2000)
    assert peer >= 1 and exporter.connected(peer) and exporter.held() == 0
    assert importer.outstanding() == 0 and importer.stats().imported == 0
    importer.close()
    exporter.close()


@pytest.mark.parametrize("side", ["importer", "exporter"])
def test_hello_times_out_with_its_class_and_message(side):
    mine, theirs = ipc.Channel.pair()  # nobody answers on `mine`
    start = time.monotonic()
    with pytest.raises(hd.errors.HoloscanTimeoutError) as raised:
        if side == "importer":
            ipc.Importer(theirs, hello_timeout_ms=50)
        else:
            ipc.Exporter().add_peer(theirs, hello_timeout_ms=50)
    assert time.monotonic() - start >= 0.05
    assert str(raised.value) == f"kTimeout: ipc {side}: no Hello from the peer within 50 ms"
    assert raised.value.token == "TIMEOUT" and theirs.closed
    mine.close()


@pytest.mark.parametrize("side", ["Importer", "Exporter.add_peer"])
def test_a_hello_without_a_time_limit_is_refused(side):
    # The Hello exchange is one wait without the GIL that no signal ends: a negative timeout
    # would be a wait that nothing but the peer ends (before, it waited until this one hung up).
    mine, theirs = ipc.Channel.pair()  # nobody answers on `mine`
    hang_up = threading.Timer(2.0, mine.close)
    hang_up.start()
    try:
        with pytest.raises(hd.errors.InvalidArgumentError) as raised:
            if side == "Importer":
                ipc.Importer(theirs, hello_timeout_ms=-1)
            else:
                ipc.Exporter().add_peer(theirs, hello_timeout_ms=-1)
    finally:
        hang_up.cancel()
        hang_up.join()
    assert str(raised.value) == (f"kInvalidArgument: ipc.{side}: hello_timeout_ms must be 0 or "
                                 "more, not -1 (the Hello is a wait that no signal interrupts)")
    assert not theirs.closed, "a refused argument leaves the channel to its owner"
    mine.close()
    theirs.close()


def test_receive_times_out_with_none(endpoints):
    _, _, importer = endpoints
    assert importer.receive(timeout_ms=0) is None
    start = time.monotonic()
    assert importer.receive(timeout_ms=120) is None
    assert time.monotonic() - start >= 0.12


def test_a_closed_exporter_is_a_closed_error_for_its_importer(endpoints):
    exporter, _, importer = endpoints
    exporter.close()
    for _ in range(2):  # and stays one
        with pytest.raises(hd.errors.ClosedError) as raised:
            importer.receive(timeout_ms=HELLO_MS)
        assert str(raised.value) == "kClosed: ipc channel: peer hung up (end of file)"
    with pytest.raises(hd.errors.ClosedError, match="ipc.Exporter: closed"):
        exporter.publish(1, host_tensor())


def test_a_departed_importer_is_gone_for_its_exporter(endpoints):
    exporter, peer, importer = endpoints
    importer.close()
    exporter.poll()
    assert not exporter.connected(peer) and exporter.held(peer) == 0
    with pytest.raises(hd.errors.ClosedError) as raised:
        exporter.publish(peer, host_tensor())
    assert str(raised.value) == f"kClosed: ipc exporter: peer {peer} has hung up or exited"


def test_endpoints_refuse_use_after_close(endpoints):
    exporter, peer, importer = endpoints
    with exporter, importer:
        pass
    assert exporter.closed and importer.closed
    assert exporter.fileno() == importer.fileno() == -1
    for call, name in ((exporter.stats, "Exporter"), (exporter.poll, "Exporter"),
                       (lambda: exporter.held(peer), "Exporter"), (importer.outstanding, "Importer"),
                       (importer.poll, "Importer"), (importer.receive, "Importer")):
        with pytest.raises(hd.errors.ClosedError) as raised:
            call()
        assert str(raised.value) == f"kClosed: ipc.{name}: closed"
    exporter.close()
    importer.close()


# ---- refusals -----------------------------------------------------------------------------------

def test_publish_refuses_host_memory_with_its_class_and_message(endpoints):
    exporter, peer, importer = endpoints
    pool = hd.TensorPool(memory="host", block_bytes=1024, block_count=1)
    tensor = pool.allocate((16,), "float32")
    numpy = pytest.importorskip("numpy")
    for host in (tensor, numpy.arange(8), hd.as_tensor(numpy.ones(3))):
        with pytest.raises(hd.errors.InvalidArgumentError) as raised:
            exporter.publish(peer, host)
        assert str(raised.value) == HOST_REFUSAL
        assert raised.value.code == hd.errors.ErrorCode.INVALID_ARGUMENT
    stats = exporter.stats()
    assert exporter.held() == 0 and stats.published == 0
    # Every counter of C++'s ExporterStats is there (fds_sent and refused_exports were not).
    assert (stats.fds_sent, stats.refused_exports, stats.refused_messages) == (0, 0, 0)
    assert "ClosedError once the peer hung up or left" in ipc.Exporter.publish.__doc__
    del tensor
    assert pool.available_blocks() == 1, "a refused publish kept its claim"
    assert importer.receive(timeout_ms=0) is None, "something was sent"
    with pytest.raises(hd.errors.NotFoundError, match="no peer 99"):
        exporter.publish(99, numpy.arange(4))  # the peer is checked first
    # None is an object without a protocol, as 5.0's `object` parameter takes it.
    with pytest.raises(TypeError, match="^as_tensor: object does not support"):
        exporter.publish(peer, None)


@pytest.mark.parametrize("device_type", sorted(REFUSALS))
def test_refused_memory_is_deleted_once(endpoints, testing, collect, device_type):
    exporter, peer, _ = endpoints
    deleted = testing.deleter_calls()
    with pytest.raises(hd.errors.InvalidArgumentError) as raised:
        exporter.publish(peer, testing.make_capsule(device=(device_type, 0)))
    assert str(raised.value) == REFUSALS[device_type]
    assert testing.deleter_calls() == deleted + 1, "the refused import was not deleted"
    collect()
    assert testing.deleter_calls() == deleted + 1 and exporter.held() == 0


# ---- selectors, signals, threads --------------------------------------------------------------

def test_fileno_works_with_selectors(tmp_path):
    path = str(tmp_path / "endpoint")
    with selectors.DefaultSelector() as selector, ipc.Listener(path) as listener:
        selector.register(listener, selectors.EVENT_READ, "listener")
        assert selector.select(timeout=0) == []
        client = ipc.Channel.connect(path)
        assert [key.data for key, _ in selector.select(timeout=10)] == ["listener"]
        server = listener.accept(timeout_ms=0)
        selector.unregister(listener)

        made = {}
        thread = threading.Thread(target=lambda: made.update(importer=ipc.Importer(client)))
        thread.start()
        exporter = ipc.Exporter()
        peer = exporter.add_peer(server)
        thread.join()
        importer = made["importer"]
        selector.register(exporter, selectors.EVENT_READ, "exporter")
        selector.register(importer, selectors.EVENT_READ, "importer")
        assert selector.select(timeout=0) == []
        importer.close()  # the exporter reads end-of-file
        assert [key.data for key, _ in selector.select(timeout=10)] == ["exporter"]
        exporter.poll()
        assert not exporter.connected(peer)
        selector.unregister(importer)
        selector.unregister(exporter)
        exporter.close()


def test_the_documented_asyncio_loops_run_as_written(endpoints):
    import asyncio
    exporter, peer, importer = endpoints
    loops = {}
    exec(documented_example("### Selectors and asyncio"), loops)

    async def main():
        stop = asyncio.Event()
        server = asyncio.create_task(loops["serve"](exporter, stop))
        importer.close()  # the exporter's descriptor turns readable: its reader polls
        for _ in range(200):
            if not exporter.connected(peer):
                break
            await asyncio.sleep(0.01)
        stop.set()
        await server
        return exporter.connected(peer)

    assert asyncio.run(main()) is False

    exporter, _, importer = connect_in_threads()

    async def drain():
        asyncio.get_running_loop().call_later(0.05, exporter.close)
        return [tensor async for tensor in loops["tensors"](importer)]

    with pytest.raises(hd.errors.ClosedError, match="peer hung up"):
        asyncio.run(drain())
    importer.close()


def test_receive_gives_way_to_signals(endpoints):
    exporter, _, importer = endpoints
    assert_gives_way_to_signals(importer.receive, exporter.close)  # receive(): no limit


def test_close_from_another_thread_ends_a_receive(endpoints):
    _, _, importer = endpoints
    assert_close_ends_a_wait(lambda: importer.receive(timeout_ms=HELLO_MS), importer.close,
                             "kClosed: ipc.Importer: closed")


def test_a_receive_that_must_not_wait_never_waits_out_another_threads_receive(endpoints):
    # Receives of two threads took turns under a lock held for a whole slice (up to 100 ms): a
    # receive(timeout_ms=0) on one thread waited out the other's slice (150 ms seen).
    _, _, importer = endpoints
    stop = threading.Event()

    def keep_receiving():
        while not stop.is_set():
            importer.receive(timeout_ms=200)

    thread = threading.Thread(target=keep_receiving)
    thread.start()
    try:
        time.sleep(0.05)
        took = []
        for _ in range(11):
            started = time.monotonic()
            assert importer.receive(timeout_ms=0) is None
            took.append(time.monotonic() - started)
    finally:
        stop.set()
        thread.join()
    # The median: a loaded machine may delay any one call; waiting out slices delays most of them.
    median = sorted(took)[len(took) // 2]
    assert median < 0.04, f"receive(timeout_ms=0) took {median * 1000:.1f} ms (median)"


def test_close_from_another_thread_stops_a_listener_at_once(tmp_path):
    # The accepting thread's slice kept the listener listening for up to 100 ms after close():
    # connects still came in, and listening at the path again was "Address already in use".
    path = str(tmp_path / "endpoint")
    listener = ipc.Listener(path)

    def close_and_check():
        listener.close()
        assert not os.path.exists(path), "the path outlived close()"
        with pytest.raises(hd.errors.FailureError, match="connect failed"):
            ipc.Channel.connect(path, timeout_ms=0)
        ipc.Listener(path).close()  # the path is free at once

    outcome = {}

    def accepting():
        try:
            outcome["got"] = listener.accept(timeout_ms=HELLO_MS)
        except hd.errors.ClosedError as error:
            outcome["error"] = str(error)

    thread = threading.Thread(target=accepting)
    thread.start()
    time.sleep(0.05)  # inside a slice of the wait
    close_and_check()
    thread.join()
    # "stopped" from the slice under way; "closed" only had the thread not begun by then.
    assert outcome.get("error") in ("kClosed: ipc listener: stopped",
                                    "kClosed: ipc.Listener: closed"), outcome


def test_a_listener_closed_late_leaves_a_newer_listeners_path(tmp_path):
    # "Remove a stale socket, then listen": the old listener's late close removed the new one's
    # path, and nobody could connect to it.
    path = str(tmp_path / "endpoint")
    old = ipc.Listener(path)
    os.unlink(path)
    with ipc.Listener(path) as new:
        old.close()
        assert os.path.exists(path)
        client = ipc.Channel.connect(path, timeout_ms=HELLO_MS)
        assert isinstance(new.accept(timeout_ms=HELLO_MS), ipc.Channel)
        client.close()


# ---- two processes ------------------------------------------------------------------------------

def test_hello_with_a_spawned_child_and_its_hang_up():
    reports = SPAWN.Queue()
    mine, theirs = ipc.Channel.pair()
    child = SPAWN.Process(target=ipc_peers.import_until_closed, args=(reports, theirs))
    child.start()
    theirs.close()  # the child holds its own duplicate
    try:
        with ipc.Exporter() as exporter:
            peer = exporter.add_peer(mine, hello_timeout_ms=HELLO_MS * 3)
            assert exporter.connected(peer)
            assert report(reports) == ("hello", child.pid)
        assert report(reports) == ("closed", "ClosedError",
                                   "kClosed: ipc channel: peer hung up (end of file)")
    finally:
        child.join(timeout=60)
    assert child.exitcode == 0


def test_a_channel_through_a_pipe_and_an_exporter_that_exits():
    reports = SPAWN.Queue()
    inbox, outbox = SPAWN.Pipe()
    child = SPAWN.Process(target=ipc_peers.export_then_exit, args=(reports, inbox))
    child.start()
    try:
        mine, theirs = ipc.Channel.pair()
        outbox.send(theirs)  # pickled by multiprocessing as a duplicate of the socket
        theirs.close()
        with ipc.Importer(mine, hello_timeout_ms=HELLO_MS * 3) as importer:
            assert report(reports) == ("hello", child.pid, True)
            outbox.send("exit")
            with pytest.raises(hd.errors.ClosedError, match="peer hung up"):
                importer.receive(timeout_ms=60000)
    finally:
        child.join(timeout=60)
    assert child.exitcode == 0


def test_a_closed_channel_is_refused_by_multiprocessings_pickler_as_closed():
    import io
    from multiprocessing.reduction import ForkingPickler
    mine, theirs = ipc.Channel.pair()
    mine.close()
    with pytest.raises(hd.errors.ClosedError, match="closed"):
        ForkingPickler(io.BytesIO()).dump(mine)
    theirs.close()


def test_a_channel_cannot_be_pickled_outside_multiprocessing():
    import pickle
    mine, theirs = ipc.Channel.pair()
    with pytest.raises(TypeError, match="pickled only by multiprocessing"):
        pickle.dumps(mine)
    mine.close()
    theirs.close()


@pytest.mark.parametrize("protocol", range(6))
def test_exporters_listeners_and_pools_refuse_pickling_at_every_protocol(tmp_path, protocol):
    # Protocols 0 and 1 rebuilt an instance with object.__new__, which a class made through a
    # factory let through; freeing that instance, whose C++ object never existed, aborted.
    import pickle
    with ipc.Exporter() as exporter, ipc.Listener(str(tmp_path / "socket")) as listener:
        pool = hd.TensorPool(memory="host", block_bytes=256, block_count=1)
        for name, thing in (("Exporter", exporter), ("Listener", listener),
                            ("TensorPool", pool)):
            with pytest.raises(TypeError, match=f"^cannot pickle '{name}' object$"):
                pickle.dumps(thing, protocol=protocol)


# ---- on a GPU ---------------------------------------------------------------------------------

def start_producer(framework, memory, count, spin, readiness="gpu"):
    """A spawned producer (ipc_peers.produce) and this process's Importer of it."""
    reports = SPAWN.Queue()
    mine, theirs = ipc.Channel.pair()
    child = SPAWN.Process(target=ipc_peers.produce,
                          args=(reports, theirs, framework, memory, count, spin))
    child.start()
    theirs.close()
    return child, reports, ipc.Importer(mine, hello_timeout_ms=120000, readiness=readiness)


def finish_producer(child, reports, count):
    """Checks the producer's final report: every claim came back."""
    try:
        _, early, held, published, dropped, available = report(reports, timeout=120)
    finally:
        child.join(timeout=60)
    assert child.exitcode == 0
    assert (held, published, dropped, available) == (0, count, count, 4)
    return early


def receive(importer):
    tensor = importer.receive(timeout_ms=60000)
    assert tensor is not None, "nothing came in 60 s"
    assert tensor.is_read_only and tensor.has_readiness_stream_contract()
    assert tensor.shape == (ipc_peers.ROWS,) and tensor.device.device_type == KDL_CUDA
    return tensor


def consume_torch(torch, importer, count):
    """Checks every value of `count` tensors on a stream of ours; returns the mismatches."""
    consumer = torch.cuda.Stream()
    base = torch.arange(ipc_peers.ROWS, dtype=torch.int32, device="cuda")
    wrong = torch.zeros((), dtype=torch.int64, device="cuda")
    torch.cuda.synchronize()
    for i in range(count):
        tensor = receive(importer)
        with torch.cuda.stream(consumer):
            view = torch.from_dlpack(tensor)  # `consumer` waits for the producer's event
            wrong += (view != base + i).sum()
        assert tensor.set_deallocation_stream(consumer)  # the block is reused after the check
        del view, tensor
    return int(wrong.item())


def consume_cupy(cupy, importer, count):
    consumer = cupy.cuda.Stream(non_blocking=True)
    with consumer:
        base = cupy.arange(ipc_peers.ROWS, dtype=cupy.int32)
        wrong = cupy.zeros((), dtype=cupy.int64)
    for i in range(count):
        tensor = receive(importer)
        with consumer:
            view = cupy.from_dlpack(tensor)
            wrong += (view != base + i).sum()
        assert tensor.set_deallocation_stream(consumer.ptr)
        del view, tensor
    return int(wrong.get())


@pytest.mark.parametrize("readiness", ["gpu", "host"])
@pytest.mark.parametrize("memory", ["pool", "framework"])
@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_slowly_written_tensors_reach_a_consumer_process_on_its_own_stream(framework, memory,
                                                                          readiness):
    module = cuda_torch() if framework == "torch" else cuda_cupy()
    count = 12
    child, reports, importer = start_producer(framework, memory, count, ipc_peers.SPIN_CYCLES,
                                              readiness)
    with importer:
        consume = consume_torch if framework == "torch" else consume_cupy
        wrong = consume(module, importer, count)
        # Framework memory travels as a legacy handle mapped for each import: its mapping is
        # closed, and then its Release sent, once the release thread saw the consumer's work pass.
        hd.flush_deferred_releases()
        assert importer.outstanding() == 0
        # On the host, a publish that came before its slow write was held until it was done.
        assert (importer.stats().held_for_readiness > 0) == (readiness == "host")
    early = finish_producer(child, reports, count)
    assert early == count, "a write finished before its publish: no race to see"
    assert wrong == 0, "the consumer read before the producer's kernel finished"


def test_a_thousand_tensors_through_a_shareable_pool_all_come_back():
    torch = cuda_torch()
    count = 1000
    child, reports, importer = start_producer("torch", "pool", count, 0)
    with importer:
        assert consume_torch(torch, importer, count) == 0
        stats = importer.stats()
        assert stats.imported == count and stats.released == count and stats.refused == 0
        assert stats.mappings_opened <= 4, "the pool's memory is mapped once, not per tensor"
        assert importer.outstanding() == 0
    finish_producer(child, reports, count)


def test_consumers_on_the_legacy_default_stream_wait_for_the_exporter():
    torch = cuda_torch()
    cupy = cuda_cupy()
    count = 6  # two of each consumer below
    child, reports, importer = start_producer("torch", "pool", count, ipc_peers.SPIN_CYCLES)
    base = torch.arange(ipc_peers.ROWS, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    wrong = []
    with importer:
        for i in range(count):
            tensor = receive(importer)
            if i % 3 == 0:  # torch's default stream, which is the legacy default stream
                wrong.append(int((torch.from_dlpack(tensor) != base + i).sum().item()))
            elif i % 3 == 1:  # CuPy's null stream: __dlpack__(stream=1)
                view = cupy.from_dlpack(tensor)
                wrong.append(int((view != cupy.arange(ipc_peers.ROWS, dtype=cupy.int32) + i)
                                 .sum().get()))
                del view
            else:  # __cuda_array_interface__, which names stream 1
                view = cupy.asarray(tensor)
                wrong.append(int((view != cupy.arange(ipc_peers.ROWS, dtype=cupy.int32) + i)
                                 .sum().get()))
                del view  # CuPy's array holds the Tensor itself
            torch.cuda.synchronize()  # every check is done before the release
            del tensor
        # Every import released before the importer closes: one still alive here keeps its claim
        # until it goes, after the producer's report (which would say it is held).
        assert importer.outstanding() == 0
    early = finish_producer(child, reports, count)
    assert early == count
    assert wrong == [0] * count, "a legacy-stream consumer read before the producer finished"


def test_the_documented_example_runs_as_written(tmp_path):
    cuda_torch()
    script = tmp_path / "two_processes.py"
    script.write_text(documented_example("## Across processes"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


class Index:
    """An integer only through __index__, as NumPy's integers are."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


# The endpoints' integers were read by nanobind's casters: a negative peer, or a timeout past
# 32 bits, raised "incompatible function arguments", naming none of them, and True was 1.
def test_an_importer_waiting_for_readiness_on_the_host_times_out_and_sees_its_exporter_close():
    exporter, _, importer = connect_in_threads(readiness="host")
    with importer:
        assert importer.receive(timeout_ms=0) is None
        assert importer.receive(timeout_ms=20) is None
        assert importer.stats().held_for_readiness == 0
        assert importer.awaiting_readiness() == 0
        exporter.close()
        with pytest.raises(hd.errors.ClosedError):
            importer.receive(timeout_ms=1000)


def test_readiness_is_waited_for_on_the_host_by_default():
    for made in (ipc.Importer.__init__, ipc.Importer.create):
        assert "readiness: str | ReadinessWait = 'host'" in made.__doc__


def test_readiness_takes_gpu_host_or_a_readiness_wait_and_refuses_the_rest():
    for readiness in ("gpu", "host", ipc.ReadinessWait.kOnGpu, ipc.ReadinessWait.kOnHost):
        exporter, _, importer = connect_in_threads(readiness=readiness)
        importer.close()
        exporter.close()
    mine, theirs = ipc.Channel.pair()
    with pytest.raises(hd.errors.InvalidArgumentError) as raised:
        ipc.Importer(theirs, readiness="sideways")
    assert str(raised.value) == ("kInvalidArgument: ipc.Importer: readiness must be 'gpu' or "
                                 "'host', not 'sideways'")
    for wrong in (True, 1, None, hd.PoolMemory.kHost):
        with pytest.raises(TypeError, match="^ipc.Importer: readiness must be 'gpu', 'host' or "
                                            "a ReadinessWait$"):
            ipc.Importer.create(theirs, 1000, readiness=wrong)
    with pytest.raises(TypeError):
        ipc.Importer(theirs, 1000, "host")  # keyword only
    assert not theirs.closed, "a refused argument takes nothing over"
    mine.close()
    theirs.close()


def test_endpoint_integers_out_of_range_name_the_call_and_argument(endpoints, tmp_path):
    exporter, peer, importer = endpoints
    peer_range = "peer must be a peer id, 0 to 2**64-1"
    wait_range = "timeout_ms must be None or -2**31 to 2**31-1"
    mine, theirs = ipc.Channel.pair()
    listener = ipc.Listener(str(tmp_path / "socket"))
    cases = [
        (lambda: exporter.publish(-1, host_tensor()),
         f"ipc.Exporter.publish: {peer_range}, not -1"),
        (lambda: exporter.held(2**64),
         f"ipc.Exporter.held: {peer_range}, not 18446744073709551616"),
        (lambda: exporter.connected(-2), f"ipc.Exporter.connected: {peer_range}, not -2"),
        (lambda: exporter.add_peer(mine, hello_timeout_ms=2**32),
         "ipc.Exporter.add_peer: hello_timeout_ms must be 0 to 2**31-1, not 4294967296"),
        (lambda: ipc.Importer(theirs, hello_timeout_ms=2**31),
         "ipc.Importer: hello_timeout_ms must be 0 to 2**31-1, not 2147483648"),
        (lambda: ipc.Importer.create(theirs, -2**40),
         "ipc.Importer: hello_timeout_ms must be 0 to 2**31-1, not -1099511627776"),
        (lambda: importer.receive(timeout_ms=2**31),
         f"ipc.Importer.receive: {wait_range}, not 2147483648"),
        (lambda: listener.accept(timeout_ms=-2**31 - 1),
         f"ipc.Listener.accept: {wait_range}, not -2147483649"),
        (lambda: ipc.Channel.connect(str(tmp_path / "socket"), timeout_ms=2**63),
         f"ipc.Channel.connect: {wait_range}, not 9223372036854775808"),
    ]
    for call, says in cases:
        with pytest.raises(hd.errors.InvalidArgumentError) as raised:
            call()
        assert str(raised.value) == "kInvalidArgument: " + says
    for call in (lambda: exporter.held(True), lambda: importer.receive(timeout_ms=False)):
        with pytest.raises(TypeError, match="^(peer|timeout_ms) must be an integer, not bool$"):
            call()
    # A refused argument takes nothing over: the channels are still the caller's and still work.
    assert not mine.closed and not theirs.closed
    assert exporter.held(Index(peer)) == 0 and exporter.connected(Index(peer))
    assert importer.receive(timeout_ms=Index(0)) is None
    assert listener.accept(timeout_ms=Index(0)) is None
    listener.close()
    mine.close()
    theirs.close()


# adopt's descriptor was read by nanobind's caster: adopt(True) took over descriptor 1 (stdout,
# when that was a socket) and closed it.
def test_adopt_takes_no_bool_for_a_descriptor():
    import socket

    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    saved = os.dup(1)
    try:
        os.dup2(mine.fileno(), 1)
        with pytest.raises(TypeError) as raised:
            ipc.Channel.adopt(True)
        assert str(raised.value) == "fd must be an integer, not bool"
        os.fstat(1)  # still open
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        mine.close()
        theirs.close()
    for value, error, says in ((2**31, hd.errors.InvalidArgumentError,
                                "kInvalidArgument: ipc.Channel.adopt: fd must be a 32-bit "
                                "descriptor, not 2147483648"),
                               (None, TypeError, "fd must be an integer, not NoneType")):
        with pytest.raises(error) as raised:
            ipc.Channel.adopt(value)
        assert str(raised.value) == says


def test_a_peer_read_after_its_exporter_closed_is_a_closed_error():
    for ask in (lambda e, p: e.held(p), lambda e, p: e.connected(p)):
        exporter = ipc.Exporter()
        with pytest.raises(hd.errors.ClosedError):
            ask(exporter, ClosesOnIndex(exporter))
