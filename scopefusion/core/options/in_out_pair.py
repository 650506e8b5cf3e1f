"""The ``in_out_pair`` option: which stretches of a graph go to the device.

Its value is a Python literal, a list of ``[in_nodes, out_nodes]`` pairs, as
``str()`` of a list writes it: ``"[[['a', 'b'], ['c']]]"``.  It is read with
:func:`ast.literal_eval`.  The reference reads it with a character parser that
skips a pair of fewer than two lists and drops quotes and spaces from names;
here every malformed pair is an error and names are kept exactly.  A name
repeated within one side of a pair (seed 003's first example lists
``'while_1/strided_sli'`` twice) is taken once, as the reference does.  Whether
the names exist in a graph is checked by the partitioner, not here.
"""
from __future__ import annotations

import ast
from typing import NamedTuple

from .errors import ValueProblem

IN_OUT_PAIR_SYNTAX = ("a Python list of [in_nodes, out_nodes] pairs of node-name lists, "
                      "e.g. \"[[['a', 'b'], ['c']]]\"")


class InOutPair(NamedTuple):
    """The first (``inputs``) and last (``outputs``) nodes of one stretch."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def __str__(self) -> str:
        return str([list(self.inputs), list(self.outputs)])


def _names(value: object, number: int, side: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise ValueProblem(f"has a {type(value).__name__} as the {side} of pair {number}, "
                           "not a list of node names")
    if not value:
        raise ValueProblem(f"has no {side} in pair {number}")
    for name in value:
        if not isinstance(name, str) or not name.strip():
            raise ValueProblem(f"has {name!r} among the {side} of pair {number}, which is not a node name")
    return tuple(dict.fromkeys(value))


def parse_in_out_pair(text: str) -> tuple[InOutPair, ...]:
    """The pairs of an ``in_out_pair`` value, each with at least one input and
    one output node."""
    try:
        value = ast.literal_eval(text.strip())
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        raise ValueProblem("is not a Python literal") from None
    if not isinstance(value, (list, tuple)):
        raise ValueProblem(f"is a {type(value).__name__}, not a list of pairs")
    if not value:
        raise ValueProblem("has no pair")
    pairs = []
    for number, pair in enumerate(value, 1):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            size = f"{len(pair)} item(s)" if isinstance(pair, (list, tuple)) else f"a {type(pair).__name__}"
            raise ValueProblem(f"has {size} as pair {number}, not two lists [in_nodes, out_nodes]")
        pairs.append(InOutPair(_names(pair[0], number, "in_nodes"), _names(pair[1], number, "out_nodes")))
    return tuple(pairs)
