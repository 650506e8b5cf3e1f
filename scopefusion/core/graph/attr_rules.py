"""What an op declares for its attributes, looked up once per op type, and what is wrong
with an attribute's value under that declaration (for :mod:`.validate`).

An op of TensorFlow's registry declares each attribute's type (``int``, ``list(type)``
...), the values it allows and its minimum; a value of another kind, an invalid dtype,
a value outside the allowed ones or below the minimum, or a tensor whose shape is
undefined or too large is a problem, spoken of in one short sentence.  Nodes of one type
mostly repeat the same attributes: :func:`attr_signature` gives the bytes that hold a
node's attributes, so that a node repeating those of a clean node is known clean.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .output_ports import output_count
from .protos import data_type_values, message_class
from .tf_ops import tensorflow_op_def
from .vocabulary import dtype_name

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.node_def_pb2 import NodeDef

_MAX_TEXT = 80
_MAX_ELEMENTS = 2**63 - 1  # a tensor holds at most this many elements

#: How an AttrValue holding each kind is spoken of, by its field name.
_KIND_WORDS = {"s": "a string", "i": "an int", "f": "a float", "b": "a bool", "type": "a dtype",
               "shape": "a shape", "tensor": "a tensor", "func": "a function", "placeholder": "a placeholder"}
_LIST_WORDS = {"s": "strings", "i": "ints", "f": "floats", "b": "bools", "type": "dtypes", "shape": "shapes",
               "tensor": "tensors", "func": "functions"}
#: The field of an AttrValue (and of its list) holding each declared type.
_FIELD_OF_TYPE = {"string": "s", "int": "i", "float": "f", "bool": "b", "type": "type", "shape": "shape",
                  "tensor": "tensor", "func": "func"}


@dataclass(frozen=True)
class AttrRule:
    """What an op declares for one attribute."""

    declared: str  # the op def's type, e.g. "int" or "list(type)"
    field: str  # the AttrValue (or list) field its values are held in
    is_list: bool
    allowed: frozenset[Any] | None  # allowed dtypes or strings
    minimum: int | None  # of an int's value, or of a list's length


@dataclass
class OpRules:
    """What the checks need to know of one op type, looked up once per type."""

    attrs: dict[str, AttrRule] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    outputs: int | None = None  # the same for every node of the type; None: count per node
    seen: dict[tuple[str, str, Any], str | None] = field(default_factory=dict)  # values judged, by attribute
    clean: set[bytes] = field(default_factory=set)  # attribute signatures found without a problem
    hits: int = 0  # nodes found clean by their signature
    op_def: Any = None  # TensorFlow's definition of the op (None: not TensorFlow's, or a library function's)


#: Tags of a serialized NodeDef's name, op, input and device fields (numbers 1 to 4, length-delimited).
_HEAD_TAGS = frozenset({0x0A, 0x12, 0x1A, 0x22})
#: 1 at the bytes of :data:`_HEAD_TAGS`, else 0: read by byte value.
_IS_HEAD_TAG = bytes(int(b in _HEAD_TAGS) for b in range(256))


def after_head_fields(data: bytes) -> bytes | None:
    """A serialized NodeDef from its first field that is not its name, op, an input or its device
    on: its attributes (and anything after them) when the fields come in number order, as protobuf
    writes them.  None when the bytes do not read as length-delimited fields."""
    pos, end = 0, len(data)
    is_head = _IS_HEAD_TAG
    while pos < end and is_head[data[pos]]:
        if pos + 1 >= end:
            return None
        length = data[pos + 1]
        pos += 2
        if length >= 0x80:  # a length of more than one byte (a varint)
            length, shift = length & 0x7F, 7
            while True:
                if pos >= end:
                    return None
                byte = data[pos]
                pos += 1
                length |= (byte & 0x7F) << shift
                if byte < 0x80:
                    break
                shift += 7
        pos += length
    return data[pos:] if pos <= end else None


def attr_signature(node: "NodeDef", *, deterministic: bool = False) -> bytes:
    """The serialized node without its leading name, op, input and device fields: bytes that hold
    its attributes, so that two nodes with the same signature hold the same attribute values (the
    whole node's bytes, naming it, if they do not read as fields).  ``deterministic``: attribute
    maps in key order, so that equal attributes give equal bytes whatever order they were set in."""
    data = node.SerializeToString(deterministic=deterministic)
    rest = after_head_fields(data)
    return data if rest is None else rest


def shorten(text: str) -> str:
    """``text`` quoted for a one-line message, its middle cut when it is long."""
    if len(text) > _MAX_TEXT:
        text = f"{text[:_MAX_TEXT // 2]}...{text[-_MAX_TEXT // 2:]}"
    return repr(text)


def _attr_rule(attr: Any) -> AttrRule:
    declared = attr.type
    is_list = declared.startswith("list(")
    element = declared[5:-1] if is_list else declared
    allowed = None
    if attr.HasField("allowed_values"):
        values = attr.allowed_values.list
        allowed = frozenset(values.type) if element == "type" else frozenset(values.s) if element == "string" else None
    return AttrRule(declared, _FIELD_OF_TYPE.get(element, element), is_list, allowed or None,
                    attr.minimum if attr.has_minimum else None)


def op_rules(op: str, functions: dict[str, int]) -> OpRules:
    """The rules of op type ``op``: its attributes when TensorFlow defines it (and no
    function of the graph's library takes its name), and its output count when
    that is the same for every node."""
    probe = message_class("NodeDef")(op=op)  # no attributes: a count that needs none is the type's
    rules = OpRules(outputs=output_count(probe, functions))
    op_def = None if op in functions else tensorflow_op_def(op)
    if op_def is not None:
        rules.op_def = op_def
        rules.attrs = {a.name: _attr_rule(a) for a in op_def.attr}
        rules.required = tuple(a.name for a in op_def.attr if not a.HasField("default_value"))
    return rules


def valid_dtypes() -> frozenset[int]:
    return frozenset(v for v in data_type_values() if 0 < v < 100)  # no DT_INVALID, no ref types


def _list_fields(value: Any) -> list[str]:
    return [fd.name for fd, _ in value.list.ListFields()]


def attr_problem(key: str, value: Any, rule: AttrRule, dtypes: frozenset[int]) -> str | None:
    """What is wrong with attribute ``key`` holding ``value`` under ``rule``, or None."""
    kind = value.WhichOneof("value")
    held = _list_fields(value) if kind == "list" else []
    if rule.is_list:
        if kind not in ("list", None):
            return f"attribute {key!r} holds {_KIND_WORDS.get(kind, kind)}, the op declares {rule.declared}"
        if any(f != rule.field for f in held):
            other = next(f for f in held if f != rule.field)
            return f"attribute {key!r} holds a list of {_LIST_WORDS[other]}, the op declares {rule.declared}"
        items = list(getattr(value.list, rule.field)) if held else []
    else:
        if kind == "list" and held:
            return f"attribute {key!r} holds a list of {_LIST_WORDS[held[0]]}, the op declares {rule.declared}"
        if kind in (None, "list"):
            return f"attribute {key!r} holds no value, the op declares {rule.declared}"
        if kind != rule.field:
            return f"attribute {key!r} holds {_KIND_WORDS.get(kind, kind)}, the op declares {rule.declared}"
        items = [getattr(value, kind)]
    return _value_problem(key, items, rule, dtypes)


def _tensor_shape_problem(key: str, tensor: Any) -> str | None:
    """A tensor's shape must be fully defined and hold fewer than 2**63 elements."""
    shape = tensor.tensor_shape
    dims = [d.size for d in shape.dim]
    if shape.unknown_rank or any(d < 0 for d in dims):
        return f"attribute {key!r} holds a tensor of undefined shape {'?' if shape.unknown_rank else dims}"
    elements = 1
    for d in dims:
        elements *= d
    if elements > _MAX_ELEMENTS:
        return f"attribute {key!r} holds a tensor of shape {dims}, more than 2**63 - 1 elements"
    return None


def _value_problem(key: str, items: list[Any], rule: AttrRule, dtypes: frozenset[int]) -> str | None:
    if rule.field == "tensor":
        return next((p for p in (_tensor_shape_problem(key, t) for t in items) if p is not None), None)
    if rule.field == "type":
        bad = [t for t in items if t not in dtypes]
        if bad:
            return f"attribute {key!r} holds dtype enum {bad[0]}, which is no valid dtype"
    if rule.allowed is not None:
        bad = [t for t in items if t not in rule.allowed]
        if bad:
            shown = dtype_name(bad[0]) if rule.field == "type" else shorten(bad[0].decode("utf-8", "replace"))
            return f"attribute {key!r} holds {shown}, which the op does not allow"
    if rule.minimum is not None:
        count = len(items) if rule.is_list else items[0]
        if count < rule.minimum:
            if rule.is_list:
                return f"attribute {key!r} holds {count} value(s), the op wants at least {rule.minimum}"
            return f"attribute {key!r} holds the value {count}, the op's minimum is {rule.minimum}"
    return None


__all__ = ["AttrRule", "OpRules", "attr_problem", "attr_signature", "op_rules", "shorten", "valid_dtypes"]
