"""DLPack capsules whose tensor has no deleter (DLPack allows a null one): nothing but the object
that made them keeps their memory, so an import must keep that object. Built with ctypes; the
structures live on `keeper`, which must outlive every import of them (the import keeps it)."""

import ctypes


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _Tensor)]


_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)


def null_deleter_capsule(keeper, data, shape, dtype=(2, 32, 1), device=(1, 0)):
    """A versioned capsule over `data` (an address) of compact `shape`, without deleter; its
    structures are appended to `keeper.capsule_parts`."""
    extents = (ctypes.c_int64 * len(shape))(*shape)
    managed = _Managed(1, 0, None, None, 0, _Tensor(data, _Device(*device), len(shape),
                                                     _DataType(*dtype), extents, None, 0))
    keeper.__dict__.setdefault("capsule_parts", []).extend((extents, managed))
    return _new_capsule(ctypes.addressof(managed), b"dltensor_versioned", None)
