"""The output arguments of a node, as a function body names its tensors.

Inside a ``FunctionDef`` a tensor is ``node:argument:index``: the output argument of
the producer's op definition and the position inside it.  A graph names the same tensor
``node:port``.  Turning one into the other needs the op's output argument list, expanded
with the node's attributes (``number_attr`` and ``type_list_attr`` lists): TensorFlow's op
registry gives it for stock ops, the signature for a call of a library function, the
declaration for a fused op.  An op none of them knows, or a list length the node's
attributes do not give, cannot be converted exactly: :class:`Unresolved` says why.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ..fusion.fused_ops import FusedOpDef
from ..graph.tf_ops import tensorflow_op_def

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.function_pb2 import FunctionDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef

#: (output argument, index inside it) per output port
Layout = list[tuple[str, int]]


class Unresolved(Exception):
    """A node's output arguments cannot be told exactly."""


def _list_length(node: "NodeDef", op_def: Any, attr: str, kind: str) -> int:
    if attr in node.attr:
        value = node.attr[attr]
        return int(value.i) if kind == "number" else len(value.list.type)
    for declared in op_def.attr:
        if declared.name == attr and declared.HasField("default_value"):
            value = declared.default_value
            return int(value.i) if kind == "number" else len(value.list.type)
    raise Unresolved(f"node {node.name!r} ({node.op}) does not set attribute {attr!r}, which gives the length "
                     "of an output list")


def _tensorflow_layout(node: "NodeDef", op_def: Any) -> Layout:
    layout: Layout = []
    for arg in op_def.output_arg:
        if arg.number_attr:
            count = _list_length(node, op_def, arg.number_attr, "number")
        elif arg.type_list_attr:
            count = _list_length(node, op_def, arg.type_list_attr, "types")
        else:
            count = 1
        layout.extend((arg.name, k) for k in range(count))
    return layout


def _signature_layout(node: "NodeDef", signature: Any) -> Layout:
    layout: Layout = []
    for arg in signature.output_arg:
        if arg.number_attr or arg.type_list_attr:
            raise Unresolved(f"node {node.name!r} calls function {node.op!r}, whose output {arg.name!r} is a list "
                             "whose length the call does not fix")
        layout.append((arg.name, 0))
    return layout


class OutputLayouts:
    """Output layouts of nodes, their op definitions looked up once per op type."""

    def __init__(self, functions: Mapping[str, "FunctionDef"], fused_ops: Mapping[str, FusedOpDef]) -> None:
        self.functions = functions
        self.fused_ops = fused_ops
        self._op_defs: dict[str, Any] = {}

    def layout(self, node: "NodeDef") -> Layout:
        """``(argument, index)`` per output port of ``node``; :class:`Unresolved` when not known exactly."""
        if node.op in self.functions:
            return _signature_layout(node, self.functions[node.op].signature)
        if node.op in self.fused_ops:
            return [(arg.name, 0) for arg in self.fused_ops[node.op].outputs]
        if node.op not in self._op_defs:
            self._op_defs[node.op] = tensorflow_op_def(node.op)
        op_def = self._op_defs[node.op]
        if op_def is None:
            raise Unresolved(f"node {node.name!r} has op {node.op!r}, which is neither a TensorFlow op, a declared "
                             "fused op nor a library function: its outputs cannot be named")
        return _tensorflow_layout(node, op_def)
