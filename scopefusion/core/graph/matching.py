"""Matching op-pattern expressions (:mod:`scopefusion.core.graph.pattern`) against a graph.

A :class:`PatternMatcher` walks the graph from a tensor, expression by expression,
binding labels to nodes and variables to tensors.  A failed branch (an alternative,
one order of a commutative op) is undone through a trail, so trying costs only what
it bound.  When nothing matches, the :class:`MatchFailure` that got furthest says
where and why.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Container, Mapping

import numpy as np

from .attrs import attr_equals, attr_value_to_python
from .canonical import Virtual, rewrites, seen_as, spellings, witnesses
from .match_failure import FurthestFailure, MatchFailure
from .match_steps import step_of
from .pattern import Op, OpPattern, as_var
from .root_filter import FirstLevelFailure, root_filter
from .view import GraphView
from .vocabulary import CONTROL, FORWARDING_OPS, dtype_name, tensor_name

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.node_def_pb2 import NodeDef

Tensor = tuple[int, int]


@dataclass
class PatternMatch:
    """One match of an :class:`OpPattern`: labelled nodes, bound tensors, captured constants
    and every node the expressions covered (``members``)."""

    view: GraphView
    pattern: OpPattern
    root: int
    nodes: dict[str, int]
    tensors: dict[str, Tensor]
    consts: dict[str, "np.ndarray"]
    members: frozenset[int]
    #: what :attr:`reads` is worked out from, when first asked for (most passes never ask)
    reads_from: Callable[[], dict[Tensor, str]] = field(default=dict, repr=False, compare=False)

    @functools.cached_property
    def reads(self) -> dict[Tensor, str]:
        """Which variable each data input slot ``(consumer node, slot)`` reads, as the pattern
        declares it (the slots where a variable was met): two variables bound to one tensor are
        told apart here (see :attr:`PatternMatcher.reads`)."""
        return self.reads_from()

    def name(self, label: str) -> str:
        """The name of the node bound to ``label``."""
        return self.view.index.names[self.nodes[label]]

    def node(self, label: str) -> "NodeDef":
        """The live ``NodeDef`` bound to ``label`` (read it, never change it)."""
        return self.view.lend(self.nodes[label])

    def tensor(self, name: str) -> Tensor:
        """The tensor bound to variable ``name`` (or, for a label, the node's output 0)."""
        if name in self.tensors:
            return self.tensors[name]
        return self.nodes[name], 0

    def tensor_name(self, name: str) -> str:
        node, port = self.tensor(name)
        return tensor_name(self.view.index.names[node], port)

    @property
    def root_name(self) -> str:
        return self.view.index.names[self.root]

    def output_labels(self) -> tuple[str, ...]:
        """The labels whose outputs the match produces; the root when the pattern names none."""
        return self.pattern.outputs


class PatternMatcher:
    """Matches expressions against one graph, optionally only over the nodes in ``inside``.

    Matching backtracks: each expression tries every way it matches (its step, see
    :mod:`.match_steps`), so a choice made early (an order of a commutative op's inputs, an
    alternative) is revisited when something after it fails.  Bindings live on a trail and
    are undone exactly when a choice is left.
    """

    def __init__(self, view: GraphView, *, inside: Container[int] | None = None,
                 defs: Mapping[str, Any] | None = None) -> None:
        self.view = view
        self.index = view.index
        self.inside = inside
        self.defs: dict[str, Any] = dict(defs or {})
        self._base_defs = dict(self.defs)
        self.nodes: dict[str, int] = {}
        self.tensors: dict[str, Tensor] = {}
        self.consts: dict[str, Any] = {}
        self.members: set[int] = set()
        #: (consumer name, data input slot) -> the variable the pattern reads there (see :attr:`reads`)
        self._read_at: dict[tuple[str, int], str] = {}
        self._label_exprs: dict[str, Op] = {}  # the expression each label was first matched by
        self._trail: list[tuple[Any, Any]] = []
        self._progress = 0
        self._where: list[tuple[str, int]] = []
        self._best: FurthestFailure | None = None
        #: (id(value), id(Const expression)) -> (the value, why it is not that constant or None)
        self._const_checks: dict[tuple[int, int], tuple[Any, Callable[[], str] | None]] = {}

    # -- public ---------------------------------------------------------------------
    def match(self, tensor: Tensor, expr: Any) -> None:
        """Match ``tensor`` against ``expr`` (keeping the first way it matches, bindings kept);
        raises :class:`MatchFailure`, saying where the attempt that got furthest failed."""
        self._best = None
        self._where = []  # (a match that succeeded leaves the places it stood at)
        if step_of(as_var(expr))(self, tensor, _whole):
            return
        best = self._best or FurthestFailure(self._progress, None, lambda: f"{self._tname(tensor)} does not match")
        raise MatchFailure(best.text, best.progress)

    def match_pattern(self, pattern: OpPattern, root: int) -> PatternMatch:
        """Match a whole pattern with its root at node ``root``, from a clean state."""
        self.reset()
        if pattern.defs or self.defs != self._base_defs:
            self.defs = {**self._base_defs, **pattern.defs}
        self.match((root, pattern.root_port), pattern.root)
        tensors = dict(self.tensors)
        reads = functools.partial(self._declared_reads, dict(self._read_at), tensors)
        return PatternMatch(self.view, pattern, root, dict(self.nodes), tensors, dict(self.consts),
                            frozenset(self.members), reads)

    def reset(self) -> None:
        """Forget every binding."""
        self.nodes, self.tensors, self.consts, self.members = {}, {}, {}, set()
        self._read_at = {}
        self._label_exprs = {}
        self._trail, self._progress, self._where = [], 0, []

    def name(self, i: int) -> str:
        return self.index.names[i]

    @property
    def reads(self) -> dict[Tensor, str]:
        """Which variable each data input slot ``(consumer node, slot)`` of the match reads, as the
        pattern declares it (recorded where the variable was met, checked here once: only a real
        slot that reads the variable's tensor, or a copy of it, counts; an operand of an op seen
        through a view, e.g. the Neg of a Sub read as an Add, is no slot of its own)."""
        return self._declared_reads(self._read_at, self.tensors)

    def _declared_reads(self, read_at: dict[tuple[str, int], str], tensors: dict[str, Tensor]) -> dict[Tensor, str]:
        """:attr:`reads` of the slots noted in ``read_at``, the variables bound as in ``tensors`` (a
        match's, worked out when it is asked for: the matcher has been reset since)."""
        index, out = self.index, {}
        for (consumer, slot), name in read_at.items():
            node, bound = index.index.get(consumer), tensors.get(name)
            if node is None or bound is None:
                continue
            data = [t for t in index.inputs[node] if t[1] != CONTROL]
            if slot < len(data) and self._forward(data[slot])[0] == self._forward(bound)[0]:
                out[(node, slot)] = name
        return out

    # -- trail and failures -----------------------------------------------------------
    def _bind(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        table[key] = value
        self._trail.append((table, key))

    def _add_member(self, i: int) -> None:
        if i not in self.members:
            self.members.add(i)
            self._trail.append((self.members, i))

    def _undo(self, mark: int) -> None:
        trail = self._trail
        while len(trail) > mark:
            table, key = trail.pop()
            if isinstance(table, set):
                table.discard(key)
            else:
                del table[key]

    def _fail(self, message: Callable[[], str]) -> None:
        """Record a failure; the one that got furthest (the first of equals) is reported.  The
        message is only written when the failure is shown."""
        if self._best is None or self._progress > self._best.progress:
            self._best = FurthestFailure(self._progress, self._where[-1] if self._where else None, message)

    # -- machinery ------------------------------------------------------------------
    def _forward(self, tensor: Tensor, keep: tuple[str, ...] = ()) -> tuple[Tensor, list[int]]:
        """Follow forwarding reads (inside the allowed nodes), except through op types in ``keep``;
        returns the tensor they forward and the forwarding nodes passed."""
        node, port = tensor
        ops, inputs = self.index.ops, self.index.inputs
        if ops[node] not in FORWARDING_OPS:  # most reads: nothing to follow
            return (node, port), []
        passed = []
        for _ in range(64):
            op_type = ops[node]
            if op_type not in FORWARDING_OPS or op_type in keep:
                break
            if self.inside is not None and node not in self.inside:
                break
            data = [t for t in inputs[node] if t[1] != CONTROL]
            if not data:
                break
            passed.append(node)
            node, port = data[0]
        return (node, port), passed

    def _tname(self, tensor: Tensor) -> str:
        if isinstance(tensor, Virtual):  # an op the graph computes without a node of its own
            return f"the {tensor.op} that {self.index.names[tensor.anchor]!r} computes"
        return repr(tensor_name(self.index.names[tensor[0]], tensor[1]))

    def _op_problem(self, node: int, port: int, expr: Op) -> Callable[[], str] | None:
        """Why ``node`` (read at ``port``) is not the op ``expr`` describes (a function writing
        the reason), None when it is."""
        if self.inside is not None and node not in self.inside:
            return lambda: f"{self._tname((node, port))} lies outside the allowed nodes, expected {expr.describe()}"
        actual = self.index.ops[node]
        if expr.types and actual not in expr.types:
            return lambda: f"{self.name(node)!r} is {actual}, expected {expr.describe()}"
        if port != expr.port:
            return lambda: f"{self.name(node)!r} output {port} is used where output {expr.port} is expected"
        bound = self.nodes.get(expr.label) if expr.label is not None else None
        if bound is not None and bound != node:
            return lambda: (f"label {expr.label!r} is bound to {self.name(bound)!r}, but here it would be "
                            f"{self.name(node)!r}")
        if expr.dtypes is None and not expr.attrs:
            return None
        problem = self._attr_problem(node, expr)
        return None if problem is None else (lambda: problem)

    def _attr_problem(self, node: int, expr: Op) -> str | None:
        attrs = self.index.nodes[node].attr
        name = self.name(node)
        if expr.dtypes is not None:
            key = "T" if "T" in attrs else "dtype"
            if key not in attrs or attrs[key].type not in expr.dtypes:
                wanted = ", ".join(sorted(dtype_name(d) for d in expr.dtypes))
                found = dtype_name(attrs[key].type) if key in attrs else "no dtype attribute"
                return f"{name!r} has dtype {found}, expected {wanted}"
        for key, expected in expr.attrs:
            if key not in attrs:
                return f"{name!r} has no attribute {key!r}"
            if callable(expected):
                ok = bool(expected(attr_value_to_python(attrs[key])))
            else:
                ok = attr_equals(attrs[key], expected)
            if not ok:
                shown = getattr(expected, "__name__", "a predicate") if callable(expected) else repr(expected)
                return f"{name!r} has {key}={attr_value_to_python(attrs[key])!r}, expected {shown}"
        return None


def _whole() -> bool:
    """The rest of a match once its root expression matched: nothing; the match is whole."""
    return True


def match_at(view: GraphView, pattern: OpPattern, root: int,
             inside: Container[int] | None = None) -> PatternMatch:
    """Match ``pattern`` with its root at node ``root``; raises :class:`MatchFailure`."""
    return PatternMatcher(view, inside=inside).match_pattern(pattern, root)


def find_matches(view: GraphView, pattern: OpPattern,
                 on_failure: Callable[[int, MatchFailure], None] | None = None,
                 skip: Container[int] = ()) -> list[PatternMatch]:
    """Every match of ``pattern``, trying as roots only the nodes of its root types (by
    the index's op-type table), in graph order, except those in ``skip`` (roots an earlier
    pattern of the same pass matched); ``on_failure`` hears about the rest."""
    index = view.index
    roots: list[int] = []
    for t in pattern.root_types:
        roots.extend(index.nodes_of_type(t))
    matcher = PatternMatcher(view)  # one for every root: each match starts from a clean state
    if any(not any(index.nodes_of_type(t) for t in witnesses(group)) for group in pattern.required_types()):
        return []  # the graph lacks an op type every match has (in any spelling): nothing can match
    # and nodes spelt otherwise that can be seen as a root type (a RealDiv as a Mul ...)
    wanted, plain = frozenset(pattern.root_types), len(roots)
    for t in sorted(spellings(wanted) - wanted):
        roots.extend(i for i in index.nodes_of_type(t) if i not in skip and not seen_as(matcher, i).isdisjoint(wanted))
    if not roots:
        return []
    if len(pattern.root_types) > 1 or len(roots) > plain:
        roots.sort()
    first_look = root_filter(pattern)
    may_match, ops = first_look.may_match, index.ops
    found = []
    for root in roots:
        if root in skip:
            continue
        own = ops[root] in wanted
        if not may_match(index, root) or not own and not any(
                first_look.may_match_view(index, v) for v in rewrites(matcher, root, wanted)):
            if on_failure is not None:  # (a node spelt otherwise fails at its own type: progress 0)
                on_failure(root, FirstLevelFailure(functools.partial(match_at, view, pattern, root), int(own)))
            continue
        try:
            found.append(matcher.match_pattern(pattern, root))
        except MatchFailure as why:
            if on_failure is not None:
                on_failure(root, why)
    return found

