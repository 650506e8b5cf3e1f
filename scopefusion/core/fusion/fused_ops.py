"""Fused-op definitions: each fused op type is declared once, with its
inputs, outputs, attributes and a reference implementation in TensorFlow ops.

The reference implementation is what makes a fused graph runnable in stock
TensorFlow (see :mod:`scopefusion.core.tf_form`) and therefore verifiable.
It is called as ``reference(*inputs, **attrs)`` and returns a tuple of
tensors, one per declared output.

Optional inputs
---------------
An input declared ``TensorArg(..., optional=True)`` may be left out.  Optional inputs come after
every required one.  An op with optional inputs has one more attribute, declared for it:
``optional_inputs`` (``list(string)``, default empty), the names of the optional inputs a node
has, in declaration order.  The node's data inputs are the required inputs, then the listed
optional ones, in that order: ``DynamicRNN(x, w, b, init_h, init_c[, seq_length])`` with
``optional_inputs = ["seq_length"]`` has six inputs, without the attribute five.  A node never
guesses from its input count which optional inputs it has.  The reference implementation still
takes every declared input by position, ``None`` for one the node does not have (the attribute
itself is not passed to it).

Repeated inputs
---------------
An input declared ``TensorArg(..., number_attr="N")`` stands for ``N`` tensors, ``N`` an ``int``
attribute of the op (as TensorFlow's ``ConcatV2`` declares its ``values``): the node has that many
data inputs in its place, and the reference implementation gets them as one list.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Mapping, Sequence



class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

#: the attribute of an op with optional inputs listing those a node has
OPTIONAL_INPUTS_ATTR = "optional_inputs"

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
    #: an input a node may leave out (see "Optional inputs" above); outputs are never optional
    optional: bool = False
    #: an input that stands for a list of tensors (see "Repeated inputs" above): as many as the
    #: node's int attribute of this name says
    number_attr: str | None = None

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
        required = self.required_inputs
        for port, source in self.same_shape.items():
            if not (0 <= port < len(self.outputs) and 0 <= source < len(required)):
                raise ValueError(f"FusedOpDef {self.name!r}: same_shape maps output {port} to input {source}, "
                                 f"but the op has {len(self.outputs)} output(s) and {len(required)} required "
                                 "input(s)")
        self._check_repeated_inputs()
        self._declare_optional_inputs()

    def _check_repeated_inputs(self) -> None:
        for a in self.inputs:
            if a.number_attr is None:
                continue
            declared = self.attr_def(a.number_attr)
            if declared is None or declared.type != "int":
                raise ValueError(f"FusedOpDef {self.name!r}: input {a.name!r} repeats by attribute "
                                 f"{a.number_attr!r}, which is not an int attribute of the op")
            if a.optional:
                raise ValueError(f"FusedOpDef {self.name!r}: input {a.name!r} cannot both repeat and be optional")

    def arg_count(self, arg: TensorArg, attrs: Mapping[str, Any]) -> int:
        """How many data inputs ``arg`` stands for on a node with these attribute values (Python values
        or ``AttrValue`` messages): 1, or the value of its ``number_attr``."""
        if arg.number_attr is None:
            return 1
        value = attrs.get(arg.number_attr, self._defaults.get(arg.number_attr))
        if hasattr(value, "i"):  # an AttrValue
            value = value.i
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TypeError(f"attribute {arg.number_attr!r} of fused op {self.name} must be a positive int, "
                            f"not {value!r}")
        return value

    def _declare_optional_inputs(self) -> None:
        optional = [a.name for a in self.inputs if a.optional]
        if any(not a.optional for a in self.inputs[len(self.inputs) - len(optional):]):
            raise ValueError(f"FusedOpDef {self.name!r}: optional inputs ({', '.join(optional)}) must come after "
                             "every required input")
        if any(a.optional for a in self.outputs):
            raise ValueError(f"FusedOpDef {self.name!r}: an output cannot be optional")
        if not optional:
            return
        declared = self.attr_def(OPTIONAL_INPUTS_ATTR)
        if declared is not None:  # by an earlier __post_init__ (dataclasses.replace) or by hand
            if declared.type != "list(string)" or declared.default != []:
                raise ValueError(f"FusedOpDef {self.name!r}: attribute {OPTIONAL_INPUTS_ATTR!r} is declared for an "
                                 "op with optional inputs; leave it out, it is declared for you")
            return
        listing = AttrDef(OPTIONAL_INPUTS_ATTR, "list(string)", [],
                          description="the optional inputs the node has, in declaration order "
                                      f"({', '.join(optional)}), after the required ones")
        object.__setattr__(self, "attrs", tuple(self.attrs) + (listing,))

    @cached_property
    def required_inputs(self) -> tuple[TensorArg, ...]:
        return tuple(a for a in self.inputs if not a.optional)

    @cached_property
    def optional_inputs(self) -> tuple[TensorArg, ...]:
        return tuple(a for a in self.inputs if a.optional)

    @cached_property
    def attr_types(self) -> Mapping[str, str]:
        """Each attribute's declared type, by name (read it, never change it)."""
        return {a.name: a.type for a in self.attrs}

    @cached_property
    def _defaults(self) -> dict[str, Any]:
        return {a.name: a.default for a in self.attrs if a.default is not REQUIRED}

    def present_inputs(self, attrs: Mapping[str, Any]) -> tuple[TensorArg, ...]:
        """The inputs a node with these attribute values has, in order (its data inputs).

        ``attrs`` holds Python values or ``AttrValue`` messages; check them first
        (:meth:`check_attrs`): an unknown name here is left out."""
        listed = set(listed_optional_inputs(attrs))
        args = self.required_inputs + tuple(a for a in self.optional_inputs if a.name in listed)
        if all(a.number_attr is None for a in args):
            return args
        return tuple(a for arg in args for a in (arg,) * self.arg_count(arg, attrs))  # repeated inputs

    def input_count(self, attrs: Mapping[str, Any]) -> int:
        if attrs.get(OPTIONAL_INPUTS_ATTR) is None and all(a.number_attr is None for a in self.inputs):
            return len(self.required_inputs)  # no optional input listed: the required ones
        return len(self.present_inputs(attrs))

    def check_optional_inputs(self, attrs: Mapping[str, Any]) -> list[str]:
        """Problems with the ``optional_inputs`` attribute among ``attrs`` (empty when fine or unset)."""
        if OPTIONAL_INPUTS_ATTR not in attrs or not self.optional_inputs:
            return []
        try:
            listed = listed_optional_inputs(attrs)
        except TypeError:
            return [f"attribute {OPTIONAL_INPUTS_ATTR!r} of fused op {self.name} is not a list of input names"]
        names = [a.name for a in self.optional_inputs]
        unknown = [n for n in listed if n not in names]
        if unknown:
            return [f"attribute {OPTIONAL_INPUTS_ATTR!r} of fused op {self.name} lists {unknown[0]!r}, which is not "
                    f"one of its optional inputs ({', '.join(names)})"]
        if listed != [n for n in names if n in listed]:
            return [f"attribute {OPTIONAL_INPUTS_ATTR!r} of fused op {self.name} must list each optional input "
                    f"once, in declaration order ({', '.join(names)}), not {listed}"]
        return []

    def attr_def(self, name: str) -> AttrDef | None:
        for a in self.attrs:
            if a.name == name:
                return a
        return None

    def check_attrs(self, attrs: Mapping[str, Any]) -> list[str]:
        """Problems with a set of attribute values (empty when they are fine)."""
        problems = []
        declared = self.attr_types
        for key in attrs:
            if key not in declared and not key.startswith("_"):  # "_": internal, TensorFlow ignores them
                problems.append(f"attribute {key!r} is not declared by fused op {self.name}")
        for a in self.attrs:
            if a.name not in attrs and a.default is REQUIRED:
                problems.append(f"required attribute {a.name!r} of fused op {self.name} is not set")
        return problems + self.check_optional_inputs(attrs)

    def with_defaults(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(self._defaults)
        out.update(attrs)
        return out

    def signature(self) -> str:
        """A one-line signature, e.g. ``LayerNorm(x, gamma, beta) -> (y, mean, variance)``; optional
        inputs in brackets: ``DynamicRNN(x, w, b, init_h, init_c[, seq_length]) -> (y, h, c)``."""
        ins = ", ".join(f"{i.name}*{i.number_attr}" if i.number_attr else i.name for i in self.required_inputs)
        ins += "".join(f"[, {i.name}]" for i in self.optional_inputs)
        outs = ", ".join(o.name for o in self.outputs)
        return f"{self.name}({ins}) -> ({outs})"


def shape_rules(fused_ops: Mapping[str, FusedOpDef]) -> dict[str, dict[int, int]]:
    """Per fused op type, which outputs have the shape of which input (see ``same_shape``)."""
    return {name: dict(op.same_shape) for name, op in fused_ops.items() if op.same_shape}


def listed_optional_inputs(attrs: Mapping[str, Any]) -> list[str]:
    """The names in an ``optional_inputs`` attribute (a Python list of str / bytes or an
    ``AttrValue``), empty when it is not set; raises ``TypeError`` for another value."""
    value = attrs.get(OPTIONAL_INPUTS_ATTR)
    if value is None:
        return []
    if hasattr(value, "list"):  # an AttrValue
        value = list(value.list.s)
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{OPTIONAL_INPUTS_ATTR} must be a list of names, not {value!r}")
    return [v.decode() if isinstance(v, bytes) else str(v) for v in value]
