"""Sequences that lie about their length, or change while their items are read (an item's
__index__ runs Python code), never make the bindings read past their items or read items that
are gone. Each case runs in a child interpreter: before, each ended in a segmentation fault."""

from conftest import run_python


def test_array_interface_data_whose_len_lies_is_a_type_error():
    # A tuple subclass may answer len() as it likes; its items are what the tuple holds. Indexed
    # by len(), `data` was read past its last item (here: at the tuple's instance-dict slot).
    result = run_python("""
        import numpy as np
        import holoscan_dlpack as hd

        class Pair(tuple):
            def __len__(self):
                return 2

        class Exporter:
            def __init__(self):
                self.base = np.arange(4.0)
                self.__array_interface__ = dict(self.base.__array_interface__, data=Pair())

        try:
            hd.as_tensor(Exporter())
        except TypeError as error:
            print(error)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "__array_interface__['data'] must be a (pointer, read_only) tuple\n"


def test_a_shape_emptied_by_its_own_item_is_read_as_it_was():
    # nanobind's list caster reads the items in place: the first item's __index__ emptied the list
    # and its later items were read from freed memory (PYTHONMALLOC=debug overwrites it).
    result = run_python("""
        import holoscan_dlpack as hd

        shape = [None, 10**6 + 7, 3]

        class Extent:
            def __index__(self):
                shape.clear()
                return 1

        shape[0] = Extent()
        shape[1] += 1  # an int that only the list holds
        pool = hd.TensorPool(memory="host", block_bytes=1 << 24, block_count=1)
        print(pool.allocate(shape, "uint8").shape)
    """, PYTHONMALLOC="debug")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "(1, 1000008, 3)\n"
