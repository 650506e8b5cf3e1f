"""TensorFlow's protobuf messages (GraphDef, NodeDef, AttrValue, ...) without importing TensorFlow.

Importing ``tensorflow.core.framework.graph_pb2`` runs ``tensorflow/__init__.py``, which takes
seconds. The generated ``*_pb2.py`` modules of the installed TensorFlow each register one
serialized ``FileDescriptorProto`` with protobuf's default descriptor pool. This module reads
those bytes from the module's source text (the package is located, never executed), registers
the same bytes in the same pool, dependencies first, and builds the message classes from the
pool. When TensorFlow is imported later, its modules register identical bytes and receive the
very classes built here, so messages pass freely between the two.

When TensorFlow is already imported its descriptors are in the pool and are used as they are.
Should the source not be readable this way, the module is imported the ordinary way.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from functools import cache
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pool, message_factory

_FRAMEWORK = "tensorflow.core.framework"

#: The generated module that defines each message or enum, by its short name.
MODULE_OF: dict[str, str] = {
    "GraphDef": f"{_FRAMEWORK}.graph_pb2",
    "NodeDef": f"{_FRAMEWORK}.node_def_pb2",
    "AttrValue": f"{_FRAMEWORK}.attr_value_pb2",
    "NameAttrList": f"{_FRAMEWORK}.attr_value_pb2",
    "TensorProto": f"{_FRAMEWORK}.tensor_pb2",
    "TensorShapeProto": f"{_FRAMEWORK}.tensor_shape_pb2",
    "FunctionDef": f"{_FRAMEWORK}.function_pb2",
    "FunctionDefLibrary": f"{_FRAMEWORK}.function_pb2",
    "OpDef": f"{_FRAMEWORK}.op_def_pb2",
    "OpList": f"{_FRAMEWORK}.op_def_pb2",
    "VersionDef": f"{_FRAMEWORK}.versions_pb2",
    "DataType": f"{_FRAMEWORK}.types_pb2",
    "ConfigProto": "tensorflow.core.protobuf.config_pb2",
    "RunOptions": "tensorflow.core.protobuf.config_pb2",
}


class ProtoSourceError(Exception):
    """A generated module's serialized descriptor could not be read from its source."""


def message_class(name: str) -> Any:
    """The class of TensorFlow message ``name`` (a key of :data:`MODULE_OF`, e.g. ``"GraphDef"``)."""
    return _message_class(name)


def is_repeated(field: Any) -> bool:
    """Whether a field descriptor declares a repeated field (a map's too), in every protobuf version
    (``is_repeated`` from 5.28 on, ``label`` before)."""
    if hasattr(field, "is_repeated"):
        return bool(field.is_repeated)
    return bool(field.label == field.LABEL_REPEATED)  # pragma: no cover - protobuf before 5.28


def data_type_values() -> list[int]:
    """Every value of TensorFlow's ``DataType`` enum."""
    _register(MODULE_OF["DataType"])
    enum = descriptor_pool.Default().FindEnumTypeByName("tensorflow.DataType")
    return [v.number for v in enum.values]


@cache
def _message_class(name: str) -> Any:
    module = MODULE_OF.get(name)
    if module is None:
        raise KeyError(f"{name!r} is not a TensorFlow message scopefusion knows; known: {sorted(MODULE_OF)}")
    _register(module)
    return message_factory.GetMessageClass(descriptor_pool.Default().FindMessageTypeByName(f"tensorflow.{name}"))


@cache
def _register(module: str) -> None:
    """Make sure the descriptors of generated module ``module`` are in the default pool."""
    if module in sys.modules:  # imported already (TensorFlow is loaded): its descriptors are in the pool
        return
    try:
        serialized, dependencies = _read_descriptor(module)
    except (OSError, SyntaxError, ProtoSourceError):
        importlib.import_module(module)  # an unusual installation: the ordinary (slow) way
        return
    for dependency in dependencies:
        if dependency.startswith("google.protobuf"):
            importlib.import_module(dependency)  # protobuf's own well-known types
        else:
            _register(dependency)
    descriptor_pool.Default().AddSerializedFile(serialized)


def _read_descriptor(module: str) -> tuple[bytes, list[str]]:
    """The serialized FileDescriptorProto a generated module registers, and the generated
    modules it imports first, read from its source text."""
    tree = ast.parse(_module_path(module).read_text(encoding="utf-8"))
    serialized: bytes | None = None
    dependencies: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            dependencies += [f"{node.module}.{a.name}" for a in node.names if a.name.endswith("_pb2")]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "AddSerializedFile" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, bytes)):
            serialized = node.args[0].value
    if serialized is None:
        raise ProtoSourceError(f"{module}: no serialized descriptor found in its source")
    return serialized, dependencies


def _module_path(module: str) -> Path:
    """Where a generated module's source is, found without running any package's ``__init__``."""
    top, _, rest = module.partition(".")
    spec = importlib.util.find_spec(top)  # a top-level package: located, not executed
    if spec is None or not spec.submodule_search_locations:
        raise ProtoSourceError(f"{top} is not installed")
    for location in spec.submodule_search_locations:
        path = Path(location, *rest.split(".")).with_suffix(".py")
        if path.is_file():
            return path
    raise ProtoSourceError(f"{module}: no source file")
