"""The type stubs are generated from the extension at build time (nanobind's stubgen, one file per
submodule), installed beside it, and name exactly what the extension defines, so that they cannot
drift."""

import ast
import pathlib

import pytest

import holoscan_dlpack
from conftest import UCX_PLUGINS
from holoscan_dlpack import _core

STUBS = pathlib.Path(holoscan_dlpack.__file__).with_name("_core")
STUB = STUBS / "__init__.pyi"
SUBMODULES = {name: getattr(_core, name) for name in ("ipc", "ucx") if hasattr(_core, name)}
PATTERNS = pathlib.Path(__file__).parents[2] / "python" / "stub_patterns.txt"


def stub_names(stub=STUB):
    tree = ast.parse(stub.read_text())
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


def test_the_ucx_submodule_is_built_where_the_checkout_has_ucx():
    # scripts/install-deps.sh unpacked UCX, so `pip install .` must have found it.
    if UCX_PLUGINS.is_dir():
        assert "ucx" in SUBMODULES, ("UCX is in .deps/ucx but holoscan_dlpack was built without "
                                     "it: reinstall with -Ccmake.define.HOLOSCAN_DLPACK_WITH_UCX=ON")


def test_stub_is_installed_with_py_typed():
    assert STUB.is_file()
    assert {p.name for p in STUBS.iterdir()} == {"__init__.pyi", *(f"{n}.pyi" for n in SUBMODULES)}
    assert STUBS.with_name("py.typed").is_file()


def test_stub_is_what_stubgen_makes_of_the_installed_module(tmp_path):
    stubgen = pytest.importorskip("nanobind.stubgen", reason="nanobind is not installed here")
    if not PATTERNS.is_file():
        pytest.skip(f"run from a source checkout ({PATTERNS} is missing)")
    stubgen.main(["-q", "-r", "-m", "holoscan_dlpack._core", "-p", str(PATTERNS), "-O",
                  str(tmp_path)])
    fresh = {p.name: p.read_text() for p in (tmp_path / "_core").iterdir()}
    installed = {p.name: p.read_text() for p in STUBS.iterdir()}
    assert installed == fresh, "the installed stubs are not the generated ones"


def assert_classes_covered(module, members, classes):
    for cls in classes:
        defined = {n for n in vars(getattr(module, cls)) if not n.startswith("_") or n in PROTOCOL}
        assert defined <= members[cls], cls
        assert not {n for n in members[cls] if not n.startswith("_")} - defined, cls


def test_stub_covers_the_module():
    names, members = stub_names()
    module = {n for n in dir(_core) if not n.startswith("_")}
    assert module == {n for n in names if not n.startswith("_")} | set(SUBMODULES)
    assert_classes_covered(_core, members, ("Tensor", "TensorPool", "DLDevice", "DLDataType"))
    for enum in ("PoolMemory", "DLDeviceType", "DLDataTypeCode", "ErrorCode"):
        assert {m.name for m in getattr(_core, enum)} == members[enum], enum


@pytest.mark.parametrize("name", sorted(SUBMODULES))
def test_stubs_cover_the_submodules(name):
    submodule = SUBMODULES[name]
    names, members = stub_names(STUBS / f"{name}.pyi")
    assert {n for n in dir(submodule) if not n.startswith("_")} == names
    assert_classes_covered(submodule, members, members)


def test_stub_types_the_holoscan_api():
    text = STUB.read_text()
    for line in ("def as_tensor(obj: object, *, stream: object | None = None) -> Tensor:",
                 "def shape(self) -> tuple[int, ...]:",
                 "def device(self) -> DLDevice:",
                 "def dtype(self) -> DLDataType:",
                 "def is_read_only(self) -> bool:",
                 "def __dlpack__(self, *, stream: object | None = None, max_version: "
                 "tuple[int, int] | None = None, dl_device: tuple[int, int] | None = None, "
                 "copy: bool | None = None) -> object:",
                 "def __dlpack_device__(self) -> tuple[int, int]:",
                 "__dlpack_c_exchange_api__: object = ...",
                 "class DLDeviceType(enum.IntEnum):",
                 "class ErrorCode(enum.IntEnum):",
                 "from holoscan_dlpack._core import ipc as ipc"):
        assert line in text, line
    ipc = (STUBS / "ipc.pyi").read_text()
    for line in ("def pair() -> tuple[Channel, Channel]:",
                 "def accept(self, timeout_ms: int | None = None) -> Channel | None:",
                 "def publish(self, peer: int, tensor: object, stream: object | None = None) "
                 "-> int:",
                 "def receive(self, timeout_ms: int | None = None) -> "
                 "holoscan_dlpack._core.Tensor | None:",
                 "def __enter__(self) -> Importer:"):
        assert line in ipc, line


def test_the_ucx_stub_types_its_worker():
    if "ucx" not in SUBMODULES:
        pytest.skip("holoscan_dlpack was built without UCX")
    text = (STUBS / "ucx.pyi").read_text()
    for line in ("def send(self, peer: int, tensor: object) -> int:",
                 "def receive(self, timeout_ms: int | None = None) -> Received | None:",
                 "def accept(self, timeout_ms: int | None = None) -> int | None:",
                 "def tensor(self) -> holoscan_dlpack._core.Tensor:",
                 "def error(self) -> Exception | None:",
                 "def __enter__(self) -> Worker:"):
        assert line in text, line


def test_every_public_name_has_a_docstring():
    for name in holoscan_dlpack.__all__:
        value = getattr(holoscan_dlpack, name)
        if callable(value):
            assert (value.__doc__ or "").strip(), name
    submodule_classes = [getattr(module, name) for module in SUBMODULES.values()
                         for name in dir(module) if isinstance(getattr(module, name), type)]
    for cls in (_core.Tensor, _core.TensorPool, _core.DLDevice, _core.DLDataType,
                _core.ReleaseThreadOptions, *submodule_classes):
        for name, member in vars(cls).items():
            if not name.startswith("_") or name in ("__dlpack__", "__dlpack_device__"):
                assert (getattr(member, "__doc__", "") or "").strip(), f"{cls.__name__}.{name}"


def test_the_shipped_package_holds_no_test_hooks():
    assert not hasattr(_core, "_testing") and not hasattr(_core.ipc, "_testing")
    package = pathlib.Path(holoscan_dlpack.__file__).parent
    assert not [p.name for p in package.iterdir() if "testing" in p.name]


def test_a_build_without_ucx_answers_hasattr_rather_than_raising(monkeypatch):
    # hasattr() and getattr(..., None) swallow AttributeError only: the ImportError of a build
    # without UCX escaped them.
    import importlib
    import sys

    monkeypatch.delattr(holoscan_dlpack, "ucx", raising=False)
    monkeypatch.delitem(sys.modules, "holoscan_dlpack.ucx", raising=False)
    monkeypatch.delattr(_core, "ucx", raising=False)
    assert not hasattr(holoscan_dlpack, "ucx")
    assert getattr(holoscan_dlpack, "ucx", None) is None
    with pytest.raises(AttributeError, match="built without UCX"):
        holoscan_dlpack.ucx
    with pytest.raises(ImportError, match="built without UCX"):
        importlib.import_module("holoscan_dlpack.ucx")
