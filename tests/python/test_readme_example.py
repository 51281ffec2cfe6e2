"""The README's Python example (examples/readme/operator.py) run as written, on NumPy host data."""

import gc
import importlib.util
import pathlib

import pytest

np = pytest.importorskip("numpy")

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "readme" / "operator.py"


@pytest.fixture
def example():
    spec = importlib.util.spec_from_file_location("readme_operator", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_scale_doubles_its_input_into_a_pool_block(example):
    source = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = example.scale(source)
    assert out.shape == (3, 4) and not out.is_read_only
    np.testing.assert_array_equal(np.from_dlpack(out), 2 * source)
    np.testing.assert_array_equal(source, np.arange(12, dtype=np.float32).reshape(3, 4))
    assert example.pool.available_blocks() == 3, "the result holds one block"


def test_dropped_results_give_their_blocks_back(example):
    for value in range(3 * example.pool.block_count):  # more results than the pool has blocks
        out = example.scale(np.full(8, value, dtype=np.float64))
        np.testing.assert_array_equal(np.from_dlpack(out), np.full(8, 2.0 * value))
        del out
        gc.collect()
    assert example.pool.available_blocks() == example.pool.block_count
    assert example.pool.reuse_count > 0


def test_example_prints_the_doubled_range(example, capsys):
    exec(compile(EXAMPLE.read_text(), str(EXAMPLE), "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out.strip() == "[0. 2. 4. 6.]"
