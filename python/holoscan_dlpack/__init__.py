"""Owned, stream-ordered DLPack tensors for Python (holoscan-dlpack), with Holoscan 5.0's names.

``from_dlpack`` and ``as_tensor`` import tensors from PyTorch, CuPy, NumPy or any DLPack
producer zero-copy and read-only; ``Tensor`` exports them back through ``__dlpack__``, the DLPack
C exchange API and the array interfaces. A consumer ``stream`` is handed to the producer and
recorded as the tensor's readiness point, so that later consumers order themselves after it with
one event wait. Failures are raised as the :mod:`holoscan_dlpack.errors` class of their code.
:mod:`holoscan_dlpack.ipc` hands device tensors to other processes, :mod:`holoscan_dlpack.ucx`
(when built with UCX) sends tensors to other hosts. See docs/python.md.
"""

import importlib
import os
import signal
from importlib import metadata as _metadata

from . import _core, errors, tensor
from ._core import (
    HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR,
    HOLOSCAN_DLPACK_IMPL_VERSION_MINOR,
    DLDataType,
    DLDataTypeCode,
    DLDevice,
    DLDeviceType,
    PoolMemory,
    ReleaseThreadOptions,
    Tensor,
    TensorPool,
    as_tensor,
    failed_releases,
    flush_deferred_releases,
    from_dlpack,
    pending_deferred_releases,
    release_thread_options,
    set_release_thread_options,
)
from .errors import ErrorCode, HoloscanError

__version__ = _metadata.version("holoscan-dlpack")  # from VERSION, through the package metadata

#: DLPack version this build reads and writes, as ``(major, minor)``.
DLPACK_VERSION = (HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR, HOLOSCAN_DLPACK_IMPL_VERSION_MINOR)

__all__ = [
    "DLDataType",
    "DLDataTypeCode",
    "DLDevice",
    "DLDeviceType",
    "DLPACK_VERSION",
    "ErrorCode",
    "HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR",
    "HOLOSCAN_DLPACK_IMPL_VERSION_MINOR",
    "HoloscanError",
    "PoolMemory",
    "ReleaseThreadOptions",
    "Tensor",
    "TensorPool",
    "as_tensor",
    "errors",
    "failed_releases",
    "flush_deferred_releases",
    "from_dlpack",
    "ipc",
    "pending_deferred_releases",
    "release_thread_options",
    "set_release_thread_options",
    "tensor",
]


def __getattr__(name):
    """Imports :mod:`holoscan_dlpack.ipc` (it brings multiprocessing's pickler) and
    :mod:`holoscan_dlpack.ucx` on first use."""
    if name in ("ipc", "ucx"):
        try:
            return importlib.import_module("." + name, __name__)  # binds it: asked only once
        except ImportError as error:  # built without UCX: hasattr() and getattr(..., None) work
            raise AttributeError(str(error)) from error
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _give_back_hangup():
    """UCX, loaded with the extension when it is built in, installs a handler of its own for
    SIGHUP (UCX_DEBUG_SIGNO) as it loads: a process that imported this package would no longer end
    on a hang-up. Python's own record of SIGHUP is untouched by that, so it is installed again
    (unless UCX_DEBUG_SIGNO asks UCX for a signal; only the main thread can; None means C code
    set the handler before, which cannot be told apart from UCX's)."""
    previous = signal.getsignal(signal.SIGHUP)
    if hasattr(_core, "ucx") and "UCX_DEBUG_SIGNO" not in os.environ and previous is not None:
        try:
            signal.signal(signal.SIGHUP, previous)
        except ValueError:  # imported on another thread: UCX's handler stays
            pass


_give_back_hangup()
