"""Static shapes of a graph's inputs, declared by the user (``input_shape``).

A graph exported with inputs of unknown shape leaves passes unable to tell ranks
and dimensions.  Declaring the inputs' shapes (``data:-1,128,768``: -1 is a
dimension left dynamic) writes them into the placeholders' ``shape`` attributes
before fusing, so the cheap rank rules and the shape propagation both see
them.  The fused graph keeps the declared shapes: whatever was fused on the
strength of a declared shape is only valid for inputs of that shape, and
TensorFlow then refuses other feeds instead of computing something else.
"""
from __future__ import annotations

import difflib
import operator
from typing import TYPE_CHECKING, Mapping, Sequence

from ..parameters import ParameterError

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef

#: The ops whose ``shape`` attribute declares a graph input's shape.
SHAPED_INPUT_OPS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})

Dims = Sequence[int | None]
PARAMETER = "input_shapes"


def parse_shape_spec(spec: str | Mapping[str, Dims] | None) -> dict[str, list[int | None]]:
    """``"a:-1,8;b:0"`` -> ``{"a": [None, 8], "b": []}`` (-1: dynamic; ``0`` alone: a scalar)."""
    if spec is None or spec == "":
        return {}
    if not isinstance(spec, str):
        if not isinstance(spec, Mapping):
            raise ParameterError(PARAMETER, f"must be a mapping of input name to dimensions or a string "
                                 f"'name:d1,d2;...', not {type(spec).__name__}")
        return {str(k).split(":")[0]: _dims(str(k), v) for k, v in spec.items()}
    shapes: dict[str, list[int | None]] = {}
    for item in (i.strip() for i in spec.split(";")):
        if not item:
            continue
        name, sep, dims = item.rpartition(":")
        if not sep or not name.strip():
            raise ParameterError(PARAMETER, f"item {item!r} is not name:d1,d2,... (-1 for a dynamic dimension)")
        try:
            values = [int(d) for d in dims.split(",") if d.strip()]
        except ValueError:
            raise ParameterError(PARAMETER, f"item {item!r}: dimensions must be integers") from None
        if values == [0]:
            values = []
        if any(v == 0 or v < -1 for v in values):
            raise ParameterError(PARAMETER, f"item {item!r}: dimensions must be positive, or -1 for a dynamic one")
        shapes[name.strip()] = [None if v == -1 else v for v in values]
    return shapes


def _dims(name: str, dims: object) -> list[int | None]:
    """A shape given as a sequence of dimensions (None or -1: dynamic)."""
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence):
        raise ParameterError(PARAMETER, f"the shape of {_short(name)} must be a list of dimensions (None or -1 "
                             f"for a dynamic one), not {_short(repr(dims))}")
    out: list[int | None] = []
    for d in dims:
        try:
            value = None if d is None or isinstance(d, bool) else operator.index(d)  # numpy integers too
        except TypeError:
            value = None
        if d is None or value == -1:
            out.append(None)
        elif value is not None and value > 0:
            out.append(value)
        else:
            raise ParameterError(PARAMETER, f"the shape of {_short(name)}: dimension {_short(repr(d))} is no "
                                 "positive integer, None or -1")
    return out


def _short(text: str) -> str:
    return text if len(text) <= 80 else f"{text[:40]}...{text[-37:]}"


def _graph_shape(node: "NodeDef") -> list[int | None] | None:
    if "shape" not in node.attr or node.attr["shape"].shape.unknown_rank:
        return None
    return [d.size if d.size >= 0 else None for d in node.attr["shape"].shape.dim]


def _merged(name: str, declared: list[int | None], graph: list[int | None] | None) -> list[int | None]:
    """The declared shape with the graph's own known dimensions kept; a contradiction is an error."""
    shown = [-1 if d is None else d for d in declared]
    if graph is None:
        return declared
    if len(graph) != len(declared):
        raise ParameterError(PARAMETER, f"{name}:{shown} has rank {len(declared)}, the graph's {name} has rank "
                             f"{len(graph)} ({['?' if d is None else d for d in graph]})")
    merged = []
    for d, g in zip(declared, graph, strict=True):
        if d is not None and g is not None and d != g:
            raise ParameterError(PARAMETER, f"{name}:{shown} contradicts the graph's shape "
                                 f"{['?' if x is None else x for x in graph]}")
        merged.append(g if d is None else d)
    return merged


def declare_input_shapes(graph_def: "GraphDef", shapes: Mapping[str, Dims]) -> dict[str, list[int | None]]:
    """Write ``shapes`` into the ``shape`` attributes of the named placeholders of
    ``graph_def`` (in place) and return the shapes now declared (None: dynamic).
    Raises :class:`ParameterError` for a name that is no placeholder of the graph
    (with close names) or a shape the graph contradicts; nothing is written then."""
    if not shapes:
        return {}
    nodes = {node.name: node for node in graph_def.node if node.op in SHAPED_INPUT_OPS}
    missing = [n for n in shapes if n not in nodes]
    if missing:
        close = sorted({c for n in missing for c in difflib.get_close_matches(n, list(nodes), n=3, cutoff=0.5)})
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ParameterError(PARAMETER, f"{', '.join(missing)}: no placeholder of the graph has that name{hint}; "
                             f"placeholders: {', '.join(sorted(nodes)) or 'none'}")
    merged = {name: _merged(name, [None if d is None or d < 0 else d for d in dims], _graph_shape(nodes[name]))
              for name, dims in shapes.items()}
    for name, dims in merged.items():
        shape = nodes[name].attr["shape"].shape
        shape.Clear()
        for d in dims:
            shape.dim.add().size = -1 if d is None else d
    return merged
