"""What the Python API accepts as a model: a path, a ``GraphDef`` or a loaded model, made one
:class:`LoadedModel` (a caller's ``GraphDef`` is copied and checked, never changed)."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Union

from google.protobuf.message import DecodeError, EncodeError

from ..errors import ScopeFusionError
from .io import LoadedModel, load_model
from .protos import message_class
from .validate import validate_graph

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

ModelLike = Union[str, "os.PathLike[str]", "GraphDef", LoadedModel]


def as_model(model: ModelLike, signature: str | None) -> LoadedModel:
    if isinstance(model, LoadedModel):
        return model
    if isinstance(model, (str, os.PathLike)):
        return load_model(model, signature)
    graph_def_class = message_class("GraphDef")
    if isinstance(model, graph_def_class):
        return LoadedModel(checked_copy(model, graph_def_class), "<GraphDef>", "graph_def")
    raise ScopeFusionError(f"cannot fuse a {type(model).__name__}; give a path or a GraphDef")


def checked_copy(model: "GraphDef", graph_def_class: Any) -> "GraphDef":
    """A copy of the caller's graph (never changed), checked as a loaded file is: refused with the
    node named.  The copy is parsed from the graph's bytes, which validation then reads again (as
    for a file); a graph protobuf cannot read back (nested too deeply) is copied and checked
    node by node, which says why."""
    copy = graph_def_class()
    try:
        data = model.SerializeToString()
        copy.ParseFromString(data)
    except (DecodeError, EncodeError, ValueError):  # too deep to read back, or too large to write
        copy.CopyFrom(model)
        validate_graph(copy)
        return copy
    validate_graph(copy, serialized=data)
    return copy
