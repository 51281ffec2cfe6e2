"""Owned, stream-ordered DLPack tensors for Python (holoscan-dlpack), with Holoscan's names.

``from_dlpack`` and ``as_tensor`` import tensors from PyTorch, CuPy, NumPy or any DLPack
producer zero-copy and read-only; ``Tensor`` exports them back through ``__dlpack__`` and the
array interfaces. A consumer ``stream`` is handed to the producer and recorded as the tensor's
readiness point, so that later consumers order themselves after it with one event wait.
"""

import enum as _enum

from ._core import (
    HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR,
    HOLOSCAN_DLPACK_IMPL_VERSION_MINOR,
    PoolMemory,
    Tensor,
    TensorPool,
    as_tensor,
    flush_deferred_releases,
    from_dlpack,
    pending_deferred_releases,
)

__version__ = "0.1.0"

#: DLPack version this build reads and writes, as ``(major, minor)``.
DLPACK_VERSION = (HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR, HOLOSCAN_DLPACK_IMPL_VERSION_MINOR)


class DLDeviceType(_enum.IntEnum):
    """DLPack device type codes, as returned in ``Tensor.device`` and ``__dlpack_device__()``."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17


__all__ = [
    "DLDeviceType",
    "DLPACK_VERSION",
    "HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR",
    "HOLOSCAN_DLPACK_IMPL_VERSION_MINOR",
    "PoolMemory",
    "Tensor",
    "TensorPool",
    "as_tensor",
    "flush_deferred_releases",
    "from_dlpack",
    "pending_deferred_releases",
]
