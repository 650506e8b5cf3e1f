"""Errors of the NpuOptimizer session options, and how their messages read.

Every mistake in a session configuration is one :class:`SessionOptionError`
whose message is a single line naming the option (or options), what was
given and what is allowed.  The string parsers raise :class:`ValueProblem`
with only the specific problem; the option table adds the option's name, the
given value and the allowed values.
"""
from __future__ import annotations

from ..errors import OptionError

OPTIMIZER_NAME = "NpuOptimizer"
_SHOWN_CHARS = 120


class SessionOptionError(OptionError):
    """A bad NpuOptimizer session option: unknown key, wrong value kind, bad
    value, bad combination, or a configuration without an NpuOptimizer entry."""

    def __init__(self, message: str, *, options: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        #: The options the error is about, the first one being the main culprit.
        self.options = options

    @property
    def option(self) -> str | None:
        """The option the error is about (the first one for a combination)."""
        return self.options[0] if self.options else None


class ValueProblem(ValueError):
    """What is wrong with one option value (raised by the syntax parsers)."""


def show(value: object) -> str:
    """A given value as the message shows it: strings quoted and escaped onto
    one line, long ones shortened."""
    if isinstance(value, str):
        text = repr(value)
        if len(text) > _SHOWN_CHARS:
            text = text[: _SHOWN_CHARS - 4] + "...'"
        return text
    return repr(value)


def bad_value(option: str, given: object, problem: str, allowed: str) -> SessionOptionError:
    """The error for one option whose value is wrong."""
    return SessionOptionError(
        f"{OPTIMIZER_NAME} option {option}: {show(given)} {problem}; allowed: {allowed}",
        options=(option,))


def bad_combination(options: tuple[str, ...], problem: str, allowed: str) -> SessionOptionError:
    """The error for options that are each valid but cannot be used together."""
    return SessionOptionError(
        f"{OPTIMIZER_NAME} options {', '.join(options)}: {problem}; allowed: {allowed}",
        options=options)
