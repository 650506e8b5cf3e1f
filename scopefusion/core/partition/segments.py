"""Cutting the segments out of a graph: each becomes a call node whose body is a function
of the graph's library.

* **Fused form**: the call node's op is ``GeOp``, as the reference's adapter writes it,
  named like its clusters (``GeOp0_0``, ...), with the attributes a back end reads:
  ``function`` (the body), ``Tin``/``Tout`` (argument and result dtypes), ``data_format``
  (the first one a node of the segment has, else ``NHWC``) and every session option as
  ``_<option>`` (values as the reference stores them: text, ``"1"``/``"0"`` for booleans,
  ``""`` when unset), plus ``_NpuOptimizer``.
* **TensorFlow-runnable form**: the call node is a stock ``PartitionedCall`` (``f``,
  ``Tin``, ``Tout``) with the same ``_`` attributes (TensorFlow ignores them), so the
  partitioned graph runs and ``verify`` compares it with the original.

Host nodes that read a segment's tensor read the call's output instead; a control edge
into or out of a segment is lifted onto the call node.  A graph output computed inside a
segment stays fetchable under its name: an ``Identity`` (``IdentityN`` for several ports)
of that name reads the call's outputs.  A constant without inputs is copied into every
segment that reads it and stays in the graph only while a host node reads it.

For a back-end compiler, :func:`standalone_graph` writes one segment as a GraphDef of its
own: a ``Placeholder`` per argument (``<node>_<port>_arg``), the body's nodes, and an
``Identity`` per result (``<node>_<port>_retval``), with the library functions it calls.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..graph.index import GraphIndex
from ..graph.protos import message_class
from ..graph.vocabulary import CONTROL, dtype_name, tensor_name
from .boundary import SegmentBoundary, Tensor, boundaries
from .edges import EdgeTypes
from .functions import body_function, boundary_dtype

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

SEGMENT_OP = "GeOp"
TF_CALL_OP = "PartitionedCall"
DEFAULT_DATA_FORMAT = "NHWC"


@dataclass
class Segmenting:
    """Which node of an indexed graph goes to which segment, and how segments are named."""

    index: GraphIndex
    segment_of: Sequence[int]
    names: list[str]
    free_const: bytearray
    graph_outputs: Sequence[Tensor]
    bounds: list[SegmentBoundary] = field(init=False)

    def __post_init__(self) -> None:
        self.bounds = boundaries(self.index, self.segment_of, len(self.names), self.free_const, self.graph_outputs)
        wanted: dict[int, int] = {}
        for p, port in self.graph_outputs:
            if self.segment_of[p] >= 0:
                wanted[p] = max(port, wanted.get(p, 0))
        self.output_ports = wanted  # graph outputs inside segments: node -> highest port
        for p, top in wanted.items():  # every port up to the highest, so an IdentityN can stand in
            for port in range(top + 1):
                self.bounds[self.segment_of[p]].add_ret((p, port))

    def tensor_outside(self, tensor: Tensor) -> str:
        """How a node outside the segments names ``tensor`` after the cut."""
        p, port = tensor
        segment = self.segment_of[p]
        if segment < 0:
            return tensor_name(self.index.names[p], port)
        return tensor_name(self.names[segment], self.bounds[segment].ret_index[(p, port)])

    def control_outside(self, p: int) -> str:
        segment = self.segment_of[p]
        return "^" + (self.names[segment] if segment >= 0 else self.index.names[p])


def _data_format(index: GraphIndex, members: Sequence[int]) -> str:
    for i in members:
        attr = index.nodes[i].attr.get("data_format")
        if attr is not None and attr.s:
            return attr.s.decode("utf-8", "replace")
    return DEFAULT_DATA_FORMAT


def _call_template(attrs: Mapping[str, str]) -> Any:
    """A NodeDef holding the attributes every call node carries (copied whole, once per node)."""
    template = message_class("NodeDef")()
    for key, value in attrs.items():
        template.attr[key].s = value.encode("utf-8")
    return template


def _call_node(out: "GraphDef", seg: Segmenting, k: int, types: tuple[list[int], list[int]], fused_form: bool,
               template: Any) -> None:
    bound = seg.bounds[k]
    node = out.node.add()
    node.CopyFrom(template)
    node.name = seg.names[k]
    node.op = SEGMENT_OP if fused_form else TF_CALL_OP
    node.input.extend(seg.tensor_outside(t) for t in bound.args)
    controls = dict.fromkeys(seg.control_outside(p) for p in bound.control_in)
    node.input.extend(c for c in controls if c != "^" + seg.names[k])
    node.attr["function" if fused_form else "f"].func.name = seg.names[k]
    node.attr["Tin"].list.type.extend(types[0])
    node.attr["Tout"].list.type.extend(types[1])
    if fused_form:
        node.attr["data_format"].s = _data_format(seg.index, bound.members).encode()


def tf_calls(graph_def: GraphDef) -> GraphDef | None:
    """A partitioned graph in fused form (``GeOp`` call nodes) with each call made a TensorFlow
    ``PartitionedCall`` of the same function, as the TensorFlow-runnable form writes it; None when
    the graph has no ``GeOp`` node.  Fused ops inside the bodies are left as they are."""
    if not any(node.op == SEGMENT_OP for node in graph_def.node):
        return None
    out = type(graph_def)()
    out.CopyFrom(graph_def)
    for node in out.node:
        if node.op == SEGMENT_OP and "function" in node.attr:
            node.op = TF_CALL_OP
            node.attr["f"].CopyFrom(node.attr["function"])
            del node.attr["function"]
            if "data_format" in node.attr:  # the device's hint, not an attribute of the call
                del node.attr["data_format"]
    return out


def _host_node(out: "GraphDef", seg: Segmenting, i: int) -> None:
    index = seg.index
    node = out.node.add()
    node.CopyFrom(index.nodes[i])
    if not any(seg.segment_of[p] >= 0 for p, _ in index.inputs[i]):
        return
    del node.input[:]
    controls: dict[str, None] = {}
    for p, port in index.inputs[i]:
        if port == CONTROL:
            controls[seg.control_outside(p)] = None
        else:
            node.input.append(seg.tensor_outside((p, port)))
    node.input.extend(controls)


def _output_node(out: "GraphDef", seg: Segmenting, edges: EdgeTypes, p: int) -> None:
    """An Identity (IdentityN) named like graph output ``p``, reading the call's outputs."""
    ports = range(seg.output_ports[p] + 1)
    types = [boundary_dtype(edges, (p, port), seg.names[seg.segment_of[p]], "graph output") for port in ports]
    node = out.node.add(name=seg.index.names[p], op="Identity" if len(types) == 1 else "IdentityN")
    node.input.extend(seg.tensor_outside((p, port)) for port in ports)
    if len(types) == 1:
        node.attr["T"].type = types[0]
    else:
        node.attr["T"].list.type.extend(types)


def cut(seg: Segmenting, edges: EdgeTypes, *, fused_form: bool, attrs: Mapping[str, str]) -> "GraphDef":
    """The graph with every segment cut out into a library function and a call node."""
    index = seg.index
    out = message_class("GraphDef")()
    out.versions.CopyFrom(index.graph_def.versions)
    out.library.CopyFrom(index.graph_def.library)
    types = []
    for k, bound in enumerate(seg.bounds):
        arg_types = [boundary_dtype(edges, t, seg.names[k], "argument") for t in bound.args]
        ret_types = [boundary_dtype(edges, t, seg.names[k], "result") for t in bound.rets]
        out.library.function.add().CopyFrom(body_function(seg.names[k], edges, bound, arg_types, ret_types))
        types.append((arg_types, ret_types))
    host_reads = bytearray(len(index))
    for c, ins in enumerate(index.inputs):
        if seg.segment_of[c] < 0:
            for p, _ in ins:
                host_reads[p] = 1
    for p, _ in seg.graph_outputs:
        host_reads[p] = 1
    first = {bound.members[0]: k for k, bound in enumerate(seg.bounds) if bound.members}
    template = _call_template(attrs)
    for i in range(len(index)):
        if i in first:
            _call_node(out, seg, first[i], types[first[i]], fused_form, template)
        if seg.segment_of[i] >= 0:
            if i in seg.output_ports:
                _output_node(out, seg, edges, i)
        elif not seg.free_const[i] or host_reads[i]:
            _host_node(out, seg, i)
    return out


@dataclass
class SegmentGraph:
    """One segment as a standalone GraphDef: ``inputs`` are ``(placeholder, tensor it stands
    for, dtype)``, ``outputs`` are ``(identity, tensor it returns, dtype)``."""

    name: str
    graph_def: "GraphDef"
    inputs: list[tuple[str, str, str]]
    outputs: list[tuple[str, str, str]]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "nodes": len(self.graph_def.node),
                "inputs": [dict(zip(("placeholder", "tensor", "dtype"), i, strict=True)) for i in self.inputs],
                "outputs": [dict(zip(("identity", "tensor", "dtype"), o, strict=True)) for o in self.outputs]}


def _free_name(stem: str, taken: set[str]) -> str:
    name, k = stem, 0
    while name in taken:
        k += 1
        name = f"{stem}_{k}"
    taken.add(name)
    return name


def standalone_graph(seg: Segmenting, edges: EdgeTypes, k: int) -> SegmentGraph:
    """Segment ``k`` as a GraphDef of its own, for a back-end compiler."""
    index, bound, name = seg.index, seg.bounds[k], seg.names[k]
    out = message_class("GraphDef")()
    out.versions.CopyFrom(index.graph_def.versions)
    body = [*bound.consts, *bound.members]
    inside = set(body)
    taken = {index.names[i] for i in body}
    placeholders, inputs = {}, []
    for p, port in bound.args:
        dtype = boundary_dtype(edges, (p, port), name, "argument")
        holder = _free_name(f"{index.names[p]}_{port}_arg", taken)
        node = out.node.add(name=holder, op="Placeholder")
        node.attr["dtype"].type = dtype
        shapes = index.nodes[p].attr.get("_output_shapes")
        if shapes is not None and port < len(shapes.list.shape):
            node.attr["shape"].shape.CopyFrom(shapes.list.shape[port])
        else:
            node.attr["shape"].shape.unknown_rank = True
        placeholders[(p, port)] = holder
        inputs.append((holder, tensor_name(index.names[p], port), dtype_name(dtype)))
    for i in body:
        node = out.node.add()
        node.CopyFrom(index.nodes[i])
        del node.input[:]
        for p, port in index.inputs[i]:
            if p in inside:
                node.input.append(tensor_name(index.names[p], port))
            elif port != CONTROL:
                node.input.append(placeholders[(p, port)])
    outputs = []
    for p, port in bound.rets:
        dtype = boundary_dtype(edges, (p, port), name, "result")
        identity = out.node.add(name=_free_name(f"{index.names[p]}_{port}_retval", taken), op="Identity")
        identity.input.append(tensor_name(index.names[p], port))
        identity.attr["T"].type = dtype
        outputs.append((identity.name, tensor_name(index.names[p], port), dtype_name(dtype)))
    _copy_called_functions(index, body, out)
    return SegmentGraph(name, out, inputs, outputs)


def _copy_called_functions(index: GraphIndex, body: Sequence[int], out: "GraphDef") -> None:
    """The library functions the body calls, directly or through other functions."""
    library = {f.signature.name: f for f in index.graph_def.library.function}
    if not library:
        return
    todo = [index.nodes[i] for i in body]
    copied: set[str] = set()
    while todo:
        node = todo.pop()
        called = [node.op] if node.op in library else []
        for value in node.attr.values():
            if value.HasField("func"):
                called.append(value.func.name)
            elif value.HasField("list"):
                called.extend(f.name for f in value.list.func)
        for fname in called:
            if fname in library and fname not in copied:
                copied.add(fname)
                out.library.function.add().CopyFrom(library[fname])
                todo.extend(library[fname].node_def)
    for gradient in index.graph_def.library.gradient:
        if gradient.function_name in copied:
            out.library.gradient.add().CopyFrom(gradient)
