#!/usr/bin/env python3
"""Tensors over UCX from Python: holoscan_dlpack.ucx beside ucxx's own round-trip benchmark
(`python -m ucxx.benchmarks.send_recv`: CuPy arrays, tagged send/recv, the polling C++ backend),
in the same run, at the same sizes, device memory on both sides, two processes on this host.

  round trip  an array sent to an echo process and received back, per size. Ours: the echo sends
              the Tensor it received (a block of its device pool) back; the time includes landing
              in a pool block on each side and the Ack of each send. Two ways to send: a Tensor
              imported once ("tensor"), and the CuPy array itself, imported by every send
              ("cupy"). Median microseconds per round trip.
  stream      `--count` tensors sent with a window of 16 to a process that receives and drops
              them: GiB/s (ours only).

ucxx loads its own UCX (1.21): it runs in a subprocess with its site folder on PYTHONPATH and
without UCX_MODULE_DIR (`--ucxx-site`, a folder or scripts/ucxx-wheels.sh's tarball; default
.whl/ucxx-site.tar.xz). Where it cannot be imported, only our side runs. `--memory host` measures
host memory (NumPy arrays) instead, which also runs without a GPU.

    python3 benchmarks/python_ucx_bench.py [--sizes 4096,1048576,67108864] [--iters N]
        [--count N] [--reps N] [--tls cuda_ipc,cuda_copy,tcp] [--memory device|host]
        [--spin-us N] [--ucxx-site PATH]
"""
import argparse
import multiprocessing
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
PATIENCE_MS = 120000
WINDOW = 16


def array_module(memory):
    if memory == "device":
        import cupy
        return cupy
    import numpy
    return numpy


def make_worker(memory, size, spin_us):
    """A Worker whose arrivals land in a pool of `size`-byte blocks of `memory`, polling for
    `spin_us` before a wait sleeps on its fd."""
    import holoscan_dlpack as hd
    from holoscan_dlpack import ucx
    pool = hd.TensorPool(memory=memory, block_bytes=size, block_count=WINDOW + 4)
    return ucx.Worker(window=WINDOW, receive_pool=pool, spin_us=spin_us)


def serve(ports, memory, size, echo, spin_us):
    """The other process: receives until the client leaves, sending each tensor back (`echo`)
    or dropping it."""
    import holoscan_dlpack as hd
    with make_worker(memory, size, spin_us) as worker:
        ports.put(worker.listen("127.0.0.1"))
        if worker.accept(timeout_ms=PATIENCE_MS) is None:
            raise TimeoutError("nobody connected")
        while True:
            try:
                got = worker.receive(timeout_ms=PATIENCE_MS)
            except hd.errors.ClosedError:  # the client is done
                return
            if echo:
                worker.send(got.peer, got.tensor)
            del got
            while worker.next_send_result() is not None:
                pass


class Client:
    """This process's worker, connected to a spawned `serve`."""

    def __init__(self, memory, size, echo, spin_us):
        context = multiprocessing.get_context("spawn")
        ports = context.Queue()
        self.server = context.Process(target=serve, args=(ports, memory, size, echo, spin_us))
        self.server.start()
        self.worker = make_worker(memory, size, spin_us)
        self.peer = self.worker.connect("127.0.0.1", ports.get(timeout=PATIENCE_MS / 1000),
                                        timeout_ms=PATIENCE_MS)

    def ended(self):
        """SendResults taken now; raises the error of one that failed."""
        count = 0
        while (result := self.worker.next_send_result()) is not None:
            if result.error is not None:
                raise result.error
            count += 1
        return count

    def close(self):
        self.worker.close()
        self.server.join(timeout=60)


def our_round_trips(memory, size, iters, as_array, spin_us):
    """Median microseconds per round trip; the echo is checked once at the end."""
    import holoscan_dlpack as hd
    xp = array_module(memory)
    array = xp.arange(size // 4, dtype=xp.int32)
    tensor = array if as_array else hd.as_tensor(array)
    client = Client(memory, size, echo=True, spin_us=spin_us)
    try:
        times = []
        for i in range(iters + max(iters // 10, 10)):
            start = time.perf_counter()
            client.worker.send(client.peer, tensor)
            got = client.worker.receive(timeout_ms=PATIENCE_MS)
            times.append(time.perf_counter() - start)
            client.ended()
        if not bool((xp.from_dlpack(got.tensor) == array).all()):
            raise RuntimeError("the echo came back with other values")
        del got
    finally:
        client.close()
    return 1e6 * statistics.median(times[-iters:])


def our_stream(memory, size, count, spin_us):
    """GiB/s of `count` tensors sent with a window of 16, received and dropped."""
    import holoscan_dlpack as hd
    xp = array_module(memory)
    tensor = hd.as_tensor(xp.ones(size // 4, dtype=xp.int32))
    client = Client(memory, size, echo=False, spin_us=spin_us)
    try:
        sent = ended = primed = 0
        start = None
        while ended < count:
            if sent < count:
                try:
                    client.worker.send(client.peer, tensor)
                    sent += 1
                except hd.errors.BackpressuredError:
                    pass
            client.worker.progress()
            ended += client.ended()
            if start is None and ended > 0:  # the first answer: the pipe is primed
                start, primed = time.perf_counter(), ended
        seconds = time.perf_counter() - start
    finally:
        client.close()
    return (count - primed) * size / seconds / (1 << 30)


def ucxx_environment(site, scratch):
    """The environment that imports ucxx from `site` (a folder, or a .tar.xz unpacked into
    `scratch`), or None."""
    if site is None or not pathlib.Path(site).exists():
        return None
    folder = pathlib.Path(site)
    if folder.is_file():
        folder = pathlib.Path(scratch)
        with tarfile.open(site) as archive:
            archive.extractall(folder)
    env = {k: v for k, v in os.environ.items() if k != "UCX_MODULE_DIR"}  # ucxx's own UCX
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))
    probe = subprocess.run([sys.executable, "-c", "import ucxx"], env=env, capture_output=True,
                           text=True, timeout=120)
    if probe.returncode != 0:
        print(f"ucxx: cannot be imported from {site}: {probe.stderr.strip().splitlines()[-1:]}")
        return None
    return env


def ucxx_round_trip(env, memory, size, iters):
    """ucxx's own benchmark: median microseconds per round trip (it reports nanoseconds)."""
    done = subprocess.run(
        [sys.executable, "-m", "ucxx.benchmarks.send_recv", "-o",
         "cupy" if memory == "device" else "numpy", "--reuse-alloc", "-n", str(size),
         "--n-iter", str(iters), "--n-warmup-iter", str(max(iters // 10, 10)), "-l", "ucxx-core",
         "--progress-mode", "polling", "-s", "127.0.0.1", "--no-detailed-report"],
        env=env, capture_output=True, text=True, timeout=600)
    found = re.search(r"Latency \(median\)\s*\|\s*([0-9.]+)", done.stdout)
    if done.returncode != 0 or found is None:
        print(f"ucxx: size {size} failed:\n{done.stdout}{done.stderr}")
        return None
    return float(found.group(1)) / 1000


def measure(args, sizes, ucxx_env):
    """{size: {measure: [one value per rep]}}, the measures alternating within each rep."""
    rows = {size: {"tensor": [], "array": [], "ucxx": [], "stream": []} for size in sizes}
    for rep in range(args.reps):
        for size in sizes:
            iters = args.iters if size <= 1 << 20 else min(args.iters, 100)
            count = args.count if size <= 1 << 20 else min(args.count, 200)
            row = rows[size]
            row["tensor"].append(our_round_trips(args.memory, size, iters, False, args.spin_us))
            row["array"].append(our_round_trips(args.memory, size, iters, True, args.spin_us))
            if ucxx_env is not None:
                row["ucxx"].append(ucxx_round_trip(ucxx_env, args.memory, size, iters))
            row["stream"].append(our_stream(args.memory, size, count, args.spin_us))
            print(f"rep {rep + 1} size {size}: " + ", ".join(
                f"{name} {values[-1]:.1f}" for name, values in row.items()
                if values and values[-1] is not None), flush=True)
    return rows


def report(args, rows):
    print(f"\nUCX_TLS={args.tls}, {args.memory} memory, spin_us={args.spin_us}, median of "
          f"{args.reps} (round trips in us, stream in GiB/s)")
    print(f"{'size':>10} {'ours tensor':>12} {'ours array':>11} {'ucxx':>9} {'ucxx/ours':>10} "
          f"{'stream':>8}")
    for size, row in rows.items():
        value = {name: statistics.median(v) if v and None not in v else None
                 for name, v in row.items()}
        ucxx_text = f"{value['ucxx']:9.1f}" if value["ucxx"] else f"{'-':>9}"
        ratio = f"{value['ucxx'] / value['tensor']:9.2f}x" if value["ucxx"] else f"{'-':>10}"
        print(f"{size:>10} {value['tensor']:12.1f} {value['array']:11.1f} {ucxx_text} {ratio} "
              f"{value['stream']:8.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="4096,1048576,67108864", help="bytes, comma-separated")
    parser.add_argument("--iters", type=int, default=2000, help="round trips per size (fewer "
                        "for sizes over 1 MiB: 100)")
    parser.add_argument("--count", type=int, default=2000, help="tensors per stream run (1 MiB "
                        "and less; 200 above)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions, alternating")
    parser.add_argument("--tls", default="cuda_ipc,cuda_copy,tcp", help="UCX_TLS of both sides")
    parser.add_argument("--memory", choices=("device", "host"), default="device")
    parser.add_argument("--spin-us", type=int, default=1000, help="our Workers' spin_us (the "
                        "default is the Worker's; ucxx's benchmark polls all the time)")
    parser.add_argument("--ucxx-site", default=str(ROOT / ".whl" / "ucxx-site.tar.xz"))
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]

    # Our UCX: its plugins from the UCX the package was built with (read as it loads), and the
    # transports for both processes (read when a Worker is made); spawned children inherit them.
    plugins = ROOT / ".deps" / "ucx" / "libucx" / "lib" / "ucx"
    if plugins.is_dir():
        os.environ.setdefault("UCX_MODULE_DIR", str(plugins))
    os.environ["UCX_TLS"] = args.tls
    os.environ.setdefault("UCX_WARN_UNUSED_ENV_VARS", "n")
    try:
        from holoscan_dlpack import ucx  # noqa: F401 -- built with UCX?
        array_module(args.memory)
    except ImportError as error:
        print(f"python ucx bench: {error}; nothing to measure")
        return 0
    with tempfile.TemporaryDirectory(prefix="ucxx-site-") as scratch:
        rows = measure(args, sizes, ucxx_environment(args.ucxx_site, scratch))
    report(args, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
