"""Arguments of the wrong type, or integers out of range, raise TypeError or
InvalidArgumentError naming the argument: never nanobind's RuntimeError("std::bad_cast"), which
says neither what was wrong nor where. Each refusal keeps nothing of what it was given."""

import sys

import pytest

import holoscan_dlpack as hd
from conftest import KDL_CPU, KDL_CUDA, PairSequence, run_python

np = pytest.importorskip("numpy")

HUGE = 2**64  # past every C integer the bindings read
NOT_A_STREAM = f"kInvalidArgument: stream {HUGE} is not a stream"


def host_tensor():
    return hd.as_tensor(np.arange(4.0))


def export_to_device(stream):
    """A host tensor's export as a device copy: the one host export that reads `stream`."""
    return host_tensor().__dlpack__(stream=stream, dl_device=(KDL_CUDA, 0), max_version=(1, 0))


def capsule_name(capsule):
    return repr(capsule).split('"')[1]


@pytest.mark.parametrize("max_version", [("1", 0), (1.0, 0), (1, "0"), (1, None)])
def test_max_version_of_non_integers_is_a_type_error(max_version):
    with pytest.raises(TypeError) as raised:
        host_tensor().__dlpack__(max_version=max_version)
    assert str(raised.value) == "max_version must be a tuple of (major, minor) integers, or None"


def test_max_version_is_a_tuple_of_two_integers():
    # Holoscan 5.0 (its binary, run): a tuple of two integers, NumPy's too; a list or another
    # sequence is a ValueError there, with the sentence below.
    writable = hd.TensorPool(memory="host", block_bytes=64, block_count=1).allocate((4,), "float32")
    assert capsule_name(writable.__dlpack__(max_version=(np.int64(1), np.int32(0)))) == (
        "dltensor_versioned")
    assert capsule_name(writable.__dlpack__(max_version=(0, 8))) == "dltensor"


@pytest.mark.parametrize("max_version", [[1, 0], PairSequence(1, 3), (1,), (1, 0, 0), [1],
                                         "10", b"10", 1, {1: 0, 0: 0}])
def test_max_version_of_another_shape_is_a_value_error(max_version):
    with pytest.raises(ValueError) as raised:
        host_tensor().__dlpack__(max_version=max_version)
    assert str(raised.value) == "max_version must be a tuple of (major, minor)"


def test_max_version_of_any_size_picks_the_capsule_by_its_sign():
    # The array API asks for a versioned capsule from a consumer of major version 1 or later.
    assert capsule_name(host_tensor().__dlpack__(max_version=(2**70, 0))) == "dltensor_versioned"
    writable = hd.TensorPool(memory="host", block_bytes=64, block_count=1).allocate((4,), "float32")
    assert capsule_name(writable.__dlpack__(max_version=(-(2**70), 0))) == "dltensor"


def test_dlpack_takes_its_four_arguments_by_keyword_only():
    t = host_tensor()
    with pytest.raises(TypeError, match=r"takes no positional arguments .* 1 given"):
        t.__dlpack__(None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'strem'"):
        t.__dlpack__(strem=None, max_version=(1, 0))
    # Keywords built at run time are not interned: matched by their text all the same.
    name = "".join(["max_", "version"])
    assert capsule_name(t.__dlpack__(**{name: (1, 0)})) == "dltensor_versioned"
    assert capsule_name(t.__dlpack__(stream=None, max_version=(1, 0), dl_device=None,
                                     copy=None)) == "dltensor_versioned"


def test_dlpack_of_a_tensor_never_initialized_is_a_type_error():
    blank = hd.Tensor.__new__(hd.Tensor)
    with pytest.raises(TypeError, match="never initialized"):
        blank.__dlpack__(max_version=(1, 0))
    with pytest.raises(TypeError, match="doesn't apply to a 'numpy.ndarray'"):
        hd.Tensor.__dlpack__(np.arange(3.0), max_version=(1, 0))


def blank_tensor_users():
    from holoscan_dlpack import ipc

    users = [
        ("from_dlpack", hd.from_dlpack),
        ("as_tensor", hd.as_tensor),
        ("Tensor.from_dlpack", hd.Tensor.from_dlpack),
        ("Tensor.as_tensor", hd.Tensor.as_tensor),
        ("ipc.Exporter.publish", lambda blank: ipc.Exporter().publish(1, blank)),
    ]
    try:
        from holoscan_dlpack import ucx
    except ImportError:
        return users
    return users + [("ucx.Worker.send", lambda blank: ucx.Worker().send(1, blank))]


@pytest.mark.parametrize("use", [use for _, use in blank_tensor_users()],
                         ids=[name for name, _ in blank_tensor_users()])
def test_imports_of_a_tensor_never_initialized_are_type_errors(use):
    blank = hd.Tensor.__new__(hd.Tensor)
    with pytest.raises(TypeError, match="never initialized"):
        use(blank)


def stream_users():
    t = host_tensor()
    return [
        export_to_device,
        lambda s: hd.from_dlpack(np.arange(3), stream=s),
        lambda s: hd.as_tensor(np.arange(3), stream=s),
        lambda s: t.set_readiness_stream(s),
        lambda s: t.copy(stream=s),
    ]


@pytest.mark.parametrize("use", range(5), ids=["__dlpack__", "from_dlpack", "as_tensor",
                                               "set_readiness_stream", "copy"])
@pytest.mark.parametrize("value", [HUGE, -(2**70)])
def test_stream_integers_out_of_range_are_not_streams(use, value):
    with pytest.raises(hd.errors.InvalidArgumentError) as raised:
        stream_users()[use](value)
    assert str(raised.value) == f"kInvalidArgument: stream {value} is not a stream"


class CudaStream:
    def __init__(self, *answer):
        self.answer = answer

    def __cuda_stream__(self):
        return self.answer


class Attribute:
    def __init__(self, name, value):
        setattr(self, name, value)


@pytest.mark.parametrize("stream, error, message", [
    (CudaStream(0, "1"), TypeError, "__cuda_stream__()[1] must be an integer, not str"),
    (CudaStream("0", 1), TypeError, "__cuda_stream__()[0] must be an integer, not str"),
    (CudaStream(HUGE, 1), hd.errors.InvalidArgumentError,
     f"kInvalidArgument: __cuda_stream__ protocol version must be 0, not {HUGE}"),
    (CudaStream(0, HUGE), hd.errors.InvalidArgumentError, NOT_A_STREAM),
    (Attribute("cuda_stream", "7"), TypeError, "stream.cuda_stream must be an integer, not str"),
    (Attribute("ptr", 7.0), TypeError, "stream.ptr must be an integer, not float"),
    (Attribute("ptr", HUGE), hd.errors.InvalidArgumentError, NOT_A_STREAM),
], ids=["handle-str", "version-str", "version-huge", "handle-huge", "cuda_stream-str",
        "ptr-float", "ptr-huge"])
def test_stream_objects_with_bad_values(stream, error, message):
    with pytest.raises(error) as raised:
        export_to_device(stream)
    assert str(raised.value) == message


class Interrupting:
    """A stream object whose every attribute lookup is interrupted (Ctrl-C in a property)."""

    def __getattr__(self, name):
        raise KeyboardInterrupt(name)


class InterruptingIndex:
    def __index__(self):
        raise KeyboardInterrupt("__index__")


class FailingIndex:
    def __index__(self):
        raise ValueError("its own error")


@pytest.mark.parametrize("stream, error, match", [
    (Interrupting(), KeyboardInterrupt, "__cuda_stream__"),
    (CudaStream(0, InterruptingIndex()), KeyboardInterrupt, "__index__"),
    (CudaStream(0, FailingIndex()), ValueError, "its own error"),
], ids=["attribute", "protocol-handle", "protocol-handle-error"])
def test_what_a_stream_objects_own_code_raises_reaches_the_caller(stream, error, match):
    """A property, __getattr__ or __index__ is Python code: what it raises (Ctrl-C among it) was
    swallowed and reported as "not a stream" or a TypeError."""
    for use in stream_users():
        with pytest.raises(error, match=match):
            use(stream)


class InterruptingDtypeStr:
    """A dtype-like object whose `str` (NumPy's type string, a property) is interrupted."""

    @property
    def str(self):
        raise KeyboardInterrupt("str")


def test_what_a_dtypes_own_str_raises_reaches_the_caller():
    """A dtype's `str` is read as hasattr() reads it: only AttributeError means "no dtype". A
    Ctrl-C in it was cleared and reported as a TypeError."""
    pool = hd.TensorPool(memory="host", block_bytes=64, block_count=1)
    with pytest.raises(KeyboardInterrupt, match="str"):
        pool.allocate((2,), InterruptingDtypeStr())
    with pytest.raises(TypeError, match="^dtype must be"):  # none at all: no dtype, as before
        pool.allocate((2,), object())


class InterruptingText(int):
    """An int too large for any argument, whose str() and repr() are interrupted."""

    def __str__(self):
        raise KeyboardInterrupt("__str__")

    __repr__ = __str__


class FailingText(int):
    """The same, whose str() and repr() fail as ordinary code can."""

    def __str__(self):
        raise ValueError("its own error")

    __repr__ = __str__


def test_a_ctrl_c_while_a_refusal_is_worded_reaches_the_caller():
    """A refusal's message shows the value with str(), else ascii(): a Ctrl-C there was cleared,
    and the refusal raised in its place. An ordinary failure still falls back to the type."""
    with pytest.raises(KeyboardInterrupt, match="__str__"):
        hd.TensorPool(memory="host", block_bytes=InterruptingText(2**70), block_count=1)
    with pytest.raises(KeyboardInterrupt, match="__str__"):
        host_tensor().__dlpack__(stream=InterruptingText(2**70))
    with pytest.raises(hd.errors.InvalidArgumentError, match="not <.*FailingText object>"):
        hd.TensorPool(memory="host", block_bytes=FailingText(2**70), block_count=1)


@pytest.mark.parametrize("stream", [CudaStream(0, True), Attribute("cuda_stream", True),
                                    Attribute("ptr", False)],
                         ids=["__cuda_stream__", "cuda_stream", "ptr"])
def test_a_bool_is_no_stream_handle_inside_a_stream_object_either(stream):
    with pytest.raises(TypeError, match="must be an integer, not a bool"):
        export_to_device(stream)


class RaisingLength(PairSequence):
    """A sequence whose __len__ raises `error`."""

    def __init__(self, error):
        super().__init__(0, 0)
        self.error = error

    def __len__(self):
        raise self.error


@pytest.mark.parametrize("argument", ["max_version", "dl_device"])
def test_a_sequence_that_is_no_tuple_is_refused_before_it_is_read(argument):
    """__dlpack__ takes tuples only (Holoscan 5.0): a sequence whose __len__ raises is refused as
    what it is, without running its code."""
    for error in (KeyboardInterrupt(), ValueError("its own error"), TypeError("no len")):
        with pytest.raises(ValueError, match=f"^{argument} must be a tuple of "):
            host_tensor().__dlpack__(**{argument: RaisingLength(error)})


def test_what_a_devices_own_length_raises_reaches_the_caller_of_copy_to():
    """copy_to reads any pair: whatever its __len__ raised (Ctrl-C among it) was cleared and
    reported as "not a pair" (a TypeError)."""
    with pytest.raises(KeyboardInterrupt):
        host_tensor().copy_to(RaisingLength(KeyboardInterrupt()))
    with pytest.raises(ValueError, match="its own error"):
        host_tensor().copy_to(RaisingLength(ValueError("its own error")))
    with pytest.raises(TypeError, match="device"):  # no length at all: no pair, as before
        host_tensor().copy_to(RaisingLength(TypeError("no len")))


@pytest.mark.parametrize("device, error, message", [
    (("1", 0), TypeError, "dl_device[0] must be an integer, not str"),
    ((KDL_CPU, 0.0), TypeError, "dl_device[1] must be an integer, not float"),
    ((2**40, 0), hd.errors.InvalidArgumentError,
     "kInvalidArgument: dl_device (1099511627776, 0) is not a device: its values are 32-bit"),
    ((KDL_CPU, -(2**40)), hd.errors.InvalidArgumentError,
     "kInvalidArgument: dl_device (1, -1099511627776) is not a device: its values are 32-bit"),
])
def test_dl_device_of_bad_values(device, error, message):
    with pytest.raises(error) as raised:
        host_tensor().__dlpack__(dl_device=device, max_version=(1, 0))
    assert str(raised.value) == message
    with pytest.raises(error) as raised:
        host_tensor().copy_to(device)
    assert str(raised.value) == message.replace("dl_device", "device")


@pytest.mark.parametrize("device", [[KDL_CPU, 0], PairSequence(KDL_CPU, 0),
                                    (np.int32(KDL_CPU), np.int64(0))],
                         ids=["list", "sequence", "numpy-integers"])
def test_dl_device_is_a_tuple_of_two_integers_and_a_copys_device_any_pair(device):
    # Holoscan 5.0 (its binary, run): __dlpack__'s dl_device is a tuple of two integers (a list is
    # a ValueError there); copy_to takes a DLDevice or any pair.
    t = host_tensor()
    if isinstance(device, tuple):
        assert capsule_name(t.__dlpack__(dl_device=device, max_version=(1, 0), copy=False)) == (
            "dltensor_versioned")
        with pytest.raises(BufferError, match="copy=False cannot satisfy a different dl_device"):
            t.__dlpack__(dl_device=(KDL_CUDA, 0), max_version=(1, 0), copy=False)
    else:
        with pytest.raises(ValueError, match=r"^dl_device must be a tuple of \(device_type, "):
            t.__dlpack__(dl_device=device, max_version=(1, 0))
    assert t.copy_to(device).device == hd.DLDevice(KDL_CPU, 0)


@pytest.mark.parametrize("device", [[KDL_CPU], [KDL_CPU, 0, 0], (KDL_CPU,), (KDL_CPU, 0, 0), "10",
                                    b"10", 5, {KDL_CPU: 0}])
def test_dl_device_of_another_shape_is_a_value_error(device):
    with pytest.raises(ValueError) as raised:
        host_tensor().__dlpack__(dl_device=device, max_version=(1, 0))
    assert str(raised.value) == "dl_device must be a tuple of (device_type, device_id)"


@pytest.mark.parametrize("device", [(KDL_CPU, 1), (KDL_CPU, 5)])
@pytest.mark.parametrize("copy", [None, True])
def test_a_host_device_other_than_zero_is_refused_not_taken_for_device_zero(device, copy):
    # A host tensor reports (1, 0); (1, 1) names no device, and was satisfied with (1, 0).
    with pytest.raises(hd.errors.InvalidArgumentError) as raised:
        host_tensor().__dlpack__(dl_device=device, max_version=(1, 0), copy=copy)
    assert str(raised.value) == (
        f"kInvalidArgument: Tensor copy target device is unsupported: dl_device (1, {device[1]}) "
        "names a host device other than 0")


@pytest.mark.parametrize("device", [(1, 1), (3, 2), (13, 7)])
def test_a_copy_to_a_host_device_other_than_zero_is_refused(device):
    # It was made on (1, 0): host memory has no device of its own.
    with pytest.raises(hd.errors.InvalidArgumentError) as raised:
        host_tensor().copy_to(device)
    assert str(raised.value) == (
        f"kInvalidArgument: Tensor::copy_to: Tensor copy target device is unsupported: "
        f"({device[0]}, {device[1]}) names a host device other than 0")


@pytest.mark.parametrize("stream", [0, -5, "x", 1.0, object()])
def test_a_host_export_refuses_what_is_no_stream_as_a_device_export_does(stream):
    # Holoscan 5.0 ignores the stream of a host export, but refuses one that is no stream first.
    with pytest.raises(Exception) as host_error:
        host_tensor().__dlpack__(stream=stream, max_version=(1, 0))
    with pytest.raises(Exception) as device_error:
        export_to_device(stream)
    assert type(host_error.value) is type(device_error.value)
    assert str(host_error.value) == str(device_error.value)
    for fine in (None, -1, 1, 2):
        assert capsule_name(host_tensor().__dlpack__(stream=fine, max_version=(1, 0))) == (
            "dltensor_versioned")


class Interface:
    """An object that exports `__array_interface__`: a NumPy array's, with some keys changed."""

    def __init__(self, **changes):
        self.base = np.arange(4.0)
        self.__array_interface__ = dict(self.base.__array_interface__, **changes)


@pytest.mark.parametrize("changes, error, message", [
    ({"data": (HUGE, False)}, hd.errors.InvalidArgumentError,
     f"kInvalidArgument: __array_interface__['data'][0] {HUGE} is not an address"),
    ({"data": ("0", False)}, TypeError,
     "__array_interface__['data'][0] must be an integer, not str"),
    ({"data": (0, "no")}, TypeError,
     "__array_interface__['data'] must be a (pointer, read_only) tuple"),
    ({"typestr": None}, TypeError, "__array_interface__['typestr'] must be a string"),
    ({"shape": (4.0,)}, TypeError, "shape[0] must be an integer, not float"),
    ({"shape": (HUGE,)}, hd.errors.InvalidArgumentError,
     f"kInvalidArgument: shape[0] {HUGE} does not fit 64 bits"),
    ({"strides": (2**63,)}, hd.errors.InvalidArgumentError,
     f"kInvalidArgument: strides[0] {2**63} does not fit 64 bits"),
    # No strides: the compact strides of these extents pass 2**63 (a zero extent counts as one).
    ({"shape": (0, 2**40, 2**40), "strides": None}, hd.errors.InvalidArgumentError,
     "kInvalidArgument: make_tensor_from_dlpack_versioned: shape: element count overflows int64"),
], ids=["data-huge", "data-str", "read-only-str", "typestr-none", "shape-float", "shape-huge",
        "strides-huge", "compact-strides-overflow"])
def test_array_interface_of_bad_values_keeps_no_reference(changes, error, message):
    exporter = Interface(**changes)
    references = sys.getrefcount(exporter)
    with pytest.raises(error) as raised:
        hd.as_tensor(exporter)
    assert str(raised.value) == message
    assert sys.getrefcount(exporter) == references, "a refused export is not kept"


@pytest.mark.parametrize("dtype, error, message", [
    ((2, "32", 1), TypeError, "a dtype tuple's bits must be an integer, not str"),
    ((2, 32, 1.0), TypeError, "a dtype tuple's lanes must be an integer, not float"),
    ((2, -32, 1), hd.errors.InvalidArgumentError,
     "kInvalidArgument: a dtype tuple's code and bits must fit 8 bits and lanes 16 bits"),
    ((2, 32, HUGE), hd.errors.InvalidArgumentError,
     "kInvalidArgument: a dtype tuple's code and bits must fit 8 bits and lanes 16 bits"),
], ids=["bits-str", "lanes-float", "bits-negative", "lanes-huge"])
def test_dtype_tuples_of_bad_values(dtype, error, message):
    pool = hd.TensorPool(memory="host", block_bytes=64, block_count=1)
    with pytest.raises(error) as raised:
        pool.allocate((4,), dtype)
    assert str(raised.value) == message


@pytest.mark.parametrize("shape, error, message", [
    ((4, 2.0), TypeError, "shape[1] must be an integer, not float"),
    ("44", TypeError, "shape must be a sequence of integers, not str"),
    (4, TypeError, "shape must be a sequence of integers, not int"),
    ([HUGE], hd.errors.InvalidArgumentError,
     f"kInvalidArgument: shape[0] {HUGE} does not fit 64 bits"),
], ids=["float-extent", "text", "int", "huge-extent"])
def test_pool_shapes_of_bad_values(shape, error, message):
    pool = hd.TensorPool(memory="host", block_bytes=64, block_count=1)
    with pytest.raises(error) as raised:
        pool.allocate(shape, "uint8")
    assert str(raised.value) == message


def test_dtype_objects_whose_str_is_no_string():
    class Dtype:
        str = 5

    pool = hd.TensorPool(memory="host", block_bytes=64, block_count=1)
    with pytest.raises(TypeError) as raised:
        pool.allocate((4,), Dtype())
    assert str(raised.value) == "dtype.str must be a string, such as NumPy's '<f4'"


@pytest.mark.parametrize("memory", [7, 3.5])
def test_pool_memory_of_another_type(memory):
    with pytest.raises(TypeError) as raised:
        hd.TensorPool(memory=memory, block_bytes=64, block_count=1)
    assert str(raised.value) == "memory must be 'device', 'host' or a PoolMemory"


def test_ucx_receive_pool_of_another_type():
    ucx = pytest.importorskip("holoscan_dlpack.ucx")
    with pytest.raises(TypeError) as raised:
        ucx.Worker(receive_pool=3)
    assert str(raised.value) == "receive_pool must be None or a TensorPool"


# An int whose str() is a lone surrogate, which UTF-8 cannot hold: nanobind's str::c_str() is null
# for it, and the refusals that name such a value made a std::string of that null.
UNPRINTABLE = """
    import numpy as np
    import holoscan_dlpack as hd

    class Unprintable(int):
        def __str__(self):
            return "\\ud800"

        __repr__ = __str__

    HUGE = Unprintable(2**70)
    base = np.arange(4.0)

    class Exporter:
        def __init__(self, **changes):
            self.__array_interface__ = dict(base.__array_interface__, **changes)

    class Producer:
        def __dlpack_device__(self):
            return (HUGE, 0)

    class Stream:
        def __cuda_stream__(self):
            return (HUGE, 5)

    try:
        {call}
    except Exception as error:
        print(type(error).__name__ + ": " + ascii(str(error)))
"""


@pytest.mark.parametrize("call, printed", [
    ("hd.as_tensor(Exporter(shape=(HUGE,)))",
     r"InvalidArgumentError: 'kInvalidArgument: shape[0] \\ud800 does not fit 64 bits'"),
    ("hd.as_tensor(Exporter(data=(HUGE, False)))",
     "InvalidArgumentError: \"kInvalidArgument: __array_interface__['data'][0] \\\\ud800 is not "
     "an address\""),
    ("hd.as_tensor(base).__dlpack__(dl_device=(HUGE, 0))",
     r"InvalidArgumentError: 'kInvalidArgument: dl_device (\\ud800, 0) is not a device: its "
     r"values are 32-bit'"),
    ("hd.from_dlpack(base, stream=HUGE)",
     r"InvalidArgumentError: 'kInvalidArgument: stream \\ud800 is not a stream'"),
    ("hd.from_dlpack(Producer())",
     r"BufferError: '__dlpack_device__() gave device type \\ud800, which is not a DLPack device "
     r"type (32 bits)'"),
    ("hd.from_dlpack(base, stream=Stream())",
     r"InvalidArgumentError: 'kInvalidArgument: __cuda_stream__ protocol version must be 0, not "
     r"\\ud800'"),
], ids=["shape", "data", "dl_device", "stream", "dlpack_device", "cuda_stream-version"])
def test_refusals_naming_an_unprintable_value_name_it_as_ascii(call, printed):
    # In a child: before, each ended in a segmentation fault (shape and dl_device were seen to)
    # or in RuntimeError "basic_string: construction from null is not valid" (stream, device).
    result = run_python(UNPRINTABLE.format(call=call))
    assert result.returncode == 0, result.stderr
    assert result.stdout == printed + "\n"


@pytest.mark.parametrize("call, error, message", [
    (lambda: hd.TensorPool(memory="\ud800", block_bytes=64, block_count=1),
     hd.errors.InvalidArgumentError,
     "kInvalidArgument: memory must be 'device' or 'host', not '\\ud800'"),
    (lambda: hd.TensorPool(memory="host", block_bytes=64, block_count=1).allocate((2,), "\ud800"),
     hd.errors.InvalidArgumentError, "kInvalidArgument: dtype '\\ud800' names no type"),
], ids=["pool-memory", "dtype"])
def test_text_that_utf8_cannot_hold_is_refused_as_a_value(call, error, message):
    # A lone surrogate made nanobind's string cast fail: RuntimeError "std::bad_cast".
    with pytest.raises(error) as raised:
        call()
    assert str(raised.value) == message


def test_a_dtype_compared_with_text_that_utf8_cannot_hold_is_unequal():
    with pytest.warns(DeprecationWarning):
        assert (host_tensor().dtype == "\ud800") is False


class Unnamed:
    """A class whose module's name is a lone surrogate, which UTF-8 cannot hold."""


Unnamed.__module__ = "\ud800"


class ReturnsUnnamed:
    def __dlpack_device__(self):
        return (KDL_CPU, 0)

    def __dlpack__(self, **kwargs):
        return Unnamed()


@pytest.mark.parametrize("call, message", [
    (lambda: hd.as_tensor(Unnamed()), "as_tensor: object does not support "
     "__dlpack_c_exchange_api__, __dlpack__, __cuda_array_interface__, or __array_interface__ "
     "(a Unnamed)"),
    (lambda: hd.from_dlpack(np.arange(3), stream=Unnamed()), "Invalid stream type: should be int, "
     "None, or object with callable __cuda_stream__ (or torch's `cuda_stream`, CuPy's `ptr`), not "
     "Unnamed"),
    (lambda: hd.TensorPool(memory="host", block_bytes=64, block_count=1).allocate(
        (Unnamed(),), "uint8"), "shape[0] must be an integer, not Unnamed"),
    (lambda: hd.from_dlpack(ReturnsUnnamed()),
     "__dlpack__ did not return a valid DLPack capsule: it returned Unnamed"),
], ids=["as_tensor", "stream", "shape", "dlpack-result"])
def test_refusals_naming_a_type_whose_module_utf8_cannot_hold_name_the_type(call, message):
    # The module's name made nanobind's type name text that str::c_str() cannot give: RuntimeError
    # "basic_string: construction from null is not valid".
    with pytest.raises(TypeError) as raised:
        call()
    assert str(raised.value) == message


@pytest.mark.parametrize("call", [
    lambda: hd.as_tensor(Interface(typestr="<\u00e98")),
    lambda: hd.TensorPool(memory="host", block_bytes=64, block_count=1).allocate((2,), "<\u00e98"),
], ids=["array-interface", "pool-dtype"])
def test_a_message_holding_part_of_a_character_is_raised_as_the_error_it_is(call):
    # The library names the type string's kind, one byte: the first of "\u00e9" in UTF-8. That
    # message is no UTF-8, and its conversion to a str raised UnicodeDecodeError instead.
    with pytest.raises(hd.errors.InvalidArgumentError) as raised:
        call()
    assert "unsupported dtype.kind '\\xc3' in '<\u00e98'" in str(raised.value)


# The pool's integers were read by nanobind's casters: a negative size, one past 64 bits or a
# device past 32 bits raised "__new__(): incompatible function arguments", naming none of them,
# and True was taken for 1.
@pytest.mark.parametrize("arguments, says", [
    ({"block_bytes": -1, "block_count": 1}, "block_bytes must be 0 to 2**64-1, not -1"),
    ({"block_bytes": 2**64, "block_count": 1},
     "block_bytes must be 0 to 2**64-1, not 18446744073709551616"),
    ({"block_bytes": 8, "block_count": -3}, "block_count must be 0 to 2**64-1, not -3"),
    ({"device": 2**31, "block_bytes": 8, "block_count": 1},
     "device must be a 32-bit device id, not 2147483648"),
])
def test_pool_integers_out_of_range_name_the_argument(arguments, says):
    for make in (hd.TensorPool, hd.TensorPool.create):
        with pytest.raises(hd.errors.InvalidArgumentError) as raised:
            make(memory="host", **arguments)
        assert str(raised.value) == "kInvalidArgument: TensorPool::create: " + says


@pytest.mark.parametrize("name", ["device", "block_bytes", "block_count"])
def test_pool_integers_are_no_bools_or_text(name):
    arguments = {"device": 0, "block_bytes": 8, "block_count": 1}
    for value, type_name in ((True, "bool"), ("8", "str")):
        with pytest.raises(TypeError) as raised:
            hd.TensorPool(memory="host", **{**arguments, name: value})
        assert str(raised.value) == f"{name} must be an integer, not {type_name}"


def test_pool_integers_take_any_index():
    class Eight:
        def __index__(self):
            return 8

    pool = hd.TensorPool(memory="host", block_bytes=Eight(), block_count=Eight())
    assert pool.allocate((2,), "float32").shape == (2,)


# Integers inside this package's own tuples were read without a bool check: a shape of
# (True, 2) allocated (1, 2), a dtype (True, 32, 1) was uint32 and copy_to((True, 0)) meant the
# CPU. (5.0's `__dlpack__(dl_device=...)` keeps taking them, as its caster does.)
def test_bools_are_no_integers_in_shapes_dtypes_and_copy_targets():
    pool = hd.TensorPool(memory="host", block_bytes=1024, block_count=2)
    cases = [
        (lambda: pool.allocate((2, True), "float32"), "shape[1] must be an integer, not bool"),
        (lambda: pool.allocate((2,), (True, 32, 1)),
         "a dtype tuple's code must be an integer, not bool"),
        (lambda: pool.allocate((2,), (2, 32, False)),
         "a dtype tuple's lanes must be an integer, not bool"),
        (lambda: host_tensor().copy_to((True, 0)), "device[0] must be an integer, not bool"),
        (lambda: host_tensor().copy_to((KDL_CPU, False)), "device[1] must be an integer, not bool"),
    ]
    for call, says in cases:
        with pytest.raises(TypeError) as raised:
            call()
        assert str(raised.value) == says
    assert pool.available_blocks() == 2, "a refusal kept a block"
    capsule = host_tensor().__dlpack__(dl_device=(True, 0), max_version=(1, 0))
    assert capsule_name(capsule) == "dltensor_versioned"


@pytest.mark.parametrize("value, type_name", [(0, "int"), (None, "NoneType"), ("yes", "str")])
def test_the_pool_flag_is_true_or_false(value, type_name):
    for make in (hd.TensorPool, hd.TensorPool.create):
        with pytest.raises(TypeError) as raised:
            make(memory="host", block_bytes=8, block_count=1, shareable=value)
        assert str(raised.value) == f"shareable must be True or False, not {type_name}"


def test_pool_integers_that_are_none_name_the_argument():
    with pytest.raises(TypeError) as raised:
        hd.TensorPool(memory="host", block_bytes=None, block_count=1)
    assert str(raised.value) == "block_bytes must be an integer, not NoneType"


# An __index__ that refuses (a float array's) made the value "out of range": InvalidArgumentError
# "shape[0] [1.] does not fit 64 bits". It is no integer: TypeError, its type named in full.
def test_a_value_whose_index_refuses_is_no_integer():
    pool = hd.TensorPool(memory="host", block_bytes=64, block_count=1)
    for value, type_name in ((np.array([1.0]), "numpy.ndarray"), (np.float64(1.0), "numpy.float64"),
                             (np.True_, "numpy.bool")):
        with pytest.raises(TypeError) as raised:
            pool.allocate((value,), "uint8")
        assert str(raised.value) == f"shape[0] must be an integer, not {type_name}"
    assert pool.allocate((np.int64(4),), "uint8").shape == (4,)
