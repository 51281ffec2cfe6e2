"""The DLPack value types of :class:`~holoscan_dlpack.Tensor`, where Holoscan 5.0 keeps them
(``holoscan.tensor``): ``DLDevice``, ``DLDataType`` and their IntEnums, and ``is_tensor_like``.
5.0's operator-framework types in that module (``InputSpec``, ``TensorLoan``, ...) are not part of
this package."""

from inspect import getattr_static as _getattr_static

from ._core import DLDataType, DLDataTypeCode, DLDevice, DLDeviceType

__all__ = ["DLDataType", "DLDataTypeCode", "DLDevice", "DLDeviceType", "is_tensor_like"]

# Each entry is one protocol, present when the object has all of its names. The DLPack C exchange
# API is a type's attribute (DLPack's rule; as_tensor and Holoscan 5.0 look it up on the type).
_EXCHANGE_API = "__dlpack_c_exchange_api__"
_PROTOCOLS = (("__dlpack__", "__dlpack_device__"), ("__cuda_array_interface__",),
              ("__array_interface__",))
_ABSENT = object()


def _dynamic_lookup(cls: type) -> bool:
    """Whether instances of ``cls`` may have attributes that no class or instance dict holds:
    its ``__getattr__`` (a proxy's forwarding) or its own ``__getattribute__``."""
    return (_getattr_static(cls, "__getattr__", _ABSENT) is not _ABSENT
            or _getattr_static(cls, "__getattribute__") is not object.__getattribute__)


def _has(obj: object, name: str, dynamic: bool) -> bool:
    if _getattr_static(obj, name, _ABSENT) is not _ABSENT:
        return True
    if not dynamic:
        return False
    try:  # only a dynamic lookup can answer; as_tensor asks the object the same way
        return hasattr(obj, name)
    except Exception:  # noqa: BLE001 - an attribute that cannot be read is not exposed
        return False


def is_tensor_like(obj: object) -> bool:
    """Whether ``obj`` is convertible to a Tensor: it exposes the DLPack protocol (``__dlpack__``
    and ``__dlpack_device__``, or the DLPack C exchange API) or an array interface. The names are
    looked up without being read: an interface property (which may synchronize) is not run. An
    object whose class answers attributes dynamically (``__getattr__``, as proxies forward them,
    or its own ``__getattribute__``) is asked for the names it holds nowhere else."""
    cls = type(obj)
    if _has(cls, _EXCHANGE_API, _dynamic_lookup(type(cls))):
        return True
    dynamic = _dynamic_lookup(cls)
    return any(all(_has(obj, name, dynamic) for name in names) for names in _PROTOCOLS)
