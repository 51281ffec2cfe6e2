"""The DLPack value types of :class:`~holoscan_dlpack.Tensor`, where Holoscan 5.0 keeps them
(``holoscan.tensor``): ``DLDevice``, ``DLDataType`` and their IntEnums, and ``is_tensor_like``.
5.0's operator-framework types in that module (``InputSpec``, ``TensorLoan``, ...) are not part of
this package."""

import inspect

from ._core import DLDataType, DLDataTypeCode, DLDevice, DLDeviceType

__all__ = ["DLDataType", "DLDataTypeCode", "DLDevice", "DLDeviceType", "is_tensor_like"]

# Each entry is one protocol, present when the object has all of its names.
_PROTOCOLS = (("__dlpack_c_exchange_api__",), ("__dlpack__", "__dlpack_device__"),
              ("__cuda_array_interface__",), ("__array_interface__",))
_ABSENT = object()


def is_tensor_like(obj: object) -> bool:
    """Whether ``obj`` is convertible to a Tensor: it exposes the DLPack protocol (``__dlpack__``
    and ``__dlpack_device__``, or the DLPack C exchange API) or an array interface. The names are
    looked up without being read: an interface property (which may synchronize) is not run."""
    return any(all(inspect.getattr_static(obj, name, _ABSENT) is not _ABSENT for name in names)
               for names in _PROTOCOLS)
