"""Shared fixtures of the Python suite: the module, its test helpers, GPU frameworks (skipped with
the reason when absent) and a runner for scripts that must see interpreter shutdown."""

import functools
import gc
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

# UCX (holoscan_dlpack.ucx) as the C++ tests run it (tests/ucx/CMakeLists.txt): the transport
# plugins of the UCX this checkout builds against, and TCP on the loopback, which every machine
# has (GPU tests pick their own UCX_TLS). UCX reads UCX_MODULE_DIR as the extension loads it, so
# before the first import; the rest when a Worker is made. Spawned peers inherit them.
UCX_PLUGINS = pathlib.Path(__file__).parents[2] / ".deps" / "ucx" / "libucx" / "lib" / "ucx"
if UCX_PLUGINS.is_dir():
    os.environ["UCX_MODULE_DIR"] = str(UCX_PLUGINS)
os.environ["UCX_TLS"] = "tcp"
os.environ["UCX_WARN_UNUSED_ENV_VARS"] = "n"

import holoscan_dlpack as hd  # noqa: E402 -- after UCX's environment

try:
    import holoscan_dlpack_testing
except ImportError:  # the suite's own extension, built only by the test flows
    holoscan_dlpack_testing = None

KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1
SLOW_CYCLES = int(2e8)  # torch.cuda._sleep cycles: about 0.1 s on an H200, far beyond any handoff


def helpers():
    """The test helper extension; a test that needs it fails (never skips) without it."""
    if holoscan_dlpack_testing is None:
        pytest.fail("holoscan_dlpack_testing is missing: install with "
                    "`pip install -Ccmake.define.HOLOSCAN_DLPACK_PYTHON_TESTING=ON .` "
                    "(scripts/test.sh does)")
    return holoscan_dlpack_testing


@pytest.fixture
def testing():
    """The test helper extension, with nothing held over from another test."""
    extension = helpers()
    extension.drop_held_on_foreign_thread()
    gc.collect()  # tensors in cycles of earlier tests (tracebacks) would be counted in this one
    hd.flush_deferred_releases()
    yield extension
    extension.drop_held_on_foreign_thread()
    hd.flush_deferred_releases()


@pytest.fixture
def collect():
    """Runs the garbage collector and drains queued releases, then returns."""

    def run():
        gc.collect()
        hd.flush_deferred_releases()

    return run


@functools.lru_cache(maxsize=None)
def cuda_device_present():
    """Whether the library can use a CUDA device here (a device pool can be made)."""
    try:
        hd.TensorPool(memory="device", block_bytes=256, block_count=1)
    except hd.errors.FailureError:
        return False
    return True


def cuda_torch():
    """torch with a CUDA device, or a skip that says why not; its kernels loaded up front."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device (GPU test)")
    _warm_torch(torch)
    return torch


@functools.lru_cache(maxsize=None)
def _warm_torch(torch):
    # CUDA loads a kernel's module on its first launch, and that load waits for the whole device:
    # a first launch behind a slow kernel would order the test by accident and hide a missing wait.
    x = torch.zeros(4, 4, device="cuda")
    x.fill_(1.0)
    x.add_(1)
    x.mul_(2)
    x.zero_()
    torch.ones(4, device="cuda").sum().item()
    torch.arange(4, dtype=torch.float32, device="cuda").reshape(2, 2)
    torch.cuda._sleep(1)
    torch.cuda.synchronize()


def slow_pinned_fill(torch, producer, value, count):
    """`count` pinned float32 zeros, filled with `value` by a device-to-host copy that `producer`
    queues after a long spin; returns (the pinned tensor, its device source)."""
    host = torch.zeros(count, dtype=torch.float32, pin_memory=True)
    with torch.cuda.stream(producer):
        x = torch.zeros(count, device="cuda")
        torch.cuda._sleep(SLOW_CYCLES)
        x.fill_(value)
        host.copy_(x, non_blocking=True)
    return host, x


def cuda_cupy():
    """CuPy with a CUDA device, or a skip that says why not."""
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("CuPy sees no CUDA device (GPU test)")
    except cupy.cuda.runtime.CUDARuntimeError as error:
        pytest.skip(f"CuPy sees no CUDA device (GPU test): {error}")
    return cupy


def documented_example(heading):
    """The first Python block after `heading` in docs/python.md."""
    text = (pathlib.Path(__file__).parents[2] / "docs" / "python.md").read_text()
    return re.search(r"```python\n(.*?)```", text[text.index(heading):], re.S).group(1)


def run_python(source, timeout=60, **environment):
    """Runs `source` in a fresh interpreter, with `environment` added to ours; returns the
    CompletedProcess (text output)."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONFAULTHANDLER="1", **environment)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(source)], capture_output=True,
                          text=True, timeout=timeout, env=env)


class PairSequence:
    """A sequence of two items that is neither a tuple nor a list."""

    def __init__(self, *items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        return self.items[index]


class ClosesOnIndex:
    """An integer (0) whose __index__ first closes `endpoint`: an argument read after its endpoint
    was looked up would get an answer from a closed one."""

    def __init__(self, endpoint):
        self.endpoint = endpoint

    def __index__(self):
        self.endpoint.close()
        return 0
