"""Checks of an inner graph (a result of several new nodes) before it is applied.

An inner graph is written by a pass, so it is checked like any other result: every node
has a valid, unique name and an op that is a declared fused op or a TensorFlow op; it reads
only inner nodes (at ports they have) and mapped fused inputs; the nodes form no cycle;
and each node has the number of data inputs and the attributes its op requires.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..graph.tf_ops import tensorflow_op_def
from ..graph.toposort import kahn_order, on_cycles
from ..graph.vocabulary import CONTROL, is_valid_node_name, parse_input
from .candidate import FusedInput, FusionCandidate, InnerNode
from .fused_ops import FusedOpDef
from .refusal import Refused

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.attr_value_pb2 import AttrValue


def check_inner_structure(candidate: FusionCandidate, fused_ops: Mapping[str, FusedOpDef]) -> None:
    """Names, ops, references and acyclicity of ``candidate``'s inner graph."""
    names: set[str] = set()
    for node in candidate.inner_nodes:
        full = f"{candidate.name}/{node.name}"
        if not node.name or not is_valid_node_name(full):
            raise Refused(f"inner node name {node.name!r} does not make a valid node name ({full!r})")
        if node.name in names:
            raise Refused(f"inner node {node.name!r} is given twice")
        names.add(node.name)
        if not node.op:
            raise Refused(f"inner node {node.name!r} has no op type")
        if node.op not in fused_ops and tensorflow_op_def(node.op) is None:
            raise Refused(f"inner node {node.name!r} has op {node.op!r}, which is neither a declared fused op "
                          "nor a TensorFlow op")
    n_inputs = candidate.num_inputs()
    for node in candidate.inner_nodes:
        for ref in node.inputs:
            if isinstance(ref, FusedInput):
                if not 0 <= ref.index < n_inputs:
                    raise Refused(f"inner node {node.name!r} reads fused input {ref.index}, which is not mapped")
            elif parse_input(ref)[0] not in names:
                raise Refused(f"inner node {node.name!r} reads {ref!r}, which is no inner node")
    for fused, tensor in candidate.inner_outputs.items():
        if parse_input(tensor)[0] not in names:
            raise Refused(f"fused output {fused} comes from {tensor!r}, which is no inner node")
    _check_acyclic(candidate.inner_nodes)


def _check_acyclic(nodes: Sequence[InnerNode]) -> None:
    position = {n.name: k for k, n in enumerate(nodes)}
    indegree = [0] * len(nodes)
    readers: list[list[int]] = [[] for _ in nodes]
    for k, node in enumerate(nodes):
        for ref in node.inputs:
            if not isinstance(ref, FusedInput):
                readers[position[parse_input(ref)[0]]].append(k)
                indegree[k] += 1
    if len(kahn_order(indegree, readers)) != len(nodes):
        looped = sorted(nodes[k].name for k in on_cycles(indegree, readers))
        raise Refused(f"the inner graph has a cycle through {', '.join(repr(n) for n in looped[:5])}")


def check_inner_signatures(candidate: FusionCandidate, attr_values: Sequence[Mapping[str, "AttrValue"]],
                           fused_ops: Mapping[str, FusedOpDef]) -> None:
    """Each inner node has the data inputs, outputs read and required attributes of its op."""
    outputs: dict[str, int | None] = {}
    for node, attrs in zip(candidate.inner_nodes, attr_values, strict=True):
        data = [ref for ref in node.inputs if isinstance(ref, FusedInput) or not ref.startswith("^")]
        expected, n_out = _signature(node, attrs, fused_ops)
        if expected is not None and len(data) != expected:
            raise Refused(f"inner node {node.name!r} ({node.op}) has {len(data)} data input(s), "
                          f"its op takes {expected}")
        outputs[node.name] = n_out
    reads = [(node.name, ref) for node in candidate.inner_nodes for ref in node.inputs if isinstance(ref, str)]
    reads += [("a fused output", tensor) for tensor in candidate.inner_outputs.values()]
    for reader, ref in reads:
        name, port = parse_input(ref)
        n_out = outputs.get(name)
        if port != CONTROL and n_out is not None and port >= n_out:
            raise Refused(f"{reader} reads {ref!r}, but inner node {name!r} has {n_out} output(s)")


def _signature(node: InnerNode, attrs: Mapping[str, Any], fused_ops: Mapping[str, FusedOpDef]
               ) -> tuple[int | None, int | None]:
    """(data inputs, outputs) the node's op takes and gives; refuses missing required attributes."""
    declared = fused_ops.get(node.op)
    if declared is not None:
        problems = declared.check_attrs(dict(attrs))
        if problems:
            raise Refused(f"inner node {node.name!r}: {'; '.join(problems)}")
        return declared.input_count(attrs), len(declared.outputs)
    op_def = tensorflow_op_def(node.op)
    assert op_def is not None, node.op  # check_inner_structure refused an op TensorFlow does not know
    missing = [a.name for a in op_def.attr if not a.HasField("default_value") and a.name not in attrs]
    if missing:
        raise Refused(f"inner node {node.name!r} ({node.op}) lacks required attribute(s) {', '.join(missing)}")
    return _count_args(op_def.input_arg, attrs), _count_args(op_def.output_arg, attrs)


def _count_args(args: Any, attrs: Mapping[str, Any]) -> int | None:
    total = 0
    for arg in args:
        if arg.number_attr:
            value = attrs.get(arg.number_attr)
            if value is None:
                return None
            total += value.i
        elif arg.type_list_attr:
            value = attrs.get(arg.type_list_attr)
            if value is None:
                return None
            total += len(value.list.type)
        else:
            total += 1
    return total
