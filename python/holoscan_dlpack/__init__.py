"""Owned, stream-ordered DLPack tensors for Python (holoscan-dlpack), with Holoscan 5.0's names.

``from_dlpack`` and ``as_tensor`` import tensors from PyTorch, CuPy, NumPy or any DLPack
producer zero-copy and read-only; ``Tensor`` exports them back through ``__dlpack__``, the DLPack
C exchange API and the array interfaces. A consumer ``stream`` is handed to the producer and
recorded as the tensor's readiness point, so that later consumers order themselves after it with
one event wait. Failures are raised as the :mod:`holoscan_dlpack.errors` class of their code.
:mod:`holoscan_dlpack.ipc` hands device tensors to other processes. See docs/python.md.
"""

import importlib
from importlib import metadata as _metadata

from . import errors
from ._core import (
    HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR,
    HOLOSCAN_DLPACK_IMPL_VERSION_MINOR,
    DLDataType,
    DLDataTypeCode,
    DLDevice,
    DLDeviceType,
    PoolMemory,
    Tensor,
    TensorPool,
    as_tensor,
    flush_deferred_releases,
    from_dlpack,
    pending_deferred_releases,
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
    "Tensor",
    "TensorPool",
    "as_tensor",
    "errors",
    "flush_deferred_releases",
    "from_dlpack",
    "ipc",
    "pending_deferred_releases",
]


def __getattr__(name):
    """Imports :mod:`holoscan_dlpack.ipc` on first use (it brings multiprocessing's pickler)."""
    if name == "ipc":
        return importlib.import_module(".ipc", __name__)  # binds it here: asked only once
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
