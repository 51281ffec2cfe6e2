"""A DLPack producer's tensor owns its memory, so an import does not keep the producer object: a
producer that holds its own import (a cache of it, say) is collected like any object, also while
something else shares the memory (an export, a consumer's array). An array interface's import
does keep its exporting object (nothing else keeps that memory): a cycle through that reference
must be seen by the collector while a Tensor alone owns the memory, or the exporter and its memory
are never released; while something else shares the memory, the exporter must stay."""

import gc
import weakref

import pytest

import holoscan_dlpack as hd

np = pytest.importorskip("numpy")


class Producer:
    """A DLPack producer over a counted test capsule (or a NumPy array)."""

    def __init__(self, make):
        self.make = make

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        return self.make()


def test_a_producer_holding_its_own_import_is_collected(testing, collect):
    calls = testing.deleter_calls()
    producer = Producer(lambda: testing.make_capsule(shape=[4], gil_deleter=True))
    producer.tensor = hd.from_dlpack(producer)  # producer -> Tensor -> import -> producer
    alive = weakref.ref(producer)
    del producer
    gc.collect()
    assert alive() is None, "the cycle through the import was not collected"
    assert testing.deleter_calls() == calls + 1, "the producer's deleter runs once"
    collect()
    assert testing.deleter_calls() == calls + 1


def test_a_producer_is_collected_while_another_owner_shares_the_tensors_memory():
    array = np.arange(6.0)
    producer = Producer(lambda: array.__dlpack__(max_version=(1, 0)))
    producer.tensor = hd.from_dlpack(producer)
    export = np.from_dlpack(producer.tensor)  # NumPy now shares the memory
    alive = weakref.ref(producer)
    del producer, array
    gc.collect()
    assert alive() is None, "the import holds no reference to its producer"
    assert export.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], "the tensor kept the memory"


class InterfaceExporter:
    """An object with the NumPy array interface only (no DLPack)."""

    def __init__(self, array):
        self.array = array
        self.__array_interface__ = array.__array_interface__


def test_an_array_interface_exporter_holding_its_own_import_is_collected():
    exporter = InterfaceExporter(np.arange(4.0))
    exporter.tensor = hd.as_tensor(exporter)  # exporter -> Tensor -> import -> exporter
    assert exporter.tensor.is_read_only
    alive = weakref.ref(exporter)
    del exporter
    gc.collect()
    assert alive() is None, "the cycle through the array-interface import was not collected"


def test_an_array_interface_exporter_stays_while_another_owner_shares_the_memory():
    exporter = InterfaceExporter(np.arange(4.0))
    exporter.tensor = hd.as_tensor(exporter)
    export = np.from_dlpack(exporter.tensor)
    alive = weakref.ref(exporter)
    del exporter
    gc.collect()
    assert alive() is not None, "the memory's other owner still keeps the exporter"
    assert export.sum() == 6.0
    del export
    gc.collect()
    assert alive() is None
