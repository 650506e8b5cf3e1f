"""A segment's body as a ``FunctionDef`` of the graph's library.

The body holds copies of the segment's nodes (names kept) and of the constants it reads.
Inside a function a tensor is named ``node:argument:index`` (the output argument of the
producer's op definition), a function argument by its name; the segment's arguments are
``arg_0, arg_1, ...`` and its results ``ret_0, ...`` in the order of the segment's boundary
(:mod:`.boundary`).  Control inputs from outside the segment are dropped here: the call
node waits for them instead.

A tensor whose dtype cannot be told (an op defined nowhere), or a ref tensor crossing
the border (the reference refuses those too: "Ref Tensors (e.g., Variables) are not
supported as args"), is a :class:`PartitionError` naming the node.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..graph.index import GraphIndex
from ..graph.protos import message_class
from ..graph.vocabulary import CONTROL, dtype_name
from .boundary import SegmentBoundary, Tensor
from .edges import REF_OFFSET, EdgeTypes
from .errors import PartitionError

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.function_pb2 import FunctionDef

_COLOCATE = "_class"
_ARG_NAME = re.compile(r"[a-z][a-z0-9_]*")


def port_names(count: int, stem: str, taken: set[str]) -> list[str]:
    """``stem_0, stem_1, ...`` (argument names as functions allow them), none in ``taken``."""
    prefix = stem
    while any(name.startswith(prefix + "_") for name in taken if _ARG_NAME.fullmatch(name)):
        prefix += "_"
    return [f"{prefix}_{k}" for k in range(count)]


def boundary_dtype(edges: EdgeTypes, tensor: Tensor, segment: str, side: str) -> int:
    """The dtype of a tensor crossing ``segment``'s border; an error when unknown or a ref."""
    index = edges.index
    p, port = tensor
    dtype = edges.output_dtype(p, port)
    where = f"{index.names[p]}:{port}" if port else index.names[p]
    if dtype is None:
        raise PartitionError(f"segment {segment}: the dtype of {side} {where!r} ({index.ops[p]}) cannot be told: "
                             f"op {index.ops[p]} is neither a TensorFlow op, a declared fused op nor a library "
                             "function; allowed: ops with a known definition at a segment's border")
    if dtype > REF_OFFSET:
        raise PartitionError(f"segment {segment}: {side} {where!r} is a ref tensor "
                             f"({dtype_name(dtype - REF_OFFSET)}_ref of {index.ops[p]}); allowed: no ref tensor "
                             "(a TF1 variable) across a segment's border: freeze the graph first")
    return dtype


def _inner_name(edges: EdgeTypes, p: int, port: int) -> str:
    found = edges.output_arg(p, port)
    index = edges.index
    if found is None:
        raise PartitionError(f"node {index.names[p]!r} ({index.ops[p]}) inside a segment has no known output "
                             f"{port}: op {index.ops[p]} is neither a TensorFlow op, a declared fused op nor a "
                             "library function")
    return f"{index.names[p]}:{found[0]}:{found[1]}"


def _strip_colocation(node: Any, inside: set[str]) -> None:
    if _COLOCATE not in node.attr:
        return
    kept = [v for v in node.attr[_COLOCATE].list.s if v.decode("utf-8", "replace")[5:] in inside]
    if kept:
        del node.attr[_COLOCATE].list.s[:]
        node.attr[_COLOCATE].list.s.extend(kept)
    else:
        del node.attr[_COLOCATE]


def body_function(name: str, edges: EdgeTypes, boundary: SegmentBoundary, arg_types: list[int],
                  ret_types: list[int]) -> "FunctionDef":
    """The FunctionDef of one segment (its constants first, then its nodes in graph order)."""
    index: GraphIndex = edges.index
    body = [*boundary.consts, *boundary.members]
    inside_set = set(body)
    inside_names = {index.names[i] for i in body}
    args = port_names(len(boundary.args), "arg", inside_names)
    rets = port_names(len(boundary.rets), "ret", inside_names)
    function = message_class("FunctionDef")()
    function.signature.name = name
    for arg, dtype in zip(args, arg_types, strict=True):
        function.signature.input_arg.add(name=arg, type=dtype)
    for ret, dtype in zip(rets, ret_types, strict=True):
        function.signature.output_arg.add(name=ret, type=dtype)
    for i in body:
        node = function.node_def.add()
        node.CopyFrom(index.nodes[i])
        del node.input[:]
        for p, port in index.inputs[i]:
            if port == CONTROL:
                if p in inside_set:
                    node.input.append("^" + index.names[p])
            elif p in inside_set:
                node.input.append(_inner_name(edges, p, port))
            else:
                node.input.append(args[boundary.arg_index[(p, port)]])
        _strip_colocation(node, inside_names)
    for ret, (p, port) in zip(rets, boundary.rets, strict=True):
        function.ret[ret] = _inner_name(edges, p, port)
    return function
