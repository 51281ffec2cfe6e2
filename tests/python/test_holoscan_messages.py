"""Refusals whose cause Holoscan 5.0 also refuses begin with (or contain) 5.0's own sentence, read
from its Python module (`holoscan/_core.abi3.so` of holoscan-core-cu13 5.0.0), so that code
matching 5.0's messages matches ours. The classes differ on purpose (docs/holoscan-5.0.md)."""

import re

import pytest

import holoscan_dlpack as hd
from conftest import KDL_CPU, KDL_CUDA
from test_bad_arguments import CudaStream, export_to_device, host_tensor

np = pytest.importorskip("numpy")

INVALID_STREAM = ("Invalid stream, valid stream should be -1 (non-blocking), 1 (legacy default "
                  "stream), 2 (per-thread default stream), or a positive integer (stream pointer)")


class NotCallable:
    __cuda_stream__ = 7


class Interface:
    def __init__(self, **fields):
        self.__array_interface__ = fields


def interface(**changes):
    base = np.arange(6, dtype=np.float64).reshape(2, 3)
    fields = dict(base.__array_interface__)
    fields.update(changes)
    for key in [key for key, value in changes.items() if value is KeyError]:
        del fields[key]
    return Interface(**fields), base


@pytest.mark.parametrize("call, error, sentence", [
    (lambda: export_to_device(0), hd.errors.InvalidArgumentError, INVALID_STREAM),
    (lambda: export_to_device(-7), hd.errors.InvalidArgumentError, INVALID_STREAM),
    (lambda: export_to_device(1.5), TypeError,
     "Invalid stream type: should be int, None, or object with callable __cuda_stream__"),
    (lambda: export_to_device(NotCallable()), TypeError,
     "Invalid stream type: __cuda_stream__ must be callable"),
    (lambda: export_to_device(CudaStream(0, 1, 2)), TypeError,
     "__cuda_stream__ must return a sequence with 2 elements"),
    (lambda: export_to_device(CudaStream(1, 5)), hd.errors.InvalidArgumentError,
     "__cuda_stream__ protocol version must be 0"),
    (lambda: export_to_device(CudaStream(0, -5)), hd.errors.InvalidArgumentError,
     "__cuda_stream__ stream pointer must be non-negative"),
    (lambda: hd.from_dlpack(np.arange(3), stream=-1), hd.errors.InvalidArgumentError,
     "Tensor import requires a readiness stream; stream=-1 is unsupported"),
    (lambda: hd.as_tensor(np.arange(3), stream=-1), hd.errors.InvalidArgumentError,
     "Tensor import requires a readiness stream; stream=-1 is unsupported"),
    (lambda: host_tensor().__dlpack__(max_version=(1,)), ValueError,
     "max_version must be a tuple of (major, minor)"),
    (lambda: host_tensor().__dlpack__(dl_device=(1,)), ValueError,
     "dl_device must be a tuple of (device_type, device_id)"),
    (lambda: host_tensor().__dlpack__(dl_device=(KDL_CUDA, 0), copy=False, max_version=(1, 0)),
     BufferError, "copy=False cannot satisfy a different dl_device request"),
    (lambda: hd.as_tensor(object()), TypeError,
     "object does not support __dlpack_c_exchange_api__, __dlpack__, __cuda_array_interface__, "
     "or __array_interface__"),
    (lambda: hd.from_dlpack(object()), AttributeError,
     "object does not support the __dlpack__ protocol"),
    (lambda: hd.as_tensor(None), TypeError,
     "object does not support __dlpack_c_exchange_api__, __dlpack__, __cuda_array_interface__, "
     "or __array_interface__"),
    (lambda: hd.from_dlpack(None), AttributeError,
     "object does not support the __dlpack__ protocol"),
], ids=["stream-zero", "stream-negative", "stream-float", "cuda_stream-not-callable",
        "cuda_stream-three-items", "cuda_stream-version", "cuda_stream-negative",
        "from_dlpack-no-sync", "as_tensor-no-sync", "max_version-one-item", "dl_device-one-item",
        "copy-false-other-device", "as_tensor-no-protocol", "from_dlpack-no-protocol",
    "as_tensor-none", "from_dlpack-none"])
def test_argument_refusals_carry_holoscans_sentence(call, error, sentence):
    with pytest.raises(error, match=re.escape(sentence)):
        call()


class Producer:
    def __init__(self, result):
        self.result = result

    def __dlpack_device__(self):
        return (KDL_CPU, 0)

    def __dlpack__(self, **kwargs):
        return self.result


def test_a_producer_returning_no_capsule_is_refused_with_holoscans_sentence():
    with pytest.raises(TypeError, match="^__dlpack__ did not return a valid DLPack capsule"):
        hd.from_dlpack(Producer(3))


def test_capsules_of_other_names_are_refused_with_holoscans_sentence(testing):
    import ctypes

    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    name = ctypes.c_char_p(b"foo")  # kept alive: a capsule keeps a pointer to its name
    foreign = new_capsule(ctypes.addressof(name), name, None)
    with pytest.raises(TypeError, match="^invalid DLPack capsule"):
        hd.from_dlpack(foreign)
    consumed = testing.make_capsule()
    hd.from_dlpack(consumed)
    with pytest.raises(BufferError, match="^invalid DLPack capsule"):
        hd.from_dlpack(consumed)


def test_a_capsule_name_that_is_not_utf8_is_named_in_escapes():
    # A capsule's name is any C string: the message must still be text Python can decode (it
    # raised UnicodeDecodeError instead of the TypeError).
    import ctypes

    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    name = ctypes.create_string_buffer(b"dl\xff\xfe\\tensor")  # kept alive with the capsule
    foreign = new_capsule(ctypes.addressof(name), name, None)
    with pytest.raises(TypeError) as raised:
        hd.from_dlpack(foreign)
    assert str(raised.value).startswith(
        "invalid DLPack capsule: a capsule named 'dl\\xff\\xfe\\x5ctensor' is not a DLPack capsule")


def test_another_major_version_is_refused_with_holoscans_sentence_and_kept_by_its_producer(
        testing):
    deleted = testing.deleter_calls()
    capsule = testing.make_capsule(major=2)
    with pytest.raises(BufferError, match="^unsupported DLPack major version 2"):
        hd.from_dlpack(capsule)
    assert testing.deleter_calls() == deleted, "a refused import must not run the deleter"
    del capsule
    assert testing.deleter_calls() == deleted + 1, "the capsule's own destructor frees it, once"


@pytest.mark.parametrize("changes, error, sentence", [
    ({"shape": KeyError}, TypeError, "array interface is missing required key 'shape'"),
    ({"typestr": KeyError}, TypeError, "array interface is missing required key 'typestr'"),
    ({"data": KeyError}, TypeError, "array interface is missing required key 'data'"),
    ({"shape": 6}, TypeError, "array interface shape must be a sequence"),
    ({"strides": 8}, TypeError, "array interface strides must be a sequence"),
    ({"strides": (8,)}, hd.errors.InvalidArgumentError,
     "array interface strides length must match shape rank"),
], ids=["no-shape", "no-typestr", "no-data", "shape-int", "strides-int", "strides-rank"])
def test_array_interface_refusals_carry_holoscans_sentence(changes, error, sentence):
    obj, _ = interface(**changes)
    with pytest.raises(error, match=re.escape(sentence)):
        hd.as_tensor(obj)


@pytest.mark.parametrize("shape, strides", [
    ([2, 3], None), ([2, 3], [24, 8]), ((2, 3), [8, 16]),
], ids=["list-shape", "list-both", "list-strides"])
def test_array_interface_shape_and_strides_may_be_any_sequence(shape, strides):
    # Holoscan 5.0 reads them as sequences (PySequence_Fast), a list as well as a tuple.
    obj, base = interface(shape=shape, strides=strides)
    tensor = hd.as_tensor(obj)
    assert tensor.shape == (2, 3)
    expected = base if strides is None or strides == [24, 8] else np.lib.stride_tricks.as_strided(
        base, shape=(2, 3), strides=tuple(strides))
    assert np.array_equal(np.from_dlpack(tensor), expected)


@pytest.mark.parametrize("copy", [None, True, False])
def test_a_read_only_tensor_is_refused_a_legacy_capsule_whatever_copy_asks(copy):
    # 5.0's __dlpack__ docstring: "BufferError - If the tensor is read-only and max_version does
    # not select a versioned capsule." A copy asked for was exported as a legacy capsule before.
    read_only = host_tensor()
    assert read_only.is_read_only
    with pytest.raises(BufferError, match="^Legacy DLPack cannot represent read-only Tensor "
                                          "authority or an active read lease"):
        read_only.__dlpack__(copy=copy)
    assert read_only.__dlpack__(copy=True, max_version=(1, 0)) is not None


@pytest.mark.parametrize("call", [
    lambda t: t.__dlpack__(dl_device=(KDL_CPU, -7), copy=False, max_version=(1, 0)),
    lambda t: t.__dlpack__(dl_device=(KDL_CUDA, -1), max_version=(1, 0)),
    lambda t: t.copy_to((KDL_CPU, -1)),
    lambda t: t.copy_to(hd.DLDevice(KDL_CPU, -1)),
], ids=["dlpack-cpu", "dlpack-cuda", "copy_to-cpu", "copy_to-DLDevice"])
def test_a_negative_device_id_names_no_device(call):
    # A host tensor took (kDLCPU, -7) as its own device and exported itself.
    with pytest.raises(hd.errors.InvalidArgumentError, match="is not a device: its id is negative"):
        call(host_tensor())
