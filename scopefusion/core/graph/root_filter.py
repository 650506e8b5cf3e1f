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

import weakref
from typing import Any, Callable, Mapping

from .canonical import NodeView, Virtual, spellings
from .chains import CHAIN_SPLITS, MAX_CHAIN_LEAVES, chain_leaves, is_family
from .index import GraphIndex
from .match_failure import MatchFailure
from .pattern import Alt, Const, Op, OpPattern, Var, as_var, root_options
from .vocabulary import ADD_OPS, CONTROL, FORWARDING_OPS

#: Op types seen as another with the very same inputs (a BiasAdd is an Add of the same two).
_SAME_INPUTS = {"BiasAdd": frozenset(ADD_OPS)}
#: How far a chain of forwarding ops is followed (as the matcher does).
MAX_FORWARDING = 64
#: How many nodes of an associative chain are looked through (the matcher cuts a chain into at
#: most MAX_CHAIN_LEAVES operands, so it opens fewer).
MAX_CHAIN_NODES = 2 * MAX_CHAIN_LEAVES


class RootFilter:
    """Rules out candidate roots of one pattern that fail at the root's inputs."""

    def __init__(self, pattern: OpPattern) -> None:
        #: per root form: its op types, the type sets of its inputs (None: the form cannot be
        #: ruled out by its inputs: it does not look at them, or one may match ops of any type),
        #: and the op types its operands may sit under when it is an associative chain
        self._forms: list[tuple[frozenset[str], list[frozenset[str]] | None, frozenset[str], int]] = []
        for option in root_options(pattern.root):
            leaves = chain_leaves(option)
            through = CHAIN_SPLITS[is_family(option.types) or ""] if leaves is not None else frozenset()
            needs = len(leaves) if leaves is not None else 0
            self._forms.append((frozenset(option.types), _input_types(option, pattern.defs), through, needs))
        #: per root op type, what its forms ask of the root's inputs (see :meth:`_wanted`)
        self._by_op: dict[str, tuple[frozenset[str], frozenset[str], int] | None] = {}

    def may_match(self, index: GraphIndex, root: int) -> bool:
        op = index.ops[root]
        if op in FORWARDING_OPS:  # the matcher may forward through the root itself: no shortcut
            return True
        wanted = self._by_op[op] if op in self._by_op else self._wanted(op)
        if wanted is None:
            return True
        types, through, needs = wanted
        if needs and _chain_operands(index, root, through, needs) < needs:
            return False  # every form is a chain of more operands than this one can be cut into
        return bool(types) and _reads_any(index, root, types, through)

    def may_match_view(self, index: GraphIndex, view: NodeView) -> bool:
        """:meth:`may_match` for a node seen through a view (another spelling of it): its inputs
        are the view's, an op the graph has no node for counting as its own type."""
        wanted = self._by_op[view.op] if view.op in self._by_op else self._wanted(view.op)
        if wanted is None:
            return True
        if wanted[2]:  # a chain: its operands may sit deeper, but there must be enough of them
            return _view_operands(index, view, wanted[1], wanted[2]) >= wanted[2]
        types = wanted[0]
        for term in view.inputs:
            if isinstance(term, Virtual):
                if term.op in types:
                    return True
            elif _reads_any_of(index, [term[0]], types):
                return True
        return False

    def _wanted(self, op: str) -> tuple[frozenset[str], frozenset[str], int] | None:
        """The op types one of which a root of type ``op`` must read (through forwarding ops,
        and through the nodes of a chain) for some form to stay possible: the union over the
        forms of that type (a form is kept when its inputs' types meet what the root reads),
        with the op types of chain nodes read through; None when a form of that type cannot be
        ruled out at all, or none has that type (a node spelt otherwise, seen as a root type)."""
        union: set[str] = set()
        through: set[str] = set()
        needs: list[int] = []
        found = False
        for types, wanted, chain, count in self._forms:
            if types and op not in types:
                continue
            found = True
            if wanted is None:
                self._by_op[op] = None
                return None
            union.update(*wanted)
            through.update(chain)
            needs.append(count)
        if not found:  # a node spelt otherwise: its inputs are the form's only for some spellings
            # (the matcher sees it as the first of those types, in order, that the pattern roots at)
            rooted = [t for t in sorted(_SAME_INPUTS.get(op, ())) if any(t in types for types, *_ in self._forms)]
            known = self._wanted(rooted[0]) if rooted else None
            self._by_op[op] = known
            return known
        self._by_op[op] = known = (frozenset(union), frozenset(through), min(needs))
        return known


def _input_types(option: Op, defs: Mapping[str, Any]) -> list[frozenset[str]] | None:
    """The type sets of ``option``'s inputs that are ops; None unless there is one and every
    other input is a variable (defined as nothing) or a constant, which match no op.  An
    associative chain's operands may sit deeper, under nodes of its family (or of a spelling
    it splits); a square root's argument may be a clip (``Maximum``)."""
    if option.inputs is None:
        return None
    leaves = chain_leaves(option)
    wanted = []
    if set(option.types) & {"Sqrt", "Rsqrt"}:
        wanted.append(frozenset({"Maximum"}))
    for e in leaves if leaves is not None else option.inputs:
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
        return spellings(expr.types) or None
    if isinstance(expr, Alt):
        options = [_types(o, defs, expanding) for o in expr.options]
        return None if any(o is None for o in options) else frozenset().union(*options)  # type: ignore[arg-type]
    if isinstance(expr, Var) and expr.name in defs and expr.name not in expanding:
        return _types(defs[expr.name], defs, expanding | {expr.name})
    return None


def _reads_any(index: GraphIndex, node: int, types: frozenset[str], through: frozenset[str] = frozenset()) -> bool:
    """Whether a data input of ``node`` reads, through forwarding ops (and nodes of ``through``,
    a chain's, at most :data:`MAX_CHAIN_NODES` of them), a node of one of ``types`` (a forwarding
    op passed on the way counts too)."""
    return _reads_any_of(index, [p for p, port in index.inputs[node] if port != CONTROL], types, through)


def _reads_any_of(index: GraphIndex, producers: list[int], types: frozenset[str],
                  through: frozenset[str] = frozenset()) -> bool:
    """:func:`_reads_any` from the given producers."""
    ops, inputs = index.ops, index.inputs
    stack = list(producers)
    opened = 0
    while stack:
        p = stack.pop()
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
        if ops[p] in through and opened < MAX_CHAIN_NODES:
            opened += 1
            stack.extend(q for q, port in inputs[p] if port != CONTROL)
    return False


def _forwarded(ops: list[str], inputs: list, p: int) -> tuple[int, str]:
    """The node a forwarding op ``p`` reads through its chain of forwarding ops (at most
    :data:`MAX_FORWARDING` of them, as the matcher follows) and its op."""
    for _ in range(MAX_FORWARDING):
        op = ops[p]
        if op not in FORWARDING_OPS:
            return p, op
        data = [t for t in inputs[p] if t[1] != CONTROL]
        if not data:
            return p, op
        p = data[0][0]
    return p, ops[p]


#: per graph index, what :func:`_chain_operands` told, by ``(through, enough)`` and node: the patterns of
#: one pass (GELU's erf and tanh forms) ask the same of the same nodes
_TOLD: "weakref.WeakKeyDictionary[GraphIndex, dict[tuple[frozenset[str], int], dict[int, int]]]" = \
    weakref.WeakKeyDictionary()


#: the index asked about last and what was told of it (most questions in a row are of one index)
_LAST_TOLD: "tuple[weakref.ref[GraphIndex], dict[tuple[frozenset[str], int], dict[int, int]]] | None" = None


def _chain_operands(index: GraphIndex, node: int, through: frozenset[str], enough: int) -> int:
    """At most how many operands the chain at ``node`` may be cut into (through nodes of
    ``through``, read through forwarding ops), counting up to ``enough``: at once when no input
    is read through a forwarding op or splits (most nodes: each input is one operand), else
    worked out once per index, node, ``through`` and ``enough``."""
    global _LAST_TOLD
    ops = index.ops
    data = [p for p, port in index.inputs[node] if port != CONTROL]
    for p in data:
        if ops[p] in through or ops[p] in FORWARDING_OPS:
            break
    else:
        return len(data)
    last = _LAST_TOLD
    if last is not None and last[0]() is index:
        told = last[1]
    else:
        told = _TOLD.setdefault(index, {})
        _LAST_TOLD = (weakref.ref(index), told)
    known = told.get((through, enough))
    if known is None:
        known = told[(through, enough)] = {}
    count = known.get(node)
    if count is None:
        count = known[node] = _most_operands_of(index, data, 0, through, enough)
    return count


#: Nodes that split into several copies of their input's operands (a square, a power): their
#: count is not bounded here.
_REPEATING = frozenset({"Square", "Pow"})


def _view_operands(index: GraphIndex, view: NodeView, through: frozenset[str], enough: int) -> int:
    """:func:`_chain_operands` of a node seen through a view: a chain of the view's inputs, an op
    the graph has no node for one operand (the matcher never splits one)."""
    real = [term[0] for term in view.inputs if not isinstance(term, Virtual)]
    return _most_operands_of(index, real, len(view.inputs) - len(real), through, enough)


def _most_operands_of(index: GraphIndex, stack: list[int], count: int, through: frozenset[str], enough: int) -> int:
    """:func:`_chain_operands` of a chain whose inputs are the nodes in ``stack`` and ``count``
    operands more."""
    ops, inputs = index.ops, index.inputs
    opened = 0
    while stack and count < enough:
        p = stack.pop()
        op = ops[p]
        if op in FORWARDING_OPS:
            p, op = _forwarded(ops, inputs, p)
        if op in through and opened < MAX_CHAIN_NODES:
            opened += 1
            if op in _REPEATING:
                return enough
            stack.extend([q for q, port in inputs[p] if port != CONTROL])
        else:
            count += 1
    return count + len(stack)


def root_filter(pattern: OpPattern) -> RootFilter:
    """The pattern's :class:`RootFilter`, made once (patterns are immutable)."""
    known = pattern.__dict__.get("_root_filter")
    if known is None:
        known = RootFilter(pattern)
        object.__setattr__(pattern, "_root_filter", known)
    return known


class FirstLevelFailure(MatchFailure):
    """A root :class:`RootFilter` ruled out: it fails having matched the root alone (progress 1;
    0 for a node spelt otherwise, whose own type is what departs from the pattern); its reason,
    the matcher's own, is found only if asked for, by ``attempt`` (the match there)."""

    def __init__(self, attempt: Callable[[], Any], progress: int = 1) -> None:
        super().__init__("", progress)
        self._attempt = attempt

    def __str__(self) -> str:
        try:
            self._attempt()
        except MatchFailure as why:
            return str(why)
        raise AssertionError("a root the first look ruled out matched")  # pragma: no cover
