"""Type stubs of holoscan_dlpack._core, the nanobind extension."""

import enum
from collections.abc import Sequence
from typing import Any, Protocol, SupportsInt, Union

from typing_extensions import CapsuleType

class _TorchStream(Protocol):
    @property
    def cuda_stream(self) -> int: ...

class _CupyStream(Protocol):
    @property
    def ptr(self) -> int: ...

#: A CUDA stream: an integer handle (1 legacy default, 2 per-thread default) or a torch/CuPy
#: stream object; the DLPack calls also take None (legacy default) and -1 (no synchronization).
StreamLike = Union[int, _TorchStream, _CupyStream]
#: An element type: a NumPy type string ("<f4"), a name ("float32"), a numpy.dtype, or a DLPack
#: (code, bits, lanes) tuple.
DTypeLike = Union[str, tuple[int, int, int], Any]

HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR: int
HOLOSCAN_DLPACK_IMPL_VERSION_MINOR: int

class Tensor:
    """A handle to shared, owned tensor memory (holoscan::Tensor)."""

    @staticmethod
    def from_dlpack(
        obj: Any, *, stream: StreamLike | None = None, copy: bool | None = None
    ) -> Tensor:
        """Imports any DLPack producer (or capsule) zero-copy, ordered for `stream`."""
    @property
    def shape(self) -> tuple[int, ...]:
        """Extent of each dimension."""
    @property
    def strides(self) -> tuple[int, ...]:
        """Stride of each dimension in bytes."""
    @property
    def dtype(self) -> str:
        """NumPy type string, or the DLPack name of types NumPy lacks."""
    @property
    def dl_dtype(self) -> tuple[int, int, int]:
        """DLPack (code, bits, lanes)."""
    @property
    def device(self) -> tuple[int, int]:
        """(device_type, device_id), DLPack codes."""
    @property
    def size(self) -> int:
        """Number of elements."""
    @property
    def nbytes(self) -> int:
        """Bytes of the elements' payload."""
    @property
    def ndim(self) -> int:
        """Number of dimensions."""
    @property
    def itemsize(self) -> int:
        """Bytes of one element."""
    @property
    def data(self) -> int:
        """Address of the first element."""
    @property
    def read_only(self) -> bool:
        """Whether this tensor has read-only authority."""
    @property
    def flags(self) -> int:
        """The producer's DLPACK_FLAG_BITMASK_* bits."""
    @property
    def readiness_stream(self) -> int | None:
        """Handle of the stream readiness was recorded on, or None."""
    def is_contiguous(self) -> bool:
        """Whether the elements are compact and row-major."""
    def has_readiness_stream_contract(self) -> bool:
        """Whether a readiness point was recorded."""
    def set_readiness_stream(self, stream: StreamLike | None) -> bool:
        """Records the producer stream's current work as the readiness point."""
    def set_deallocation_stream(self, stream: StreamLike | None) -> bool:
        """Records a stream whose current work must finish before the memory is released."""
    def synchronize_for_consumer(self, stream: StreamLike | None) -> bool:
        """Makes `stream` wait for the readiness point; False when there is none."""
    def synchronize_for_host(self) -> bool:
        """Blocks until the readiness point completed; False when there is none."""
    def __dlpack__(
        self,
        *,
        stream: StreamLike | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[SupportsInt, int] | None = None,
        copy: bool | None = None,
    ) -> CapsuleType:
        """Exports a DLPack capsule zero-copy."""
    def __dlpack_device__(self) -> tuple[int, int]:
        """(device_type, device_id)."""
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CUDA array interface v3 of a device tensor."""
    @property
    def __array_interface__(self) -> dict[str, Any]:
        """NumPy array interface v3 of a host tensor."""

class PoolMemory(enum.Enum):
    """Where a TensorPool takes its blocks from."""

    kDevice = ...
    kHost = ...

class TensorPool:
    """Fixed-size blocks handed out as writable Tensors."""

    def __init__(
        self, *, memory: PoolMemory | str, device: int = 0, block_bytes: int, block_count: int
    ) -> None:
        """Allocates every block up front."""
    @staticmethod
    def create(
        *, memory: PoolMemory | str, device: int = 0, block_bytes: int, block_count: int
    ) -> TensorPool:
        """Same as the constructor."""
    def allocate(self, shape: Sequence[int], dtype: DTypeLike) -> Tensor:
        """A compact, writable tensor in a free block."""
    def available_blocks(self) -> int:
        """Blocks that could be handed out now."""
    @property
    def block_count(self) -> int:
        """Total blocks."""
    @property
    def block_bytes(self) -> int:
        """Bytes per block."""
    @property
    def reuse_count(self) -> int:
        """Allocations that reused a block."""
    @property
    def device(self) -> tuple[int, int]:
        """(device_type, device_id) of the pool's tensors."""

def as_tensor(obj: Any) -> Tensor:
    """A Tensor from a Tensor, a DLPack producer or capsule, or an array interface."""

def from_dlpack(obj: Any, *, stream: StreamLike | None = None, copy: bool | None = None) -> Tensor:
    """Imports a DLPack producer (or capsule) zero-copy, ordered for `stream`."""

def flush_deferred_releases() -> None:
    """Blocks until every release deferred before the call has run."""

def pending_deferred_releases() -> int:
    """Releases the library has queued and not yet run."""
