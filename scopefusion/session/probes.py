"""The fused ops a session run can watch: where they are in the runnable graph,
which tensors they read and write, and which of them a given run executes.

The dump and overflow options are about fused ops.  In the TensorFlow-runnable
form a fused op is a function call carrying a marker attribute with its fused
op type, or, when the fused op is a stock TensorFlow op (a softmax written out
as ops becomes ``Softmax``), the stock node itself (:func:`stock_fused_nodes`);
its input and output tensors can be fetched alongside the user's fetches, except inside a TF1 while
loop, whose tensors cannot be fetched from outside (:func:`loop_nodes` finds those).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.graph.vocabulary import CONTROL, numpy_dtype, parse_input

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef


@dataclass(frozen=True)
class FusedNode:
    """One fused op of the runnable graph and its fetchable tensors (``name:port``)."""

    name: str
    type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    #: The input slot of each of ``inputs`` (inputs of other dtypes, such as resources, are left out).
    input_slots: tuple[int, ...] = ()

    def labelled(self) -> list[tuple[str, str]]:
        """``(input_<slot> or output_<port>, tensor)`` for every tensor of the op."""
        pairs = [(f"input_{slot}", name) for slot, name in zip(self.input_slots, self.inputs, strict=True)]
        return pairs + [(f"output_{port_of(name)}", name) for name in self.outputs]

    def tensors(self, mode: str) -> tuple[str, ...]:
        """The tensors a dump mode (``input``, ``output`` or ``all``) writes."""
        return {"input": self.inputs, "output": self.outputs, "all": self.inputs + self.outputs}[mode]


def port_of(tensor: str) -> int:
    """The port of a tensor name ``name:port``."""
    return int(tensor.rpartition(":")[2])


def full_tensor_name(text: str) -> str:
    """A NodeDef input (``a``, ``a:1``) as a fetchable tensor name (``a:0``, ``a:1``)."""
    name, port = parse_input(text)
    return f"{name}:{port}"


def _fetchable(types: Sequence[int]) -> list[bool]:
    return [numpy_dtype(t) is not None for t in types]


def _fused_node(node: "NodeDef", op_type: str) -> FusedNode:
    data = [i for i in node.input if not i.startswith("^")]
    slots = [k for k, ok in enumerate(_fetchable(node.attr["Tin"].list.type)) if ok and k < len(data)]
    outs = [f"{node.name}:{k}" for k, ok in enumerate(_fetchable(node.attr["Tout"].list.type)) if ok]
    return FusedNode(node.name, op_type, tuple(full_tensor_name(data[k]) for k in slots), tuple(outs),
                     tuple(slots))


def fused_nodes(graph_def: "GraphDef", marker_attr: str) -> list[FusedNode]:
    """The fused ops of a runnable graph: the nodes carrying ``marker_attr`` (their fused op type)."""
    return [_fused_node(node, node.attr[marker_attr].s.decode()) for node in graph_def.node
            if marker_attr in node.attr]


def stock_fused_nodes(graph: Any, graph_def: GraphDef, fused: Iterable[tuple[str, str]],
                      marker_attr: str) -> list[FusedNode]:
    """The fused ops of ``fused`` (``(name, type)`` of the run's fused records) whose type is a stock
    TensorFlow op: nodes of ``graph_def`` named and typed so, without ``marker_attr``; their tensors
    read from the imported TensorFlow ``graph``."""
    nodes = {node.name: node for node in graph_def.node}
    found: dict[str, FusedNode] = {}
    for name, op_type in fused:
        node = nodes.get(name)
        if node is None or node.op != op_type or marker_attr in node.attr or name in found:
            continue
        op = graph.get_operation_by_name(name)
        slots = [k for k, t in enumerate(op.inputs) if numpy_dtype(t.dtype.as_datatype_enum) is not None]
        outs = [t.name for t in op.outputs if numpy_dtype(t.dtype.as_datatype_enum) is not None]
        found[name] = FusedNode(name, op_type, tuple(op.inputs[k].name for k in slots), tuple(outs), tuple(slots))
    return list(found.values())


def loop_nodes(graph_def: "GraphDef") -> set[str]:
    """The nodes inside TF1 while loops: reached from an ``Enter`` before an ``Exit``."""
    inside = {node.name for node in graph_def.node if node.op in ("Enter", "RefEnter")}
    if not inside:
        return inside
    readers: dict[str, list[str]] = {}
    for node in graph_def.node:
        for text in node.input:
            readers.setdefault(parse_input(text)[0], []).append(node.name)
    ops = {node.name: node.op for node in graph_def.node}
    stack = list(inside)
    while stack:
        for reader in readers.get(stack.pop(), ()):
            if reader not in inside and ops[reader] not in ("Exit", "RefExit"):
                inside.add(reader)
                stack.append(reader)
    return inside


def executed_nodes(graph_def: "GraphDef", roots: Iterable[str], fed: Iterable[str]) -> set[str]:
    """The nodes a run of ``roots`` (node names) executes: their ancestors, not
    looking past fed tensors (``name:port``)."""
    fed_tensors = set(fed)
    inputs = {node.name: list(node.input) for node in graph_def.node}
    seen: set[str] = set()
    stack = [r for r in roots if r in inputs]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        for text in inputs[name]:
            producer, port = parse_input(text)
            if port != CONTROL and f"{producer}:{port}" in fed_tensors:
                continue
            if producer in inputs and producer not in seen:
                stack.append(producer)
    return seen
