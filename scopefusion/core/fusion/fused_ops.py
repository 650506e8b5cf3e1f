"""Fused-op definitions: each fused op type is declared once, with its
inputs, outputs, attributes and a reference implementation in TensorFlow ops.

The reference implementation is what makes a fused graph runnable in stock
TensorFlow (see :mod:`scopefusion.core.tf_form`) and therefore verifiable.
It is called as ``reference(*inputs, **attrs)`` and returns a tuple of
tensors, one per declared output.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence



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
    #: output port -> input index whose shape it has (``{0: 0}``: y is shaped like x), so shape
    #: inference sees through the fused op in later stages
    same_shape: Mapping[int, int] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for port, source in self.same_shape.items():
            if not (0 <= port < len(self.outputs) and 0 <= source < len(self.inputs)):
                raise ValueError(f"FusedOpDef {self.name!r}: same_shape maps output {port} to input {source}, "
                                 f"but the op has {len(self.outputs)} output(s) and {len(self.inputs)} input(s)")

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


def shape_rules(fused_ops: Mapping[str, FusedOpDef]) -> dict[str, dict[int, int]]:
    """Per fused op type, which outputs have the shape of which input (see ``same_shape``)."""
    return {name: dict(op.same_shape) for name, op in fused_ops.items() if op.same_shape}
