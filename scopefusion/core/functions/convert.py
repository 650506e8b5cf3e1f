"""A library function as a graph of its own, and the fused graph back as the same function.

Each input argument becomes a ``Placeholder`` named after it (its dtype, and its shape
when the callers fix it or the function records one in ``arg_attr``); each result becomes an ``Identity``
sink reading the returned tensor, and each control result a ``NoOp`` sink waiting for
its node, so fusion keeps all of them as graph outputs.  Tensor names are turned from
``node:argument:index`` into ``node:port`` with the producers' output layouts
(:mod:`.layout`) and back the same way.  The function's signature, attributes and
argument attributes are kept as they are; only its nodes and the tensors its results
name change, so the nodes calling it stay valid.  Anything that cannot be converted
exactly is :class:`Unconvertible` with the reason, and the function is then left alone.
Nodes no call runs (stateless, needed by no result) are left out, as TensorFlow prunes them
when it instantiates the function: a step's unused slice would otherwise read into a fused
cell and keep it from fusing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from ..graph.protos import message_class
from ..graph.tf_ops import tensorflow_op_def
from ..graph.vocabulary import is_valid_node_name, parse_input
from .layout import OutputLayouts, Unresolved

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.function_pb2 import FunctionDef
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef

_SINK_STEM = "scopefusion_ret"
_CONTROL_SINK_STEM = "scopefusion_control_ret"


class Unconvertible(Exception):
    """A function that cannot be turned into a graph (or back) exactly."""


@dataclass
class BodyGraph:
    """A function's body as a graph: its placeholders are the arguments, its sinks the results."""

    function: "FunctionDef"
    graph_def: "GraphDef"
    args: list[str]
    #: result name -> the Identity sink reading it
    ret_sinks: dict[str, str] = field(default_factory=dict)
    #: control result name -> the NoOp sink waiting for it
    control_sinks: dict[str, str] = field(default_factory=dict)


def _free_names(stem: str, keys: list[str], taken: set[str]) -> dict[str, str]:
    prefix = stem
    while any(name.startswith(prefix) for name in taken):
        prefix += "_"
    return {key: f"{prefix}_{k}" for k, key in enumerate(keys)}


def _arg_dtype(function: "FunctionDef", arg: Any) -> int:
    if arg.type_attr or arg.number_attr or arg.type_list_attr:
        raise Unconvertible(f"argument {arg.name!r} has a type set by an attribute (a polymorphic signature)")
    return int(arg.type)


def _placeholder(graph: "GraphDef", function: "FunctionDef", k: int, arg: Any, given: Any) -> None:
    node = graph.node.add(name=arg.name, op="Placeholder")
    node.attr["dtype"].type = _arg_dtype(function, arg)
    recorded = function.arg_attr[k].attr.get("_output_shapes") if k in function.arg_attr else None
    if given is not None:
        node.attr["shape"].shape.CopyFrom(given)
    elif recorded is not None and len(recorded.list.shape) == 1:
        node.attr["shape"].shape.CopyFrom(recorded.list.shape[0])
    else:
        node.attr["shape"].shape.unknown_rank = True


class _Ports:
    """``node:argument:index`` -> ``node:port`` for the producers of one function body."""

    def __init__(self, nodes: Mapping[str, "NodeDef"], args: set[str], layouts: OutputLayouts) -> None:
        self.nodes, self.args, self.layouts = nodes, args, layouts
        self._ports: dict[str, dict[tuple[str, int], int]] = {}

    def to_graph(self, tensor: str, where: str) -> str:
        if tensor.startswith("^"):
            if tensor[1:] not in self.nodes and tensor[1:] not in self.args:
                raise Unconvertible(f"{where} waits for {tensor[1:]!r}, which is no node of the function")
            return tensor
        parts = tensor.split(":")
        if len(parts) == 1 and tensor in self.args:
            return tensor
        if len(parts) != 3 or parts[0] not in self.nodes or not parts[2].isdigit():
            raise Unconvertible(f"{where} reads {tensor!r}, which names neither an argument nor a node output")
        producer = parts[0]
        if producer not in self._ports:
            try:
                layout = self.layouts.layout(self.nodes[producer])
            except Unresolved as why:
                raise Unconvertible(str(why)) from why
            self._ports[producer] = {slot: port for port, slot in enumerate(layout)}
        port = self._ports[producer].get((parts[1], int(parts[2])))
        if port is None:
            raise Unconvertible(f"{where} reads {tensor!r}: node {producer!r} ({self.nodes[producer].op}) has no "
                                f"such output")
        return producer if port == 0 else f"{producer}:{port}"


def _is_stateful(node: "NodeDef", functions: Mapping[str, "FunctionDef"]) -> bool:
    op_def = None if node.op in functions else tensorflow_op_def(node.op)
    return op_def is None or op_def.is_stateful  # a call, or an op of unknown effects: kept


def live_nodes(function: "FunctionDef", functions: Mapping[str, "FunctionDef"]) -> set[str]:
    """The nodes a call runs: those the results and control results need, and the stateful ones
    (with what they need).  TensorFlow prunes the others when it instantiates the function."""
    nodes = {node.name: node for node in function.node_def}
    stack = [t.split(":")[0] for t in function.ret.values()] + list(function.control_ret.values())
    stack += [node.name for node in function.node_def if _is_stateful(node, functions)]
    live: set[str] = set()
    while stack:
        name = stack.pop()
        if name in live or name not in nodes:
            continue
        live.add(name)
        stack.extend(t.lstrip("^").split(":")[0] for t in nodes[name].input)
    return live


def function_to_body(function: "FunctionDef", functions: Mapping[str, "FunctionDef"],
                     layouts: OutputLayouts, arg_shapes: Mapping[int, Any] | None = None) -> BodyGraph:
    """The body of ``function`` as a graph; :class:`Unconvertible` when it cannot be done exactly.
    ``arg_shapes``: argument shapes the callers fix (:mod:`.arg_shapes`), else those recorded."""
    signature = function.signature
    args = [a.name for a in signature.input_arg]
    nodes = {node.name: node for node in function.node_def}
    clash = sorted((set(args) & set(nodes)) | {a for a in args if not is_valid_node_name(a)})
    if clash or len(nodes) != len(function.node_def) or len(set(args)) != len(args):
        raise Unconvertible("argument or node names that cannot be graph node names "
                            f"({', '.join(clash) or 'repeated'})")
    graph = message_class("GraphDef")()
    for k, arg in enumerate(signature.input_arg):
        _placeholder(graph, function, k, arg, (arg_shapes or {}).get(k))
    ports = _Ports(nodes, set(args), layouts)
    live = live_nodes(function, functions)
    for node in function.node_def:
        if node.name not in live:
            continue
        copy = graph.node.add()
        copy.CopyFrom(node)
        del copy.input[:]
        copy.input.extend(ports.to_graph(t, f"node {node.name!r}") for t in node.input)
    body = BodyGraph(function, graph, args)
    _add_sinks(body, ports, set(args) | set(nodes))
    for called in sorted({node.op for node in function.node_def if node.op in functions}):
        graph.library.function.add().signature.CopyFrom(functions[called].signature)
    return body


def _add_sinks(body: BodyGraph, ports: _Ports, taken: set[str]) -> None:
    """An Identity sink per result and a NoOp sink per control result, named clear of ``taken``."""
    function, graph, nodes = body.function, body.graph_def, ports.nodes
    signature = function.signature
    body.ret_sinks = _free_names(_SINK_STEM, [a.name for a in signature.output_arg], taken)
    for arg in signature.output_arg:
        if arg.name not in function.ret:
            raise Unconvertible(f"result {arg.name!r} is not returned by any tensor")
        sink = graph.node.add(name=body.ret_sinks[arg.name], op="Identity")
        sink.input.append(ports.to_graph(function.ret[arg.name], f"result {arg.name!r}"))
        sink.attr["T"].type = _arg_dtype(function, arg)
    controls = list(signature.control_output)
    body.control_sinks = _free_names(_CONTROL_SINK_STEM, controls, taken)
    for name in controls:
        waited = function.control_ret.get(name)
        if waited not in nodes:
            raise Unconvertible(f"control result {name!r} names no node of the function")
        graph.node.add(name=body.control_sinks[name], op="NoOp").input.append("^" + waited)


class _Names:
    """``node:port`` -> ``node:argument:index`` for the nodes of a fused body."""

    def __init__(self, nodes: Mapping[str, "NodeDef"], args: set[str], layouts: OutputLayouts) -> None:
        self.nodes, self.args, self.layouts = nodes, args, layouts
        self._layouts: dict[str, list[tuple[str, int]]] = {}

    def to_function(self, tensor: str) -> str:
        name, port = parse_input(tensor)
        if tensor.startswith("^"):
            return tensor
        if name in self.args:
            if port != 0:
                raise Unconvertible(f"the fused body reads port {port} of argument {name!r}")
            return name
        if name not in self.nodes:
            raise Unconvertible(f"the fused body reads {tensor!r}, which names no node")
        if name not in self._layouts:
            try:
                self._layouts[name] = self.layouts.layout(self.nodes[name])
            except Unresolved as why:
                raise Unconvertible(str(why)) from why
        layout = self._layouts[name]
        if port >= len(layout):
            raise Unconvertible(f"the fused body reads port {port} of {name!r}, which has {len(layout)} output(s)")
        arg, index = layout[port]
        return f"{name}:{arg}:{index}"


def body_to_function(body: BodyGraph, fused: "GraphDef", layouts: OutputLayouts) -> "FunctionDef":
    """``body``'s function with the nodes of the fused graph ``fused``: the same signature,
    attributes and argument attributes, its results naming the tensors the sinks read."""
    nodes = {node.name: node for node in fused.node}
    for arg in body.args:
        node = nodes.get(arg)
        if node is None or node.op != "Placeholder" or node.input:
            raise Unconvertible(f"fusion changed the placeholder of argument {arg!r}")
    sinks = set(body.ret_sinks.values()) | set(body.control_sinks.values())
    names = _Names(nodes, set(body.args), layouts)
    out = message_class("FunctionDef")()
    out.CopyFrom(body.function)
    del out.node_def[:]
    skipped = set(body.args) | sinks
    for node in fused.node:
        if node.name in skipped:
            continue
        copy = out.node_def.add()
        copy.CopyFrom(node)
        del copy.input[:]
        copy.input.extend(names.to_function(t) for t in node.input)
    for result, sink in body.ret_sinks.items():
        node = nodes.get(sink)
        if node is None or len(node.input) != 1:
            raise Unconvertible(f"fusion changed the sink of result {result!r}")
        out.ret[result] = names.to_function(node.input[0])
    for result, sink in body.control_sinks.items():
        node = nodes.get(sink)
        if node is None or len(node.input) != 1 or not node.input[0].startswith("^"):
            raise Unconvertible(f"fusion changed the sink of control result {result!r}")
        out.control_ret[result] = node.input[0][1:]
    return out
