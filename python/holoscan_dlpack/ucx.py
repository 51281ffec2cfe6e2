"""Tensors across hosts over UCX (the C++ ``holoscan::ucx``).

A :class:`Worker` listens (``listen(address, port)``) or connects (``connect(address, port)``),
sends Tensors to its peers (``send(peer, tensor)``: a Tensor, or anything
:func:`~holoscan_dlpack.as_tensor` takes) and receives theirs (``receive(timeout_ms)``: a
:class:`Received` with ``peer``, ``sequence`` and ``tensor``). Data leaves only once its
readiness point has passed, the worker holds each tensor sent until UCX is done with its memory,
and every send ends as exactly one :class:`SendResult` (``next_send_result()``). Received tensors
land in memory the receiver owns: blocks of a ``receive_pool`` (host or device), else host
memory. Every wait lets go of the GIL. See docs/python.md, "Across hosts", and docs/ucx.md.

UCX's own settings come from its environment variables, read when a Worker is made (``UCX_TLS``
picks the transports); ``UCX_MODULE_DIR`` is read when the package is imported.
"""

from . import _core

if not hasattr(_core, "ucx"):
    raise ImportError(
        "holoscan_dlpack was built without UCX: holoscan::dlpack_ucx is built when UCX's CMake "
        "package is found (scripts/install-deps.sh unpacks it into .deps/ucx; or put it on "
        "CMAKE_PREFIX_PATH), then reinstall", name=__name__)

from ._core.ucx import (  # noqa: E402 -- only once the extension is known to have them
    UCX_LIBRARY_DIR,
    Received,
    SendResult,
    Worker,
    WorkerStats,
)

__all__ = ["Received", "SendResult", "UCX_LIBRARY_DIR", "Worker", "WorkerStats"]
