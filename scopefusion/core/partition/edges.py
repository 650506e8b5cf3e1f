"""What the edges of a graph carry: the dtype of every output port, read from op definitions.

A node's outputs are laid out by its op's definition: TensorFlow's op registry for stock
ops, the :class:`FusedOpDef` for declared fused ops, and the signature of the library
function for a node that calls a function by name.  Each output argument is one tensor,
or as many as its ``number_attr`` or ``type_list_attr`` attribute says; its dtype is fixed
or read from the node's ``type_attr``.  A ref output's dtype is the reference's
``dtype + 100``.

The partitioner asks about special edges only (string, resource, ref); segment functions
ask for dtypes and argument names (a function body names tensors ``node:arg:index``).
Definitions are read once per op type and a node's layout once per node.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..fusion.fused_ops import FusedOpDef
from ..graph.index import GraphIndex
from ..graph.tf_ops import tensorflow_op_def
from ..graph.vocabulary import DT_RESOURCE, DT_STRING, dtype_enum

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.node_def_pb2 import NodeDef

REF_OFFSET = 100
STRING, RESOURCE, REF = "string", "resource", "ref"
_SPECIAL = frozenset({DT_STRING, DT_RESOURCE})
_RESOURCE = frozenset({DT_RESOURCE})


@dataclass(frozen=True)
class ArgSpec:
    """One input or output argument of an op definition."""

    name: str
    type: int = 0
    type_attr: str = ""
    number_attr: str = ""
    type_list_attr: str = ""
    is_ref: bool = False


@dataclass(frozen=True)
class OpLayout:
    """An op's arguments, its attribute defaults, and whether its outputs can be special."""

    outputs: tuple[ArgSpec, ...]
    inputs: tuple[ArgSpec, ...]
    defaults: Mapping[str, Any]
    #: some output may be a string, a resource or a ref
    may_be_special: bool
    #: some output may be a resource
    may_be_resource: bool
    #: some input is a ref input
    has_ref_input: bool
    #: the only output argument, when it is one tensor (most ops): read without expanding
    single: ArgSpec | None


def _spec(arg: Any) -> ArgSpec:
    return ArgSpec(arg.name, int(arg.type), arg.type_attr, arg.number_attr, arg.type_list_attr, bool(arg.is_ref))


def _op_def_layout(op_def: Any) -> OpLayout:
    allowed = {a.name: set(a.allowed_values.list.type) for a in op_def.attr if a.type in ("type", "list(type)")}
    defaults = {a.name: a.default_value for a in op_def.attr if a.HasField("default_value")}
    outputs = tuple(_spec(a) for a in op_def.output_arg)
    inputs = tuple(_spec(a) for a in op_def.input_arg)

    def may_be(arg: ArgSpec, dtypes: frozenset[int], ref: bool) -> bool:
        if (ref and arg.is_ref) or arg.type in dtypes:
            return True
        attr = arg.type_attr or arg.type_list_attr
        return bool(attr) and (not allowed.get(attr) or bool(allowed[attr] & dtypes))

    return OpLayout(outputs, inputs, defaults, any(may_be(a, _SPECIAL, True) for a in outputs),
                    any(may_be(a, _RESOURCE, False) for a in outputs), any(a.is_ref for a in inputs),
                    _single(outputs))


def _single(outputs: tuple[ArgSpec, ...]) -> ArgSpec | None:
    if len(outputs) == 1 and not outputs[0].number_attr and not outputs[0].type_list_attr:
        return outputs[0]
    return None


def _fused_layout(op_def: FusedOpDef) -> OpLayout:
    def spec(arg: Any) -> ArgSpec:
        return ArgSpec(arg.name, dtype_enum(arg.dtype)) if arg.dtype else ArgSpec(arg.name, type_attr=arg.type_attr)

    outputs = tuple(spec(a) for a in op_def.outputs)
    return OpLayout(outputs, tuple(spec(a) for a in op_def.inputs), {}, True, True, False, _single(outputs))


class EdgeTypes:
    """Output dtypes and argument layouts of the nodes of one indexed graph."""

    def __init__(self, index: GraphIndex, fused_ops: Mapping[str, FusedOpDef] | None = None) -> None:
        self.index = index
        self.fused_ops = dict(fused_ops or {})
        self.functions = {f.signature.name: f.signature for f in index.graph_def.library.function}
        self._layouts: dict[str, OpLayout | None] = {}
        self._outputs: dict[int, tuple[tuple[str, int, int], ...] | None] = {}

    def layout(self, op: str) -> OpLayout | None:
        """The layout of op type ``op``, or None for an op nothing here defines."""
        if op in self._layouts:
            return self._layouts[op]
        found: OpLayout | None = None
        if op in self.functions:
            found = _op_def_layout(self.functions[op])
        elif op in self.fused_ops:
            found = _fused_layout(self.fused_ops[op])
        else:
            op_def = tensorflow_op_def(op)
            found = _op_def_layout(op_def) if op_def is not None else None
        self._layouts[op] = found
        return found

    def outputs(self, i: int) -> tuple[tuple[str, int, int], ...] | None:
        """Per output port of node ``i``: ``(argument name, index in the argument, dtype)``; None
        when its op is defined nowhere or an attribute it needs is missing."""
        if i in self._outputs:
            return self._outputs[i]
        layout = self.layout(self.index.ops[i])
        found = None if layout is None else _expand(layout.outputs, layout.defaults, self.index.nodes[i])
        self._outputs[i] = found
        return found

    def output_dtype(self, i: int, port: int) -> int | None:
        """The dtype of output ``port`` of node ``i`` (ref dtypes + 100), or None if unknown."""
        layout = self.layout(self.index.ops[i])
        if layout is not None and layout.single is not None:
            if port != 0:
                return None
            arg = layout.single
            dtype = arg.type
            if not dtype:
                value = _attr(self.index.nodes[i], arg.type_attr, layout.defaults)
                if value is None:
                    return None
                dtype = int(value.type)
            return dtype + REF_OFFSET if arg.is_ref else dtype
        outs = self.outputs(i)
        if outs is None or port >= len(outs):
            return None
        return outs[port][2]

    def output_arg(self, i: int, port: int) -> tuple[str, int] | None:
        """``(argument name, index in the argument)`` of output ``port`` of node ``i``, or None."""
        layout = self.layout(self.index.ops[i])
        if layout is not None and layout.single is not None:
            return (layout.single.name, 0) if port == 0 else None
        outs = self.outputs(i)
        if outs is None or port >= len(outs):
            return None
        return outs[port][0], outs[port][1]

    def special(self, producer: int, port: int, consumer: int, slot: int) -> str | None:
        """``"string"``, ``"resource"`` or ``"ref"`` when the edge carries one, else None."""
        layout = self.layout(self.index.ops[producer])
        if layout is not None and layout.may_be_special:
            dtype = self.output_dtype(producer, port)
            if dtype is not None:
                if dtype > REF_OFFSET:
                    return REF
                if dtype == DT_STRING:
                    return STRING
                if dtype == DT_RESOURCE:
                    return RESOURCE
        consumer_layout = self.layout(self.index.ops[consumer])
        if consumer_layout is not None and consumer_layout.has_ref_input:
            ins = _expand(consumer_layout.inputs, consumer_layout.defaults, self.index.nodes[consumer])
            if ins is not None and slot < len(ins) and ins[slot][2] > REF_OFFSET:
                return REF
        return None

    def may_be_resource(self, i: int) -> bool:
        """Whether node ``i``'s op can output a resource at all (cheap: one look-up per op type)."""
        layout = self.layout(self.index.ops[i])
        return layout is not None and layout.may_be_resource

    def has_resource_output(self, i: int) -> bool:
        """Some output port of node ``i`` is a resource."""
        layout = self.layout(self.index.ops[i])
        if layout is None or not layout.may_be_resource:
            return False
        if layout.single is not None:
            return self.output_dtype(i, 0) == DT_RESOURCE
        return any(dtype == DT_RESOURCE for _, _, dtype in self.outputs(i) or ())


def _attr(node: "NodeDef", name: str, defaults: Mapping[str, Any]) -> Any:
    if name in node.attr:
        return node.attr[name]
    return defaults.get(name)


def _expand(args: Sequence[ArgSpec], defaults: Mapping[str, Any],
            node: "NodeDef") -> tuple[tuple[str, int, int], ...] | None:
    """``(argument name, index, dtype)`` per tensor of ``args`` on ``node``."""
    out: list[tuple[str, int, int]] = []
    for arg in args:
        if arg.type_list_attr:
            value = _attr(node, arg.type_list_attr, defaults)
            if value is None:
                return None
            types = [int(t) for t in value.list.type]
        else:
            dtype = arg.type
            if not dtype:
                value = _attr(node, arg.type_attr, defaults)
                if value is None:
                    return None
                dtype = int(value.type)
            count = 1
            if arg.number_attr:
                value = _attr(node, arg.number_attr, defaults)
                if value is None:
                    return None
                count = int(value.i)
            types = [dtype] * count
        ref = REF_OFFSET if arg.is_ref else 0
        out.extend((arg.name, k, t + ref) for k, t in enumerate(types))
    return tuple(out)
