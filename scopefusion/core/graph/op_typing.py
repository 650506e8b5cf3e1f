"""The dtypes a node's inputs must have and its outputs have, by its op definition.

An ``OpDef`` declares each input and output argument with a fixed dtype, a dtype attribute
(``T``), a count attribute (``N`` copies) or a list of dtypes (``Tin``); a call of a function
of the graph's library takes and gives what the function's signature declares.  Resolved
against a node's attributes (or the op's defaults) this gives the node's data input dtypes
and output dtypes, each as base dtypes (a reference dtype counts as its value dtype: TensorFlow
reads a reference where a value is wanted).  ``0`` stands for a dtype that cannot be told;
``None`` for a count that cannot be told (an op neither TensorFlow nor the library knows, or
an attribute it needs missing, which the attribute checks report).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.node_def_pb2 import NodeDef

_REF_OFFSET = 100  # TensorFlow's reference dtypes are the value dtypes plus 100


class NodeTypes(NamedTuple):
    """What a node takes and gives (see the module's documentation)."""

    inputs: tuple[int, ...] | None
    outputs: tuple[int, ...] | None


UNKNOWN = NodeTypes(None, None)


def base_dtype(dtype: int) -> int:
    return dtype - _REF_OFFSET if dtype > _REF_OFFSET else dtype


def _attr(node: "NodeDef", op_def: Any, name: str) -> Any | None:
    """The node's value of attribute ``name``, else the op's default, else None."""
    if name in node.attr:
        return node.attr[name]
    for a in op_def.attr:
        if a.name == name and a.HasField("default_value"):
            return a.default_value
    return None


def _arg_types(node: "NodeDef", op_def: Any, args: Sequence[Any]) -> tuple[int, ...] | None:
    types: list[int] = []
    for arg in args:
        if arg.type_list_attr:
            value = _attr(node, op_def, arg.type_list_attr)
            if value is None:
                return None
            types.extend(base_dtype(t) for t in value.list.type)
            continue
        dtype = arg.type
        if not dtype:
            value = _attr(node, op_def, arg.type_attr) if arg.type_attr else None
            dtype = base_dtype(value.type) if value is not None else 0
        count = 1
        if arg.number_attr:
            value = _attr(node, op_def, arg.number_attr)
            if value is None or value.i < 0:
                return None
            count = value.i
        types.extend([dtype] * count)
    return tuple(types)


def _function_types(node: "NodeDef", signature: Any) -> NodeTypes:
    """A call of a library function: its signature's arguments, a dtype attribute read from the
    call's own attributes."""

    def resolve(args: Sequence[Any]) -> tuple[int, ...]:
        out = []
        for arg in args:
            if arg.type:
                out.append(base_dtype(arg.type))
            elif arg.type_attr and arg.type_attr in node.attr:
                out.append(base_dtype(node.attr[arg.type_attr].type))
            else:
                out.append(0)
        return tuple(out)

    if any(a.number_attr or a.type_list_attr for a in (*signature.input_arg, *signature.output_arg)):
        return UNKNOWN
    return NodeTypes(resolve(signature.input_arg), resolve(signature.output_arg))


def node_types(node: "NodeDef", op_def: Any | None, functions: dict[str, Any]) -> NodeTypes:
    """What ``node`` takes and gives, by its op definition ``op_def`` (None: not TensorFlow's)
    or, when its op names one, the signature of a function of ``functions``."""
    signature = functions.get(node.op)
    if signature is not None:
        return _function_types(node, signature)
    if op_def is None:
        return UNKNOWN
    return NodeTypes(_arg_types(node, op_def, op_def.input_arg), _arg_types(node, op_def, op_def.output_arg))


__all__ = ["UNKNOWN", "NodeTypes", "base_dtype", "node_types"]
