"""The type stub is generated from the extension at build time (nanobind's stubgen), installed
beside it, and names exactly what the extension defines, so that it cannot drift."""

import ast
import pathlib

import pytest

import holoscan_dlpack
from holoscan_dlpack import _core

STUB = pathlib.Path(holoscan_dlpack.__file__).with_name("_core.pyi")
PATTERNS = pathlib.Path(__file__).parents[2] / "python" / "stub_patterns.txt"


def stub_names():
    tree = ast.parse(STUB.read_text())
    names, members = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
        if isinstance(node, ast.ClassDef):
            members[node.name] = {
                item.name if isinstance(item, ast.FunctionDef)
                else item.targets[0].id if isinstance(item, ast.Assign) else item.target.id
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.Assign, ast.AnnAssign))} - {"__init__"}
    return names, members


PROTOCOL = {"__dlpack__", "__dlpack_device__", "__cuda_array_interface__",
            "__array_interface__", "__dlpack_c_exchange_api__"}


def test_stub_is_installed_with_py_typed():
    assert STUB.is_file()
    assert STUB.with_name("py.typed").is_file()


def test_stub_is_what_stubgen_makes_of_the_installed_module(tmp_path):
    stubgen = pytest.importorskip("nanobind.stubgen", reason="nanobind is not installed here")
    if not PATTERNS.is_file():
        pytest.skip(f"run from a source checkout ({PATTERNS} is missing)")
    fresh = tmp_path / "_core.pyi"
    stubgen.main(["-q", "-m", "holoscan_dlpack._core", "-p", str(PATTERNS), "-o", str(fresh)])
    assert STUB.read_text() == fresh.read_text(), "the installed stub is not the generated one"


def test_stub_covers_the_module():
    names, members = stub_names()
    module = {n for n in dir(_core) if not n.startswith("_")}
    assert module == {n for n in names if not n.startswith("_")}
    for cls in ("Tensor", "TensorPool", "DLDevice", "DLDataType"):
        defined = {n for n in vars(getattr(_core, cls))
                   if not n.startswith("_") or n in PROTOCOL}
        assert defined <= members[cls], cls
        assert not {n for n in members[cls] if not n.startswith("_")} - defined, cls
    for enum in ("PoolMemory", "DLDeviceType", "DLDataTypeCode", "ErrorCode"):
        assert {m.name for m in getattr(_core, enum)} == members[enum], enum


def test_stub_types_the_holoscan_api():
    text = STUB.read_text()
    for line in ("def as_tensor(obj: object, *, stream: object | None = None) -> Tensor:",
                 "def shape(self) -> tuple[int, ...]:",
                 "def device(self) -> DLDevice:",
                 "def dtype(self) -> DLDataType:",
                 "def is_read_only(self) -> bool:",
                 "def __dlpack_device__(self) -> tuple[int, int]:",
                 "__dlpack_c_exchange_api__: object = ...",
                 "class DLDeviceType(enum.IntEnum):",
                 "class ErrorCode(enum.IntEnum):"):
        assert line in text, line


def test_every_public_name_has_a_docstring():
    for name in holoscan_dlpack.__all__:
        value = getattr(holoscan_dlpack, name)
        if callable(value):
            assert (value.__doc__ or "").strip(), name
    for cls in (_core.Tensor, _core.TensorPool, _core.DLDevice, _core.DLDataType):
        for name, member in vars(cls).items():
            if not name.startswith("_") or name in ("__dlpack__", "__dlpack_device__"):
                assert (getattr(member, "__doc__", "") or "").strip(), f"{cls.__name__}.{name}"


def test_the_shipped_package_holds_no_test_hooks():
    assert not hasattr(_core, "_testing")
    package = pathlib.Path(holoscan_dlpack.__file__).parent
    assert not [p.name for p in package.iterdir() if "testing" in p.name]
