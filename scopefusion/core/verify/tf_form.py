"""The TensorFlow-runnable form of a fused graph.

Every node whose op is a declared fused op (in the graph or in a function body of
its library) becomes a ``PartitionedCall`` of a library function traced from the op's
reference implementation (one function per op type, attribute values and input dtypes).
An op with optional inputs calls a function of the inputs the node has (its ``optional_inputs``);
the reference gets ``None`` for the others.
The original op type and attributes stay on the node as ``_scopefusion_*`` attributes,
which TensorFlow ignores, so the node can still be identified.  Inside a function body
the tensors read from such a node are renamed to the call's outputs (``node:output:k``).
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import EmitError
from ..fusion.fused_ops import OPTIONAL_INPUTS_ATTR, FusedOpDef, listed_optional_inputs
from ..graph.attrs import attr_value_to_python, make_attr_value

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef

ORIGINAL_OP_ATTR = "_scopefusion_op"
ATTR_PREFIX = "_scopefusion_attr_"


def _arg_dtype(node: "NodeDef", arg: Any, op_def: FusedOpDef) -> int:
    if arg.dtype is not None:
        return int(make_attr_value(arg.dtype, "type").type)
    if arg.type_attr in node.attr:
        return int(node.attr[arg.type_attr].type)
    default = op_def.attr_def(arg.type_attr)
    if default is not None and default.default is not None and not isinstance(default.default, type(None)):
        try:
            return int(make_attr_value(default.default, "type").type)
        except Exception:
            pass
    raise EmitError(f"{node.name}: cannot tell the dtype of {op_def.name} argument {arg.name!r}")


class _FunctionCache:
    def __init__(self, graph: "GraphDef") -> None:
        self.graph = graph
        self.names = {f.signature.name for f in graph.library.function}
        self.by_key: dict[str, str] = {}

    def function_for(self, node: "NodeDef", op_def: FusedOpDef) -> tuple[str, list[int], list[int]]:
        import tensorflow as tf  # deferred: TensorFlow costs seconds to import

        problems = op_def.check_optional_inputs(node.attr)
        if problems:
            raise EmitError(f"{node.name}: {problems[0]}")
        present = op_def.present_inputs(node.attr)
        in_types = [_arg_dtype(node, a, op_def) for a in present]
        out_types = [_arg_dtype(node, a, op_def) for a in op_def.outputs]
        attrs = {
            a.name: attr_value_to_python(node.attr[a.name]) if a.name in node.attr else a.default
            for a in op_def.attrs if a.name != OPTIONAL_INPUTS_ATTR
        }
        given = [a in present for a in op_def.inputs]
        counts = [op_def.arg_count(a, node.attr) if a.number_attr else 0 for a in op_def.inputs]
        for a in op_def.attrs:
            if a.type == "type" and attrs.get(a.name) is not None:
                attrs[a.name] = tf.dtypes.as_dtype(attrs[a.name])
        key_text = repr((op_def.name, sorted((k, repr(v)) for k, v in attrs.items()), in_types, given))
        key = hashlib.sha1(key_text.encode()).hexdigest()[:12]
        if key in self.by_key:
            return self.by_key[key], in_types, out_types
        if op_def.reference is None:
            raise EmitError(f"fused op {op_def.name} has no reference implementation")
        specs = [tf.TensorSpec(None, tf.dtypes.as_dtype(t)) for t in in_types]
        reference = op_def.reference

        def body(*args: Any) -> Any:
            it = iter(args)
            every = [None if not has else [next(it) for _ in range(n)] if n else next(it)  # a repeated one: a list
                     for has, n in zip(given, counts, strict=True)]  # None for an optional input left out
            # Grappler inlines the call as "<node>/<body node>": a scope of the
            # reference's own keeps those names clear of nodes kept in the graph.
            with tf.name_scope(f"{op_def.name}_reference"):
                outs = reference(*every, **attrs)
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            if len(outs) != len(op_def.outputs):
                raise EmitError(
                    f"reference of {op_def.name} returned {len(outs)} outputs, declared {len(op_def.outputs)}"
                )
            return [tf.identity(o) for o in outs]

        try:
            concrete = tf.function(body, input_signature=specs, autograph=False).get_concrete_function()
        except EmitError:
            raise
        except Exception as exc:
            raise EmitError(f"reference implementation of {op_def.name} failed: {exc}") from exc
        fdef = concrete.function_def
        name = f"scopefusion_{op_def.name}_{key}"
        old = fdef.signature.name
        fdef.signature.name = name
        for nested in concrete.graph.as_graph_def().library.function:
            if nested.signature.name not in self.names and nested.signature.name != old:
                self.graph.library.function.add().CopyFrom(nested)
                self.names.add(nested.signature.name)
        self.graph.library.function.add().CopyFrom(fdef)
        self.names.add(name)
        self.by_key[key] = name
        return name, in_types, out_types


def to_tf_runnable(graph_def: "GraphDef", fused_ops: Mapping[str, FusedOpDef]) -> "GraphDef":
    """A copy of ``graph_def`` in which every fused node, in the graph and in the bodies of its
    library's functions, calls its reference implementation."""
    from tensorflow.core.framework import graph_pb2  # deferred: TensorFlow costs seconds to import

    out = graph_pb2.GraphDef()
    out.CopyFrom(graph_def)
    cache = _FunctionCache(out)
    for node in out.node:
        op_def = fused_ops.get(node.op)
        if op_def is not None:
            _to_call(node, op_def, cache)
    for position in range(len(out.library.function)):  # the functions the cache adds hold no fused node
        _function_to_calls(out.library.function[position], fused_ops, cache)
    return out


def _function_to_calls(function: Any, fused_ops: Mapping[str, FusedOpDef], cache: _FunctionCache) -> None:
    """The fused nodes of a function body as calls; a call names its results ``output:k``, so
    the tensors read from them are renamed (``node:argument:0`` -> ``node:output:k``)."""
    renamed: dict[str, str] = {}
    for node in function.node_def:
        op_def = fused_ops.get(node.op)
        if op_def is None:
            continue
        _to_call(node, op_def, cache)
        for k, arg in enumerate(op_def.outputs):
            renamed[f"{node.name}:{arg.name}:0"] = f"{node.name}:output:{k}"
    if not renamed:
        return
    for node in function.node_def:
        for j, tensor in enumerate(node.input):
            if tensor in renamed:
                node.input[j] = renamed[tensor]
    for key, tensor in list(function.ret.items()):
        if tensor in renamed:
            function.ret[key] = renamed[tensor]


def _to_call(node: "NodeDef", op_def: FusedOpDef, cache: _FunctionCache) -> None:
    """Turn fused node ``node`` into a ``PartitionedCall`` of its reference implementation."""
    from tensorflow.core.framework.attr_value_pb2 import AttrValue  # deferred: TensorFlow costs seconds to import

    try:
        fname, in_types, out_types = cache.function_for(node, op_def)
    except EmitError as exc:
        if not op_def.origin:
            raise
        raise EmitError(f"{exc} (fused op {op_def.name} is declared by {op_def.origin})") from exc
    data_inputs = [i for i in node.input if not i.startswith("^")]
    expected = len(in_types)
    if len(data_inputs) != expected:
        listed = f" (with optional inputs {listed_optional_inputs(node.attr)})" if op_def.optional_inputs else ""
        raise EmitError(f"{node.name}: {op_def.name}{listed} takes {expected} inputs, the node has {len(data_inputs)}")
    original = {}
    for key in node.attr:
        copy = AttrValue()
        copy.CopyFrom(node.attr[key])
        original[key] = copy
    op_type = node.op
    node.attr.clear()
    node.op = "PartitionedCall"
    node.attr["f"].func.name = fname
    node.attr["Tin"].list.type.extend(in_types)
    node.attr["Tout"].list.type.extend(out_types)
    node.attr[ORIGINAL_OP_ATTR].s = op_type.encode()
    for key, value in original.items():
        node.attr[ATTR_PREFIX + key].CopyFrom(value)
