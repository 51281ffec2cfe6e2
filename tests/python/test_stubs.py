"""The type stub names exactly what the extension defines, so that it cannot drift."""

import ast
import pathlib

import holoscan_dlpack
from holoscan_dlpack import _core

STUB = pathlib.Path(holoscan_dlpack.__file__).with_name("_core.pyi")


def stub_names():
    tree = ast.parse(STUB.read_text())
    names, members = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
        if isinstance(node, ast.ClassDef):
            members[node.name] = {item.name if not isinstance(item, ast.Assign)
                                  else item.targets[0].id
                                  for item in node.body
                                  if isinstance(item, (ast.FunctionDef, ast.Assign))} - {
                                      "__init__"}
    return names, members


PROTOCOL = {"__dlpack__", "__dlpack_device__", "__cuda_array_interface__",
            "__array_interface__"}


def test_stub_is_installed_with_py_typed():
    assert STUB.is_file()
    assert STUB.with_name("py.typed").is_file()


def test_stub_covers_the_module():
    names, members = stub_names()
    module = {n for n in dir(_core) if not n.startswith("_")}
    assert module == {n for n in names if not n.startswith("_")} - {"StreamLike", "DTypeLike"}
    for cls in ("Tensor", "TensorPool"):
        defined = {n for n in vars(getattr(_core, cls)) if not n.startswith("_") or n in PROTOCOL}
        assert defined == members[cls], cls
    assert {m.name for m in _core.PoolMemory} == members["PoolMemory"]


def test_every_public_name_has_a_docstring():
    for name in holoscan_dlpack.__all__:
        value = getattr(holoscan_dlpack, name)
        if callable(value):
            assert (value.__doc__ or "").strip(), name
    for cls in (_core.Tensor, _core.TensorPool):
        for name, member in vars(cls).items():
            if not name.startswith("_") or name in ("__dlpack__", "__dlpack_device__"):
                assert (getattr(member, "__doc__", "") or "").strip(), f"{cls.__name__}.{name}"
