"""Which protocol as_tensor and from_dlpack take an object through (Holoscan 5.0's order: the
DLPack C exchange API, then __dlpack__, then __cuda_array_interface__, then
__array_interface__), and what importing a Tensor of our own gives."""

import pytest

import holoscan_dlpack as hd
from conftest import KDL_CPU, helpers

np = pytest.importorskip("numpy")


class Calls:
    """Counts which protocol of a fake producer was used."""

    def __init__(self):
        self.used = []


def dlpack_only(calls, array):
    class DLPackOnly:
        def __dlpack_device__(self):
            return (KDL_CPU, 0)

        def __dlpack__(self, **kwargs):
            calls.used.append("__dlpack__")
            return array.__dlpack__(**kwargs)

    return DLPackOnly()


def with_interfaces(base, calls, array, cuda=True, host=True):
    """A subclass of `base` that also has the array interfaces, counting their use."""
    members = {}
    if cuda:
        def cuda_interface(self):
            calls.used.append("__cuda_array_interface__")
            return dict(array.__array_interface__, version=3, stream=None)
        members["__cuda_array_interface__"] = property(cuda_interface)
    if host:
        def host_interface(self):
            calls.used.append("__array_interface__")
            return array.__array_interface__
        members["__array_interface__"] = property(host_interface)
    return type("WithInterfaces", (base,), members)


def test_dlpack_comes_before_both_interfaces():
    calls, a = Calls(), np.arange(4.0)
    producer = dlpack_only(calls, a)
    producer.__class__ = with_interfaces(type(producer), calls, a)
    t = hd.as_tensor(producer)
    assert calls.used == ["__dlpack__"]
    assert t.data == a.ctypes.data


def test_cuda_array_interface_comes_before_array_interface():
    calls, a = Calls(), np.arange(4.0)
    both = with_interfaces(object, calls, a)()
    hd.as_tensor(both)
    assert calls.used == ["__cuda_array_interface__"]


@pytest.mark.parametrize("cuda, host, used", [
    (True, False, "__cuda_array_interface__"), (False, True, "__array_interface__"),
])
def test_each_interface_alone(cuda, host, used):
    calls, a = Calls(), np.arange(6, dtype=np.int32)
    t = hd.as_tensor(with_interfaces(object, calls, a, cuda=cuda, host=host)())
    assert calls.used == [used]
    assert t.data == a.ctypes.data and t.is_read_only


def test_dlpack_alone():
    calls, a = Calls(), np.arange(3)
    assert hd.as_tensor(dlpack_only(calls, a)).data == a.ctypes.data
    assert calls.used == ["__dlpack__"]


def test_c_exchange_api_comes_first():
    testing = helpers()
    if not hasattr(testing.ExchangeProducer, "__dlpack_c_exchange_api__"):
        pytest.skip("built against a dlpack.h older than 1.3 (no C exchange API)")
    calls = Calls()
    a = np.arange(4.0)
    producer = with_interfaces(testing.ExchangeProducer, calls, a)([4])
    exchanged, _ = testing.exchange_counts()
    t = hd.as_tensor(producer)
    assert testing.exchange_counts()[0] == exchanged + 1
    assert producer.dlpack_calls == 0 and calls.used == []
    assert t.shape == (4,)


def test_a_class_given_or_losing_the_exchange_api_after_an_import_is_looked_up_again():
    # The table is looked up once per type, not per import: a class changed since (the attribute
    # set, or deleted, on it) was still imported by what it had at its first import.
    table = getattr(hd.Tensor, "__dlpack_c_exchange_api__", None)
    if table is None:
        pytest.skip("built against a dlpack.h older than 1.3 (no C exchange API)")
    calls, a = Calls(), np.arange(4.0)
    changing = with_interfaces(object, calls, a, cuda=False)
    for _ in range(2):  # the second import finds the first one's entry
        assert hd.as_tensor(changing()).data == a.ctypes.data
    changing.__dlpack_c_exchange_api__ = table  # a table that takes only its own Tensors
    for _ in range(2):
        with pytest.raises(TypeError, match="expected a holoscan_dlpack.Tensor object"):
            hd.as_tensor(changing())
    del changing.__dlpack_c_exchange_api__
    assert hd.as_tensor(changing()).data == a.ctypes.data
    assert calls.used == ["__array_interface__"] * 3


class HalfDLPack:
    """__dlpack__ without __dlpack_device__: not the DLPack protocol, which is both methods."""

    def __dlpack__(self, **kwargs):
        raise AssertionError("half of the DLPack protocol was taken for all of it")


def test_dlpack_without_its_device_method_is_passed_over_for_an_interface():
    # Holoscan 5.0's as_tensor takes the DLPack path only when both __dlpack__ and
    # __dlpack_device__ are there; otherwise it goes on to the array interfaces.
    calls, a = Calls(), np.arange(4.0)
    producer = with_interfaces(HalfDLPack, calls, a, cuda=False)()
    t = hd.as_tensor(producer)
    assert calls.used == ["__array_interface__"]
    assert t.data == a.ctypes.data


def test_dlpack_without_its_device_method_and_nothing_else_is_a_type_error():
    with pytest.raises(TypeError, match="does not support __dlpack_c_exchange_api__, __dlpack__"):
        hd.as_tensor(HalfDLPack())


def test_nothing_to_import_is_a_type_error():
    with pytest.raises(TypeError, match="__dlpack_c_exchange_api__, __dlpack__, "
                                        "__cuda_array_interface__, or __array_interface__"):
        hd.as_tensor(object())
    with pytest.raises(AttributeError):
        hd.from_dlpack(object())  # from_dlpack asks for DLPack only


@pytest.mark.parametrize("import_", [hd.as_tensor, hd.from_dlpack, hd.Tensor.as_tensor,
                                     hd.Tensor.from_dlpack])
def test_a_read_only_tensor_imports_as_itself(import_):
    t = hd.from_dlpack(np.arange(5))
    assert t.is_read_only
    assert import_(t) is t
    assert import_(t, stream=1) is t


@pytest.mark.parametrize("import_", [hd.as_tensor, hd.from_dlpack, hd.Tensor.as_tensor,
                                     hd.Tensor.from_dlpack])
def test_a_writable_tensor_imports_as_a_new_read_only_wrapper(import_):
    pool = hd.TensorPool(memory="host", block_bytes=256, block_count=1)
    writer = pool.allocate([4], "int32")
    wrapper = import_(writer)
    assert wrapper is not writer
    assert wrapper.is_read_only and not writer.is_read_only
    assert (wrapper.data, wrapper.shape, wrapper.dtype) == (writer.data, writer.shape,
                                                            writer.dtype)
    assert import_(wrapper) is wrapper
    del writer
    assert pool.available_blocks() == 0, "the wrapper keeps the block"
    del wrapper
    assert pool.available_blocks() == 1


def test_integer_zero_is_invalid_for_every_import():
    t = hd.from_dlpack(np.arange(2))
    for import_ in (hd.as_tensor, hd.from_dlpack):
        with pytest.raises(hd.errors.InvalidArgumentError, match="ambiguous"):
            import_(t, stream=0)
        with pytest.raises(hd.errors.InvalidArgumentError, match="ambiguous"):
            import_(np.arange(2), stream=0)
