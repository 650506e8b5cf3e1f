"""Errors in the values of named parameters of the Python API.

A :class:`ParameterError` names the API parameter (``input_shapes``,
``int_range``, ...), as a Python caller wrote it; the command line, which knows
which of its options feeds which parameter, names the option instead.
"""
from __future__ import annotations

from .errors import OptionError


class ParameterError(OptionError):
    """An invalid value of the API parameter ``parameter``."""

    def __init__(self, parameter: str, problem: str) -> None:
        self.parameter = parameter
        self.problem = problem
        super().__init__(f"{parameter}: {problem}")

    def for_option(self, option: str) -> OptionError:
        """The same problem, naming the command-line option ``option``."""
        error = OptionError(f"{option}: {self.problem}")
        error.__cause__ = self
        return error
