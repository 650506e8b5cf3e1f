"""Fused-op definitions: each fused op type is declared once, with its
inputs, outputs, attributes and a reference implementation in TensorFlow ops.

The reference implementation is what makes a fused graph runnable in stock
TensorFlow (see :mod:`scopefusion.core.tf_form`) and therefore verifiable.
It is called as ``reference(*inputs, **attrs)`` and returns a tuple of
tensors, one per declared output.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.attr_value_pb2 import AttrValue


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

ATTR_TYPES = frozenset({
    "float", "int", "bool", "string", "type", "shape",
    "list(float)", "list(int)", "list(bool)", "list(string)", "list(type)",
})


@dataclass(frozen=True)
class TensorArg:
    """An input or output of a fused op: its dtype is fixed or taken from a type attr."""

    name: str
    type_attr: str | None = None
    dtype: str | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if (self.type_attr is None) == (self.dtype is None):
            raise ValueError(f"TensorArg {self.name!r}: give exactly one of type_attr or dtype")


@dataclass(frozen=True)
class AttrDef:
    """An attribute of a fused op."""

    name: str
    type: str
    default: Any = REQUIRED
    description: str = ""

    def __post_init__(self) -> None:
        if self.type not in ATTR_TYPES:
            raise ValueError(f"AttrDef {self.name!r}: unknown attr type {self.type!r}")


@dataclass(frozen=True)
class FusedOpDef:
    """The declaration of one fused op type."""

    name: str
    inputs: tuple[TensorArg, ...]
    outputs: tuple[TensorArg, ...]
    attrs: tuple[AttrDef, ...] = ()
    reference: Callable[..., Sequence[Any]] | None = field(default=None, compare=False)
    description: str = ""
    #: who declared it ("built-in" or a plugin's distribution and version); set by the registry
    origin: str = field(default="", compare=False)

    def attr_def(self, name: str) -> AttrDef | None:
        for a in self.attrs:
            if a.name == name:
                return a
        return None

    def check_attrs(self, attrs: Mapping[str, Any]) -> list[str]:
        """Problems with a set of attribute values (empty when they are fine)."""
        problems = []
        declared = {a.name for a in self.attrs}
        for key in attrs:
            if key not in declared:
                problems.append(f"attribute {key!r} is not declared by fused op {self.name}")
        for a in self.attrs:
            if a.name not in attrs and a.default is REQUIRED:
                problems.append(f"required attribute {a.name!r} of fused op {self.name} is not set")
        return problems

    def with_defaults(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        out = {a.name: a.default for a in self.attrs if a.default is not REQUIRED}
        out.update(attrs)
        return out

    def signature(self) -> str:
        """A one-line signature, e.g. ``LayerNorm(x, gamma, beta) -> (y, mean, variance)``."""
        ins = ", ".join(i.name for i in self.inputs)
        outs = ", ".join(o.name for o in self.outputs)
        return f"{self.name}({ins}) -> ({outs})"


# ---------------------------------------------------------------- attr values
def _dtype_enum(value: Any) -> int:
    if isinstance(value, int):
        return value
    import tensorflow as tf

    return int(tf.dtypes.as_dtype(value).as_datatype_enum)


def make_attr_value(value: Any, attr_type: str) -> "AttrValue":
    """Turn a Python value into an ``AttrValue`` of the declared type."""
    from tensorflow.core.framework.attr_value_pb2 import AttrValue

    if isinstance(value, AttrValue):
        return value
    attr = AttrValue()
    if attr_type == "float":
        attr.f = float(value)
    elif attr_type == "int":
        attr.i = int(value)
    elif attr_type == "bool":
        attr.b = bool(value)
    elif attr_type == "string":
        attr.s = value if isinstance(value, bytes) else str(value).encode()
    elif attr_type == "type":
        attr.type = _dtype_enum(value)  # type: ignore[assignment]
    elif attr_type == "shape":
        for d in value:
            attr.shape.dim.add(size=-1 if d is None else int(d))
    elif attr_type == "list(float)":
        attr.list.f.extend(float(v) for v in value)
    elif attr_type == "list(int)":
        attr.list.i.extend(int(v) for v in value)
    elif attr_type == "list(bool)":
        attr.list.b.extend(bool(v) for v in value)
    elif attr_type == "list(string)":
        attr.list.s.extend(v if isinstance(v, bytes) else str(v).encode() for v in value)
    elif attr_type == "list(type)":
        attr.list.type.extend(_dtype_enum(v) for v in value)
    else:
        raise ValueError(f"unknown attr type {attr_type!r}")
    return attr


def attr_value_to_python(attr: "AttrValue") -> Any:
    """Turn an ``AttrValue`` back into a plain Python value."""
    kind = attr.WhichOneof("value")
    if kind == "list":
        for sub in ("i", "f", "b", "type", "s"):
            values = list(getattr(attr.list, sub))
            if values:
                return [v.decode() if isinstance(v, bytes) else v for v in values]
        return []
    if kind == "s":
        return attr.s.decode("utf-8", "replace")
    if kind == "shape":
        return None if attr.shape.unknown_rank else [d.size for d in attr.shape.dim]
    if kind is None:
        return None
    return getattr(attr, kind)


def infer_attr_type(value: Any) -> str:
    """The attr type of a plain Python value, for ops without a declaration."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, (str, bytes)):
        return "string"
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, bool) for v in value) and value:
            return "list(bool)"
        if all(isinstance(v, int) for v in value):
            return "list(int)"
        if all(isinstance(v, (int, float)) for v in value):
            return "list(float)"
        return "list(string)"
    raise ValueError(f"cannot tell the attr type of {value!r}; pass an AttrValue")
