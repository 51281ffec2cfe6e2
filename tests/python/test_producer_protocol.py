"""The consumer side of the DLPack protocol against producers that behave and producers that do
not: one call of each method with the right keywords, the legacy fallback, capsules that must keep
ownership when rejected, and the consumer stream handed to device producers."""

import gc
import weakref

import pytest

import holoscan_dlpack as hd
from conftest import FLAG_READ_ONLY, KDL_CPU, KDL_CUDA, PairSequence, cuda_device_present
from null_deleter import null_deleter_capsule

np = pytest.importorskip("numpy")


class Recording:
    """Wraps a producer and records every protocol call it gets."""

    def __init__(self, inner, device=None):
        self.inner = inner
        self.device = device
        self.dlpack_calls = []
        self.device_calls = 0

    def __dlpack_device__(self):
        self.device_calls += 1
        return self.device if self.device is not None else self.inner.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        self.dlpack_calls.append(kwargs)
        if callable(self.inner):
            return self.inner()
        return self.inner.__dlpack__(**{k: v for k, v in kwargs.items() if k != "stream"})


def test_cpu_producer_is_called_once_without_a_stream():
    producer = Recording(np.arange(6.0))
    t = hd.from_dlpack(producer)
    assert producer.device_calls == 1
    assert len(producer.dlpack_calls) == 1
    kwargs = producer.dlpack_calls[0]
    # No dl_device: the producer's own device (Holoscan 5.0 names none either).
    assert kwargs == {"max_version": hd.DLPACK_VERSION, "copy": None}
    assert "stream" not in kwargs, "a host producer never gets a stream"
    assert t.is_read_only and not t.flags & FLAG_READ_ONLY  # authority, not the producer's flag
    hd.from_dlpack(producer, copy=False)
    assert producer.dlpack_calls[1]["copy"] is False


class StreamObject:
    """A framework stream object (torch's `cuda_stream`, CuPy's `ptr`)."""

    def __init__(self, attribute, value):
        setattr(self, attribute, value)


class CudaStreamProtocol:
    """The CUDA stream protocol: __cuda_stream__() -> (0, handle)."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


@pytest.mark.parametrize("import_, stream, passed", [
    (hd.from_dlpack, None, None),
    (hd.as_tensor, None, None),
    (hd.from_dlpack, 1, 1),
    (hd.as_tensor, 1, 1),
    (hd.from_dlpack, 2, 2),
    (hd.from_dlpack, 0x7F00DEAD, 0x7F00DEAD),
    (hd.from_dlpack, CudaStreamProtocol(0x7F00BEEF), 0x7F00BEEF),
    (hd.from_dlpack, CudaStreamProtocol(0), 1),  # the null stream is the legacy default
    (hd.from_dlpack, StreamObject("cuda_stream", 0x1234), 0x1234),
    (hd.from_dlpack, StreamObject("ptr", 0x5678), 0x5678),
    (hd.from_dlpack, StreamObject("cuda_stream", 0), 1),
])
def test_device_producer_gets_the_consumer_stream(testing, import_, stream, passed):
    if passed not in (None, -1, 1, 2) and cuda_device_present():
        pytest.skip("a made-up stream handle would reach a real driver (GPU tests use real ones)")
    producer = Recording(lambda: testing.make_capsule(device=(KDL_CUDA, 0)), device=(KDL_CUDA, 0))
    t = import_(producer, stream=stream)
    assert len(producer.dlpack_calls) == 1
    assert producer.dlpack_calls[0]["stream"] == passed
    assert producer.dlpack_calls[0]["max_version"] == hd.DLPACK_VERSION
    assert t.device == hd.DLDevice(KDL_CUDA, 0)
    if not cuda_device_present():
        # No driver: the readiness point cannot be recorded, which is not an error.
        assert not t.has_readiness_stream_contract() and t.readiness_stream is None


class CudaStreamAnswer:
    """A stream object whose __cuda_stream__() answers with the given object as it is."""

    def __init__(self, answer):
        self.answer = answer

    def __cuda_stream__(self):
        return self.answer


@pytest.mark.parametrize("answer", [[0, 1], PairSequence(0, 1), [0, 0]],
                         ids=["list", "sequence", "list-null-stream"])
@pytest.mark.parametrize("import_", [hd.from_dlpack, hd.as_tensor])
def test_cuda_stream_protocol_answers_any_sequence_of_two(testing, import_, answer):
    # Holoscan 5.0 reads __cuda_stream__()'s answer as a sequence (PySequence_Size == 2, then
    # PySequence_GetItem), so a list is as good as a tuple.
    producer = Recording(lambda: testing.make_capsule(device=(KDL_CUDA, 0)), device=(KDL_CUDA, 0))
    import_(producer, stream=CudaStreamAnswer(answer))
    assert producer.dlpack_calls[0]["stream"] == 1  # 1, or 0: the legacy default either way


@pytest.mark.parametrize("answer", [[0], [0, 1, 2], "01", b"01", 7, None],
                         ids=["one", "three", "str", "bytes", "int", "None"])
def test_cuda_stream_protocol_refuses_what_is_not_a_pair(answer):
    producer = Recording(np.arange(3.0))
    with pytest.raises(TypeError, match="__cuda_stream__ must return a sequence with 2 elements"):
        hd.from_dlpack(producer, stream=CudaStreamAnswer(answer))


def test_ambiguous_or_wrong_streams_are_refused(testing):
    producer = Recording(lambda: testing.make_capsule(device=(KDL_CUDA, 0)), device=(KDL_CUDA, 0))
    with pytest.raises(hd.errors.InvalidArgumentError, match="ambiguous"):
        hd.from_dlpack(producer, stream=0)
    with pytest.raises(hd.errors.InvalidArgumentError, match="ambiguous"):
        hd.as_tensor(producer, stream=0)
    with pytest.raises(hd.errors.InvalidArgumentError, match="not a stream"):
        hd.from_dlpack(producer, stream=-7)
    with pytest.raises(hd.errors.InvalidArgumentError, match="no readiness|stream=-1"):
        hd.from_dlpack(producer, stream=-1)
    with pytest.raises(hd.errors.InvalidArgumentError, match="as_tensor: Tensor import requires a readiness stream; stream=-1"):
        hd.as_tensor(producer, stream=-1)
    with pytest.raises(TypeError, match="stream"):
        hd.from_dlpack(producer, stream="default")
    with pytest.raises(TypeError, match="bool"):
        hd.from_dlpack(producer, stream=True)
    assert producer.dlpack_calls == [], "the producer is not asked before the arguments are good"


class HostInterface:
    """Only NumPy's array interface, of a NumPy array."""

    def __init__(self, array):
        self.__array_interface__ = array.__array_interface__


@pytest.mark.parametrize("make", [
    lambda testing: testing.make_capsule(device=(KDL_CUDA, 0)),
    lambda testing: np.arange(3.0),
    lambda testing: HostInterface(np.arange(3.0)),
    lambda testing: hd.from_dlpack(np.arange(3.0)),
    lambda testing: hd.TensorPool(memory="host", block_bytes=64, block_count=1).allocate(
        [2], "float32"),
], ids=["capsule", "dlpack", "array-interface", "read-only-tensor", "writable-tensor"])
def test_as_tensor_refuses_no_synchronization_on_every_path(testing, make):
    # Holoscan 5.0 parses every import stream with one rule: an import records a readiness
    # point, which -1 ("no synchronization") cannot give; as_tensor is no exception.
    source = make(testing)
    with pytest.raises(hd.errors.InvalidArgumentError, match="as_tensor: Tensor import requires a readiness stream; stream=-1"):
        hd.as_tensor(source, stream=-1)


def test_legacy_producer_is_asked_again_without_keywords():
    class Legacy:
        def __init__(self):
            self.calls = []
            self.array = np.arange(3, dtype=np.int8)

        def __dlpack_device__(self):
            return (KDL_CPU, 0)

        def __dlpack__(self, stream=None):
            self.calls.append(stream)
            return self.array.__dlpack__()  # a legacy "dltensor" capsule

    producer = Legacy()
    t = hd.from_dlpack(producer)
    assert producer.calls == [None], "one failed call with keywords, then exactly one without"
    assert t.flags == 0 and t.is_read_only
    np.testing.assert_array_equal(np.from_dlpack(t), producer.array)
    with pytest.raises(TypeError):
        hd.from_dlpack(producer, copy=True)  # a copy cannot be asked of it: no silent fallback


@pytest.mark.parametrize("device_type", [KDL_CPU, KDL_CUDA])
def test_a_producers_own_type_error_stays_the_context_of_the_retries(device_type):
    # A producer that takes the keywords and raises a TypeError of its own is asked again the
    # older ways (as 5.0 does); what they raise must not hide the first error.
    class Failing:
        def __init__(self):
            self.calls = 0

        def __dlpack_device__(self):
            return (device_type, 0)

        def __dlpack__(self, **kwargs):
            self.calls += 1
            if kwargs:
                raise TypeError("the producer's own complaint")
            raise TypeError("no keywords")

    producer = Failing()
    with pytest.raises(TypeError, match="no keywords") as raised:
        hd.from_dlpack(producer)
    assert producer.calls == (3 if device_type == KDL_CUDA else 2)
    context = raised.value.__context__
    assert isinstance(context, TypeError) and str(context) == "the producer's own complaint"


def test_legacy_device_producer_is_asked_again_with_the_stream_alone():
    # A producer from before DLPack 1.0 takes `stream` but not max_version: asked again with the
    # stream alone, it still orders its work for the consumer's stream (without it, some such
    # producers order nothing).
    class LegacyDevice:
        def __init__(self):
            self.calls = []
            self.array = np.arange(3, dtype=np.int8)

        def __dlpack_device__(self):
            return (KDL_CUDA, 0)

        def __dlpack__(self, stream=None):
            self.calls.append(stream)
            return self.array.__dlpack__()  # host bytes stand in for the device's

    producer = LegacyDevice()
    hd.from_dlpack(producer, stream=2)  # a real stream on a GPU machine too: the per-thread one
    assert producer.calls == [2], "one failed call with keywords, then one with the stream alone"

    class Oldest:  # takes nothing at all
        def __init__(self):
            self.calls = 0

        def __dlpack_device__(self):
            return (KDL_CUDA, 0)

        def __dlpack__(self):
            self.calls += 1
            return np.arange(3, dtype=np.int8).__dlpack__()

    oldest = Oldest()
    hd.from_dlpack(oldest, stream=2)
    assert oldest.calls == 1


def test_producer_errors_propagate():
    class Raising:
        def __dlpack_device__(self):
            return (KDL_CPU, 0)

        def __dlpack__(self, **kwargs):
            raise BufferError("cannot export this")

    with pytest.raises(BufferError, match="cannot export this"):
        hd.from_dlpack(Raising())

    class BadDevice:
        def __dlpack_device__(self):
            return "cpu"

        def __dlpack__(self, **kwargs):
            raise AssertionError("never reached")

    with pytest.raises(TypeError, match="__dlpack_device__"):
        hd.from_dlpack(BadDevice())

    with pytest.raises(AttributeError):
        hd.from_dlpack(object())


@pytest.mark.parametrize("device_type", [2**32 + KDL_CUDA, -(2**32) + KDL_CPU, 2**64])
def test_a_device_type_past_32_bits_is_refused_before_the_producer_is_called(device_type):
    # DLDeviceType is 32 bits: the type was cut to its low 32, so that 2**32 + 2 was taken for
    # CUDA and the producer was handed a consumer stream for a device it never named.
    producer = Recording(np.arange(6.0), device=(device_type, 0))
    with pytest.raises(BufferError) as raised:
        hd.from_dlpack(producer)
    assert str(raised.value) == (f"__dlpack_device__() gave device type {device_type}, which is "
                                 "not a DLPack device type (32 bits)")
    assert producer.dlpack_calls == []


@pytest.mark.parametrize("junk", [42, None, b"dltensor", "capsule"])
def test_producer_returning_junk_is_a_type_error(junk):
    class Junk:
        def __dlpack_device__(self):
            return (KDL_CPU, 0)

        def __dlpack__(self, **kwargs):
            return junk

    with pytest.raises(TypeError, match="^__dlpack__ did not return a valid DLPack capsule"):
        hd.from_dlpack(Junk())


def test_a_device_tensor_from_a_producer_that_reported_the_host_is_refused(testing, collect):
    # Reported the host, the producer is not handed the consumer's stream: a tensor of a device
    # whose work streams order was then ordered for no consumer, and is refused, not imported
    # without readiness. The capsule was consumed: its tensor is freed once.
    class ReportsTheHost:
        def __dlpack_device__(self):
            return (KDL_CPU, 0)

        def __dlpack__(self, **kwargs):
            assert "stream" not in kwargs
            return testing.make_capsule(device=(KDL_CUDA, 0))

    calls = testing.deleter_calls()
    with pytest.raises(BufferError, match="^__dlpack__ gave a tensor of device type 2 where "
                                          "__dlpack_device__\\(\\) reported 1"):
        hd.from_dlpack(ReportsTheHost())
    collect()
    assert testing.deleter_calls() == calls + 1


def test_a_host_tensor_from_a_producer_that_reported_a_device_is_imported(testing):
    # The other way round orders nothing wrongly: the host's memory is ready when it comes.
    producer = Recording(lambda: testing.make_capsule(device=(KDL_CPU, 0)), device=(KDL_CUDA, 0))
    assert hd.from_dlpack(producer).device.device_type == KDL_CPU
    assert "stream" in producer.dlpack_calls[0]


def capsule_name(capsule):
    return repr(capsule).split('"')[1]


def test_another_major_version_keeps_ownership(testing, collect):
    calls = testing.deleter_calls()
    capsule = testing.make_capsule(major=2, minor=0)
    with pytest.raises(BufferError, match="^unsupported DLPack major version 2 \\(DLPack 2.0"):
        hd.from_dlpack(capsule)
    assert capsule_name(capsule) == "dltensor_versioned", "a rejected capsule must not be renamed"
    collect()
    assert testing.deleter_calls() == calls, "nothing may free a rejected tensor but its capsule"
    del capsule
    assert testing.deleter_calls() == calls + 1, "the capsule frees its tensor once"
    collect()
    assert testing.deleter_calls() == calls + 1


@pytest.mark.parametrize("spec, match", [
    ({"flags": 1 << 40}, "flags"),
    ({"shape": [2, -3]}, "shape"),
    ({"dtype": (2, 0, 1)}, "bits"),
    ({"device": (99, 0)}, "device"),
    ({"null_data": True}, "data"),
    ({"versioned": False, "shape": [-1]}, "shape"),
], ids=["unknown-flag", "negative-extent", "zero-bits", "unknown-device", "null-data",
        "legacy-negative-extent"])
def test_rejected_content_keeps_ownership(testing, collect, spec, match):
    calls = testing.deleter_calls()
    capsule = testing.make_capsule(**spec)
    name = capsule_name(capsule)
    with pytest.raises(BufferError, match=match):
        hd.from_dlpack(capsule)
    assert capsule_name(capsule) == name
    collect()
    assert testing.deleter_calls() == calls
    del capsule
    assert testing.deleter_calls() == calls + 1


def test_accepted_capsule_is_renamed_and_freed_once(testing, collect):
    calls = testing.deleter_calls()
    capsule = testing.make_capsule(shape=[2, 2], gil_deleter=True)
    t = hd.from_dlpack(capsule)
    assert capsule_name(capsule) == "used_dltensor_versioned"
    del capsule
    assert testing.deleter_calls() == calls, "a consumed capsule no longer frees the tensor"
    del t
    assert testing.deleter_calls() == calls + 1
    collect()
    assert testing.deleter_calls() == calls + 1


def test_consumed_capsule_cannot_be_imported_twice(testing):
    capsule = testing.make_capsule()
    t = hd.from_dlpack(capsule)
    with pytest.raises(BufferError, match="already consumed"):
        hd.from_dlpack(capsule)
    assert t.shape == (4,)


def test_bare_capsule_asked_for_a_copy_is_refused_and_kept(testing, collect):
    # A capsule was exported already: importing it with copy=True would alias the producer's
    # memory, a "copy" that its producer's later writes change.
    calls = testing.deleter_calls()
    capsule = testing.make_capsule(shape=[3])
    with pytest.raises(BufferError, match="copy=True"):
        hd.from_dlpack(capsule, copy=True)
    assert capsule_name(capsule) == "dltensor_versioned", "a refused capsule must not be renamed"
    collect()
    assert testing.deleter_calls() == calls
    t = hd.from_dlpack(capsule, copy=False)  # zero-copy, as asked
    assert t.shape == (3,)
    del t, capsule
    collect()
    assert testing.deleter_calls() == calls + 1


def test_bare_capsule_takes_a_stream_for_its_readiness(testing):
    t = hd.from_dlpack(testing.make_capsule(device=(KDL_CUDA, 0)), stream=1)
    assert t.device == hd.DLDevice(KDL_CUDA, 0)
    assert t.has_readiness_stream_contract() == cuda_device_present()


class ArrayProducer:
    """A Python producer whose DLPack tensors are its NumPy array's (they own their memory)."""

    def __init__(self, size=8):
        self.array = np.arange(size)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        kwargs.pop("stream", None)
        return self.array.__dlpack__(**kwargs)


def test_a_producer_whose_tensor_owns_its_memory_is_not_kept():
    # As 5.0, torch and NumPy: the capsule's tensor keeps its memory; the object is not held.
    producer = ArrayProducer()
    w = weakref.ref(producer)
    t = hd.from_dlpack(producer)
    del producer
    gc.collect()
    assert w() is None
    assert np.asarray(t).tolist() == list(range(8)), "the memory lives with the import"


def test_a_producer_whose_tensor_has_no_deleter_lives_as_long_as_the_import():
    # DLPack allows a null deleter: then only the producer object can be keeping the memory.
    class Producer:
        def __init__(self):
            self.array = np.arange(6, dtype=np.float32)

        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kwargs):
            return null_deleter_capsule(self, self.array.ctypes.data, [6])

    producer = Producer()
    w = weakref.ref(producer)
    t = hd.from_dlpack(producer)
    del producer
    gc.collect()
    assert w() is not None, "nothing else keeps its memory"
    assert np.asarray(t).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    del t
    gc.collect()
    assert w() is None


def test_a_producer_that_keeps_a_view_of_its_own_import_is_collected():
    # The view's base (our Tensor) was held by the array, which the collector cannot see into:
    # with the producer held by its import, the cycle was never freed (a leak of every frame).
    class Frame(ArrayProducer):
        def __init__(self):
            super().__init__(1000)
            self.view = np.asarray(hd.from_dlpack(self))
            self.capsule = hd.from_dlpack(self).__dlpack__(max_version=(1, 0))

    frames = [Frame() for _ in range(5)]
    alive = [weakref.ref(frame) for frame in frames]
    del frames
    gc.collect()
    assert [ref() for ref in alive] == [None] * 5
