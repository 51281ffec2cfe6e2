"""The README's Python example: the C++ operator of operator.cpp, from Python.

The README shows the part between the markers, verbatim: change both together (the test
readme.examples_are_shown_verbatim checks it). tests/python/test_readme_example.py runs it on host
memory with NumPy (any DLPack producer works the same: PyTorch, CuPy, ...).
"""

# readme-begin
import numpy as np

import holoscan_dlpack as hd

pool = hd.TensorPool(memory="host", block_bytes=1 << 16, block_count=4)


def scale(array, stream=None):
    """Hands on 2 * `array` (NumPy, or any DLPack producer: PyTorch, CuPy, ...) in a pool block."""
    tensor = hd.from_dlpack(array, stream=stream)  # zero-copy, read-only, ordered for `stream`
    out = pool.allocate(tensor.shape, tensor.dtype)  # writable: pool blocks carry writer authority
    np.multiply(np.from_dlpack(tensor), 2, out=np.asarray(out))
    return out  # any DLPack consumer takes it: np.from_dlpack(out), torch.from_dlpack(out), ...
# readme-end


if __name__ == "__main__":
    print(np.from_dlpack(scale(np.arange(4, dtype=np.float32))))  # [0. 2. 4. 6.]
