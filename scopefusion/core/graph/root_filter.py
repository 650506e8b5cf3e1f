"""A first look at a candidate root: can any of a pattern's root forms match there one level down?

A pattern whose root has many alternatives (GELU's groupings of its products, tried at every
``Mul`` of a graph) spends most of its search failing at the root's inputs.  For each root form
:class:`RootFilter` keeps the op types each of its inputs must have (an input that is an op, or
alternatives of ops, or a variable defined as one of those).  A form is ruled out at a node when
none of those inputs finds its types among the ops the node's inputs read through forwarding ops
(the matcher forwards the same way; input order is ignored, so this holds for commutative and
unordered inputs too) and its other inputs are variables or constants.  Then every attempt of
that form fails at the first input it tries that is an op, having matched the root alone: a node
whose every form is ruled out is no match, and its failure has progress 1, as the matcher's
would (so it is never a near miss), whatever order the matcher would have tried.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from .index import GraphIndex
from .match_failure import MatchFailure
from .pattern import Alt, Const, Op, OpPattern, Var, as_var, root_options
from .vocabulary import CONTROL, FORWARDING_OPS

#: How far a chain of forwarding ops is followed (as the matcher does).
MAX_FORWARDING = 64


class RootFilter:
    """Rules out candidate roots of one pattern that fail at the root's inputs."""

    def __init__(self, pattern: OpPattern) -> None:
        #: per root form: its op types, and the type sets of its inputs (None: the form cannot be
        #: ruled out by its inputs: it does not look at them, or one may match ops of any type)
        self._forms: list[tuple[frozenset[str], list[frozenset[str]] | None]] = []
        for option in root_options(pattern.root):
            self._forms.append((frozenset(option.types), _input_types(option, pattern.defs)))
        #: per root op type, what its forms ask of the root's inputs (see :meth:`_wanted`)
        self._by_op: dict[str, frozenset[str] | None] = {}

    def may_match(self, index: GraphIndex, root: int) -> bool:
        op = index.ops[root]
        if op in FORWARDING_OPS:  # the matcher may forward through the root itself: no shortcut
            return True
        wanted = self._by_op[op] if op in self._by_op else self._wanted(op)
        if wanted is None:
            return True
        return bool(wanted) and _reads_any(index, root, wanted)

    def _wanted(self, op: str) -> frozenset[str] | None:
        """The op types one of which a root of type ``op`` must read (through forwarding ops)
        for some form to stay possible: the union over the forms of that type (a form is kept
        when its inputs' types meet what the root reads); None when a form of that type cannot
        be ruled out at all, empty when no form has that type."""
        union: set[str] = set()
        for types, wanted in self._forms:
            if types and op not in types:
                continue
            if wanted is None:
                self._by_op[op] = None
                return None
            union.update(*wanted)
        self._by_op[op] = known = frozenset(union)
        return known


def _input_types(option: Op, defs: Mapping[str, Any]) -> list[frozenset[str]] | None:
    """The type sets of ``option``'s inputs that are ops; None unless there is one and every
    other input is a variable (defined as nothing) or a constant, which match no op."""
    if option.inputs is None:
        return None
    wanted = []
    for e in option.inputs:
        types = _types(e, defs, frozenset())
        if types is not None:
            wanted.append(types)
        elif not _matches_no_op(e, defs):
            return None
    return wanted or None


def _matches_no_op(expr: Any, defs: Mapping[str, Any]) -> bool:
    expr = as_var(expr)
    return isinstance(expr, Const) or (isinstance(expr, Var) and expr.name not in defs)


def _types(expr: Any, defs: Mapping[str, Any], expanding: frozenset[str]) -> frozenset[str] | None:
    """The op types a tensor matching ``expr`` may be produced by (None: any)."""
    expr = as_var(expr)
    if isinstance(expr, Op):
        return frozenset(expr.types) or None
    if isinstance(expr, Alt):
        options = [_types(o, defs, expanding) for o in expr.options]
        return None if any(o is None for o in options) else frozenset().union(*options)  # type: ignore[arg-type]
    if isinstance(expr, Var) and expr.name in defs and expr.name not in expanding:
        return _types(defs[expr.name], defs, expanding | {expr.name})
    return None


def _reads_any(index: GraphIndex, node: int, types: frozenset[str]) -> bool:
    """Whether a data input of ``node`` reads, through forwarding ops, a node of one of ``types``
    (a forwarding op passed on the way counts too)."""
    ops, inputs = index.ops, index.inputs
    for p, port in inputs[node]:
        if port == CONTROL:
            continue
        for _ in range(MAX_FORWARDING):
            op = ops[p]
            if op in types:
                return True
            if op not in FORWARDING_OPS:
                break
            data = [t for t in inputs[p] if t[1] != CONTROL]
            if not data:
                break
            p = data[0][0]
    return False


def root_filter(pattern: OpPattern) -> RootFilter:
    """The pattern's :class:`RootFilter`, made once (patterns are immutable)."""
    known = pattern.__dict__.get("_root_filter")
    if known is None:
        known = RootFilter(pattern)
        object.__setattr__(pattern, "_root_filter", known)
    return known


class FirstLevelFailure(MatchFailure):
    """A root :class:`RootFilter` ruled out: it fails having matched the root alone (progress 1);
    its reason, the matcher's own, is found only if asked for, by ``attempt`` (the match there)."""

    def __init__(self, attempt: Callable[[], Any]) -> None:
        super().__init__("", 1)
        self._attempt = attempt

    def __str__(self) -> str:
        try:
            self._attempt()
        except MatchFailure as why:
            return str(why)
        raise AssertionError("a root the first look ruled out matched")  # pragma: no cover
