"""Importing an object must not keep its type alive: the C exchange API lookup caches what it
found per type, and a cache that holds the type strongly keeps the class, its attributes and,
through its methods, the globals of the module that defined it, for the life of the process. A
Tensor kept in those globals then outlives the interpreter (nanobind reports it leaked at exit)."""

import gc
import weakref

import pytest

from conftest import run_python

import holoscan_dlpack as hd

np = pytest.importorskip("numpy")


def make_producer_type(base):
    """A fresh DLPack producer class, defined at run time (as a class in a function is)."""

    class Producer:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kwargs):
            return base.__dlpack__(**kwargs)

    return Producer


def make_interface_type(base):
    """A fresh class exposing only the NumPy array interface."""

    class Interface:
        def __init__(self):
            self.__array_interface__ = base.__array_interface__
            self.base = base

    return Interface


@pytest.mark.parametrize("make_type, entry", [(make_producer_type, hd.from_dlpack),
                                              (make_producer_type, hd.as_tensor),
                                              (make_interface_type, hd.as_tensor)],
                         ids=["dlpack-from_dlpack", "dlpack-as_tensor", "array_interface-as_tensor"])
def test_an_imported_producers_class_can_be_collected(make_type, entry):
    base = np.arange(6.0)
    # More types than any fixed cache holds, so that a slot freed by the collector is reused.
    for _ in range(20):
        producer_type = make_type(base)
        tensor = entry(producer_type())
        assert np.from_dlpack(tensor).sum() == base.sum()
        alive = weakref.ref(producer_type)
        del tensor, producer_type
        gc.collect()
        assert alive() is None, "the import keeps the producer's class alive"


def test_an_import_kept_beside_its_producers_class_is_freed_at_exit():
    result = run_python("""
        import numpy as np
        import holoscan_dlpack as hd

        class Producer:
            def __init__(self, array):
                self.array = array

            def __dlpack_device__(self):
                return (1, 0)

            def __dlpack__(self, **kwargs):
                return self.array.__dlpack__(**kwargs)

        kept = hd.from_dlpack(Producer(np.arange(4.0)))
        print("ran")
    """)
    assert result.returncode == 0, result.stderr
    assert "ran" in result.stdout, result.stdout
    assert "nanobind: leaked" not in result.stderr, result.stderr
