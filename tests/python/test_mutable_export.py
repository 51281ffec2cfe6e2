"""Holoscan 5.0's one mutable export at a time, from Python: while a writable Tensor's DLPack
export lives, another export of it raises with 5.0's sentence; the export's end frees it; read-only
Tensors and Python's read-only wrapper (``as_tensor`` of a writable Tensor) take no claim."""

import gc

import numpy as np
import pytest

import holoscan_dlpack as hd


@pytest.fixture
def writable():
    pool = hd.TensorPool(memory="host", block_bytes=256, block_count=2)
    t = pool.allocate([4], "float32")
    assert not t.is_read_only
    return t


def test_a_second_export_waits_for_the_first_to_end(writable):
    first = np.from_dlpack(writable)
    for export in (lambda: writable.__dlpack__(max_version=(1, 0)), lambda: writable.__dlpack__()):
        with pytest.raises(BufferError, match="active mutable DLPack export|active read lease"):
            export()
    first[:] = 3.0  # the one writer writes
    del first
    gc.collect()
    np.testing.assert_array_equal(np.from_dlpack(writable), np.full(4, 3.0, np.float32))


def test_an_unconsumed_capsule_holds_the_claim_until_it_goes(writable):
    capsule = writable.__dlpack__(max_version=(1, 0))
    with pytest.raises(BufferError, match="active mutable DLPack export"):
        writable.__dlpack__(max_version=(1, 0))
    del capsule
    gc.collect()
    assert np.from_dlpack(writable).flags.writeable


def test_the_read_only_wrapper_takes_no_claim(writable):
    wrapper = hd.as_tensor(writable)
    assert wrapper is not writable and wrapper.is_read_only
    readers = [np.from_dlpack(wrapper) for _ in range(3)]  # read-only: any number of exports
    assert not any(r.flags.writeable for r in readers)
    writer = np.from_dlpack(writable)  # the writable tensor's own export is still free
    assert writer.flags.writeable
    writer[:] = 5.0
    np.testing.assert_array_equal(readers[0], np.full(4, 5.0, np.float32))
