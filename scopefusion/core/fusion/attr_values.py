"""A candidate's attributes written as ``AttrValue`` messages, checked against the types its op
declares (a fused op's declaration, or TensorFlow's op definition).

A plain scalar (bool, int, string, bytes, float) is written once per declared type and value and
the message shared: plans only read their attribute values, and the rewrite copies them into the
new nodes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ..graph.attrs import infer_attr_type, make_attr_value
from ..graph.protos import message_class
from ..graph.tf_ops import tensorflow_attr_types
from .candidate import FusionCandidate
from .fused_ops import FusedOpDef
from .refusal import Refused

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.attr_value_pb2 import AttrValue


def attr_types_for_op(op: str, fused_ops: Mapping[str, FusedOpDef]) -> dict[str, str]:
    """Declared attribute types of a fused op, or of a TensorFlow op."""
    op_def = fused_ops.get(op)
    if op_def is not None:
        return dict(op_def.attr_types)
    return tensorflow_attr_types(op)


def _declared_types(op: str, fused_ops: Mapping[str, FusedOpDef]) -> Mapping[str, str]:
    """:func:`attr_types_for_op` to read only: a fused op's own table rather than a copy."""
    op_def = fused_ops.get(op)
    return op_def.attr_types if op_def is not None else tensorflow_attr_types(op)


def written_attrs(
    candidate: FusionCandidate, op_def: FusedOpDef | None, fused_ops: Mapping[str, FusedOpDef]
) -> list[dict[str, "AttrValue"]]:
    """The attributes of each new node as ``AttrValue``s; a value that cannot be
    written as its declared (or inferred) type refuses the result."""
    if candidate.inner_nodes:
        return [_written_set(n.op, n.attrs, f"inner node {n.name!r}: ", fused_ops) for n in candidate.inner_nodes]
    attrs = op_def.with_defaults(candidate.attrs) if op_def else candidate.attrs
    return [_written_set(candidate.type, attrs, "", fused_ops)]


def _written_set(op: str, attrs: Mapping[str, Any], where: str,
                 fused_ops: Mapping[str, FusedOpDef]) -> dict[str, "AttrValue"]:
    """One node's attributes written; a plain scalar (a float by its exact bits: ``-0.0 == 0.0``)
    is looked up among the values already written for its declared type."""
    if not attrs:
        return {}
    types = _declared_types(op, fused_ops)
    memo_table = _WRITTEN
    out: dict[str, AttrValue] = {}
    for key, value in attrs.items():
        attr_type = types.get(key)
        kind = type(value)
        if kind in _SCALARS:
            memo: tuple | None = (attr_type, kind, value)
        elif kind is float:
            memo = (attr_type, kind, value.hex())
        else:
            memo = None
        written = memo_table.get(memo) if memo is not None else None
        if written is None:
            written = _written_attr(where, key, value, attr_type)
            if memo is not None:
                if len(memo_table) >= _WRITTEN_MAX:
                    memo_table.clear()
                memo_table[memo] = written
        out[key] = written
    return out


def _written_attr(where: str, key: str, value: Any, attr_type: str | None) -> "AttrValue":
    if attr_type is None and key.startswith("_") and isinstance(value, message_class("AttrValue")):
        return value  # an internal attribute copied from a node (``_description``): kept as it is
    wanted = f" as {attr_type}" if attr_type else ""
    try:
        written = make_attr_value(value, attr_type or infer_attr_type(value))
    except Exception as exc:  # noqa: BLE001 - any conversion failure is the pass's
        raise Refused(f"{where}attribute {key!r} = {value!r} cannot be written{wanted}: {exc}") from None
    problem = _attr_kind_problem(value, written, attr_type)
    if problem:
        raise Refused(f"{where}attribute {key!r} = {value!r} cannot be written{wanted}: {problem}")
    return written


#: Attribute values already written, by declared type, Python type and value (shared: plans only
#: read them, and the rewrite copies them into the new nodes); cleared when it holds this many.
_WRITTEN: dict[tuple, "AttrValue"] = {}
_WRITTEN_MAX = 1 << 16
_SCALARS = frozenset({bool, int, str, bytes})


#: The AttrValue field each declared attr type is written to.
_ATTR_FIELDS = {"float": "f", "int": "i", "bool": "b", "string": "s", "type": "type", "shape": "shape"}


def _attr_kind_problem(value: object, written: object, attr_type: str | None) -> str | None:
    """Why a value that converted is still wrong for its declared type, if it is."""
    if attr_type is None:
        return None
    if isinstance(value, float) and attr_type == "int" and not value.is_integer():
        return "not a whole number"
    if attr_type == "bool" and isinstance(value, (str, bytes, float)):
        return f"a bool is wanted, not {type(value).__name__} (which would be read as {bool(value)})"
    field = _ATTR_FIELDS.get(attr_type, "list" if attr_type.startswith("list(") else None)
    kind = written.WhichOneof("value")  # type: ignore[attr-defined]
    if value is written and field is not None and kind not in (field, None):
        return f"an AttrValue holding {kind!r}"
    return None
