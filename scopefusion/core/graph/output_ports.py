"""Which output ports a node has, and checks of tensor names given by a user.

A TensorFlow op's outputs come from its ``OpDef`` in TensorFlow's op registry:
one tensor per output argument, or as many as the node's ``number_attr`` or
``type_list_attr`` attribute says.  A call of a function of the graph's
library has one output per output argument of the function.  For any other
op (a fused op, an op of a library that is not loaded) the count comes from
the node's ``_output_shapes`` attribute when it has one; otherwise it cannot be
told, and every port is accepted.
"""
from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Iterable, Sequence

from ..parameters import ParameterError
from .tf_ops import tensorflow_op_def
from .vocabulary import is_port

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef


def output_count(node: "NodeDef", functions: dict[str, int]) -> int | None:
    """How many outputs ``node`` has, or None when that cannot be told."""
    if node.op in functions:
        return functions[node.op]
    op_def = tensorflow_op_def(node.op)
    if op_def is None:
        shapes = node.attr.get("_output_shapes")
        return len(shapes.list.shape) if shapes is not None else None
    count = 0
    for arg in op_def.output_arg:
        if arg.number_attr:
            if arg.number_attr not in node.attr:
                return None
            count += node.attr[arg.number_attr].i
        elif arg.type_list_attr:
            if arg.type_list_attr not in node.attr:
                return None
            count += len(node.attr[arg.type_list_attr].list.type)
        else:
            count += 1
    return count


def split_tensor_name(tensor: str) -> tuple[str, int | None]:
    """``"a/b:1"`` -> ``("a/b", 1)``; ``"a/b"`` -> ``("a/b", 0)``; a port that is
    not a number gives ``None`` as port."""
    name, sep, port = tensor.rpartition(":")
    if not sep:
        return tensor, 0
    return (name, int(port)) if is_port(port) else (name, None)


def _close(name: str, names: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(names), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""


def check_tensor_names(graphs: Sequence["GraphDef"], tensors: Sequence[str], parameter: str) -> list[str]:
    """Check that every tensor of ``tensors`` names an existing output port of a
    node in at least one of ``graphs``; return them as ``node:port``.

    A node in no graph is an error suggesting close node names; a port the node
    does not have is an error saying how many outputs it has."""
    if not tensors:
        return []  # nothing to look up: the graphs' nodes are not gathered
    nodes: dict[str, "NodeDef"] = {}
    functions: dict[str, int] = {}
    for graph in graphs:
        functions.update({f.signature.name: len(f.signature.output_arg) for f in graph.library.function})
        for node in graph.node:
            nodes.setdefault(node.name, node)
    checked, problems = [], []
    for tensor in tensors:
        name, port = split_tensor_name(tensor.strip())
        if port is None:
            problems.append(f"{tensor!r} is not a tensor name (node or node:port)")
        elif name not in nodes:
            problems.append(f"no tensor {tensor!r}: the graph has no node {name!r}{_close(name, nodes)}")
        else:
            count = output_count(nodes[name], functions)
            if count is not None and port >= count:
                node = nodes[name]
                has = f"{count} output{'s' if count != 1 else ''}" + (f" (ports 0 to {count - 1})" if count > 1 else "")
                problems.append(f"no tensor {tensor!r}: node {name!r} ({node.op}) has {has}")
            else:
                checked.append(f"{name}:{port}")
    if problems:
        raise ParameterError(parameter, "; ".join(problems))
    return checked
