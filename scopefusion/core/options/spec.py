"""How one NpuOptimizer option is described and checked.

A value arrives as a :class:`RawValue`: the kind of ``AttrValue`` field that
was set (``b``, ``i``, ``s``, ...) and its Python value.  An
:class:`OptionSpec` says which kind the option takes, the reference's
default, how its text or number is parsed into a typed value and what is
allowed, and whether this project acts on it or only records it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import SessionOptionError, ValueProblem, bad_value, show

Scalar = bool | int | str
Parser = Callable[[Any], Any]

#: How each ``AttrValue`` field is named in messages.
KIND_NAMES: dict[str | None, str] = {
    "b": "a bool (.b)",
    "i": "an int (.i)",
    "s": "a string (.s)",
    "f": "a float (.f)",
    "list": "a list (.list)",
    "type": "a dtype (.type)",
    "shape": "a shape (.shape)",
    "tensor": "a tensor (.tensor)",
    "func": "a function (.func)",
    "placeholder": "a placeholder (.placeholder)",
    None: "no value",
}
_EXAMPLES = {"b": "True", "i": "1", "s": "b'...'"}

#: What an empty string given for a text option means.
EMPTY_IS_UNSET = "unset"     # the same as leaving the option out
EMPTY_IS_ERROR = "error"     # a bad value: the option has a syntax and "" says nothing
EMPTY_IS_VALUE = "value"     # parsed like any other text (allowed values decide)


@dataclass(frozen=True)
class RawValue:
    """One ``parameter_map`` value: which field is set and its value."""

    kind: str | None
    value: Any

    @classmethod
    def of(cls, value: object) -> RawValue:
        """The raw value a Python bool, int, str or bytes would be written as."""
        if isinstance(value, bool):
            return cls("b", value)
        if isinstance(value, int):
            return cls("i", value)
        if isinstance(value, bytes):
            try:
                return cls("s", value.decode("utf-8"))
            except UnicodeDecodeError:
                raise ValueError(f"the bytes {value[:40]!r} are not UTF-8 text") from None
        if isinstance(value, str):
            return cls("s", value)
        if isinstance(value, float):
            return cls("f", value)
        raise TypeError(f"an NpuOptimizer option value is a bool, int or str, not {type(value).__name__}")

    def describe(self) -> str:
        """The kind and value, as an error message shows them."""
        if self.kind in ("b", "i", "s", "f"):
            return f"{KIND_NAMES[self.kind]} = {show(self.value)}"
        return KIND_NAMES.get(self.kind, f"a {self.kind} field")


@dataclass(frozen=True)
class OptionSpec:
    """One option of the NpuOptimizer entry."""

    name: str
    kind: str
    #: The reference's default as the option would be written (``None``: not set).
    default: Scalar | None
    parse: Parser
    allowed: str
    #: True when this project acts on the option; False when it validates and
    #: records it for a back end.
    acted_on: bool
    empty: str = EMPTY_IS_VALUE
    note: str = ""

    @property
    def use(self) -> str:
        """``acted on`` or ``recorded``."""
        return "acted on" if self.acted_on else "recorded"

    def check_kind(self, raw: RawValue) -> None:
        """Raise unless ``raw`` is of this option's kind."""
        if raw.kind != self.kind:
            raise SessionOptionError(
                f"NpuOptimizer option {self.name}: given {raw.describe()}; allowed: {KIND_NAMES[self.kind]} "
                f"(parameter_map[{self.name!r}].{self.kind} = {_EXAMPLES[self.kind]}): {self.allowed}",
                options=(self.name,))

    def typed(self, raw: RawValue) -> tuple[bool, Any]:
        """``(True, typed value)`` for a good value, ``(False, None)`` for an
        empty string that means "not set"; raises for a bad kind or value."""
        self.check_kind(raw)
        if self.kind == "s" and raw.value.strip() == "" and self.empty != EMPTY_IS_VALUE:
            if self.empty == EMPTY_IS_UNSET:
                return False, None
            raise bad_value(self.name, raw.value, "is empty (leave the option out to keep its default)",
                            self.allowed)
        try:
            return True, self.parse(raw.value)
        except ValueProblem as problem:
            raise bad_value(self.name, raw.value, str(problem), self.allowed) from None


# ------------------------------------------------------ value checkers

def flag(value: bool) -> bool:
    """A bool option's value as it is."""
    return bool(value)


def text(value: str) -> str:
    """A free text option's value as it is."""
    return value


def one_of(*allowed: Scalar) -> Parser:
    """A parser accepting exactly the ``allowed`` values."""
    def parse(value: Scalar) -> Scalar:
        if value not in allowed:
            raise ValueProblem("is not one of the allowed values")
        return value
    return parse


def at_least(low: int) -> Parser:
    """A parser accepting integers from ``low`` up."""
    def parse(value: int) -> int:
        if value < low:
            raise ValueProblem(f"is below {low}")
        return value
    return parse


def between(low: int, high: int) -> Parser:
    """A parser accepting integers from ``low`` to ``high``, both included."""
    def parse(value: int) -> int:
        if not low <= value <= high:
            raise ValueProblem(f"is outside {low}..{high}")
        return value
    return parse
