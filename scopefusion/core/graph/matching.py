"""Matching op-pattern expressions (:mod:`scopefusion.core.graph.pattern`) against a graph.

A :class:`PatternMatcher` walks the graph from a tensor, expression by expression,
binding labels to nodes and variables to tensors.  A failed branch (an alternative,
one order of a commutative op) is undone through a trail, so trying costs only what
it bound.  When nothing matches, the :class:`MatchFailure` that got furthest says
where and why.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Container, Mapping

from .attrs import attr_equals, attr_value_to_python
from .pattern import Alt, AnyTensor, Const, Op, OpPattern, Var, as_var
from .view import GraphView
from .vocabulary import CONTROL, dtype_name, tensor_name

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from tensorflow.core.framework.node_def_pb2 import NodeDef

Tensor = tuple[int, int]

#: Unordered inputs are tried in every order up to this many orders.
MAX_ORDERS = 720


class MatchFailure(Exception):
    """An expression did not match; ``progress`` counts the ops matched before it failed."""

    def __init__(self, message: str, progress: int = 0, *, placed: bool = False) -> None:
        super().__init__(message)
        self.progress = progress
        self.placed = placed  # the message already says which input it is about


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

    def name(self, label: str) -> str:
        """The name of the node bound to ``label``."""
        return self.view.index.names[self.nodes[label]]

    def node(self, label: str) -> "NodeDef":
        return self.view.index.nodes[self.nodes[label]]

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
    """Matches expressions against one graph, optionally only over the nodes in ``inside``."""

    def __init__(self, view: GraphView, *, inside: Container[int] | None = None,
                 defs: Mapping[str, Any] | None = None) -> None:
        self.view = view
        self.index = view.index
        self.inside = inside
        self.defs: dict[str, Any] = dict(defs or {})
        self.nodes: dict[str, int] = {}
        self.tensors: dict[str, Tensor] = {}
        self.consts: dict[str, Any] = {}
        self.members: set[int] = set()
        self._trail: list[tuple[Any, Any]] = []
        self._progress = 0

    # -- public ---------------------------------------------------------------------
    def match(self, tensor: Tensor, expr: Any) -> None:
        """Match ``tensor`` against ``expr``; raises :class:`MatchFailure` and undoes what
        the attempt bound."""
        mark, progress = len(self._trail), self._progress
        try:
            self._match(tensor, as_var(expr))
        except MatchFailure:
            self._undo(mark)
            self._progress = progress
            raise

    def match_pattern(self, pattern: OpPattern, root: int) -> PatternMatch:
        """Match a whole pattern with its root at node ``root`` (output ``root.port``)."""
        self.defs = dict(pattern.defs)
        self.match((root, pattern.root_port), pattern.root)
        return PatternMatch(self.view, pattern, root, dict(self.nodes), dict(self.tensors), dict(self.consts),
                            frozenset(self.members))

    def name(self, i: int) -> str:
        return self.index.names[i]

    # -- trail ----------------------------------------------------------------------
    def _bind(self, table: dict[str, Any], key: str, value: Any) -> None:
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

    def _fail(self, message: str) -> MatchFailure:
        return MatchFailure(message, self._progress)

    # -- machinery ------------------------------------------------------------------
    def _forward(self, tensor: Tensor, record: bool) -> Tensor:
        """Follow Identity reads (inside the allowed nodes) to the tensor they forward."""
        node, port = tensor
        ops, inputs = self.index.ops, self.index.inputs
        for _ in range(64):
            if ops[node] != "Identity" or (self.inside is not None and node not in self.inside):
                break
            data = [t for t in inputs[node] if t[1] != CONTROL]
            if not data:
                break
            if record:
                self._add_member(node)
            node, port = data[0]
        return node, port

    def _tname(self, tensor: Tensor) -> str:
        return repr(tensor_name(self.index.names[tensor[0]], tensor[1]))

    def _match(self, tensor: Tensor, expr: Any) -> None:
        if isinstance(expr, Op):
            self._match_op(tensor, expr)
        elif isinstance(expr, Var):
            self._match_var(tensor, expr)
        elif isinstance(expr, Const):
            self._match_const(tensor, expr)
        elif isinstance(expr, Alt):
            self._match_alt(tensor, expr)
        elif not isinstance(expr, AnyTensor):
            raise TypeError(f"{expr!r} is not a pattern expression")

    def _match_var(self, tensor: Tensor, expr: Var) -> None:
        bound = self.tensors.get(expr.name)
        if bound is not None:
            if self._forward(bound, False) != self._forward(tensor, False):
                raise self._fail(f"{self._tname(tensor)} is not ${expr.name} ({self._tname(bound)})")
            return
        definition = self.defs.get(expr.name)
        if definition is not None:
            self._match(tensor, as_var(definition))
        self._bind(self.tensors, expr.name, tensor)

    def _match_alt(self, tensor: Tensor, expr: Alt) -> None:
        best: MatchFailure | None = None
        for option in expr.options:
            try:
                self.match(tensor, option)
                return
            except MatchFailure as why:
                if best is None or why.progress > best.progress:
                    best = why
        assert best is not None
        if best.progress > self._progress:
            raise best  # one alternative got somewhere: its reason says most
        raise self._fail(f"{self._tname(tensor)} matches none of the expected forms ({best})")

    def _match_const(self, tensor: Tensor, expr: Const) -> None:
        node, port = tensor
        value = self.view.const_value_of(node) if port == 0 else None
        if value is None:
            raise self._fail(f"{self._tname(tensor)} is not a constant, expected {expr.describe()}")
        problem = _const_problem(value, expr)
        if problem:
            raise self._fail(f"{self._tname(tensor)} {problem}")
        chain = self.view.constant_chain(node) or [node]
        for i in chain:
            if self.inside is None or i in self.inside:
                self._add_member(i)
        source = chain[-1]
        if expr.label:
            self._bind_label(expr.label, source)
            self._bind(self.consts, expr.label, value)

    def _bind_label(self, label: str, node: int) -> None:
        bound = self.nodes.get(label)
        if bound is None:
            self._bind(self.nodes, label, node)
        elif bound != node:
            raise self._fail(f"label {label!r} is bound to {self.name(bound)!r}, but here it would be "
                             f"{self.name(node)!r}")

    def _match_op(self, tensor: Tensor, expr: Op) -> None:
        node, port = self._forward(tensor, True)
        if expr.label is not None and self.nodes.get(expr.label) == node and port == expr.port:
            return  # met again through another consumer: already matched
        name = self.name(node)
        if self.inside is not None and node not in self.inside:
            raise self._fail(f"{self._tname((node, port))} lies outside the allowed nodes, expected {expr.describe()}")
        actual = self.index.ops[node]
        if expr.types and actual not in expr.types:
            raise self._fail(f"{name!r} is {actual}, expected {expr.describe()}")
        if port != expr.port:
            raise self._fail(f"{name!r} output {port} is used where output {expr.port} is expected")
        self._check_node(node, expr)
        if expr.label is not None:
            self._bind_label(expr.label, node)
        self._add_member(node)
        self._progress += 1
        if expr.inputs is not None:
            self._match_inputs(node, expr)

    def _check_node(self, node: int, expr: Op) -> None:
        attrs = self.index.nodes[node].attr
        name = self.name(node)
        if expr.dtypes is not None:
            key = "T" if "T" in attrs else "dtype"
            if key not in attrs or attrs[key].type not in expr.dtypes:
                wanted = ", ".join(sorted(dtype_name(d) for d in expr.dtypes))
                found = dtype_name(attrs[key].type) if key in attrs else "no dtype attribute"
                raise self._fail(f"{name!r} has dtype {found}, expected {wanted}")
        for key, expected in expr.attrs:
            if key not in attrs:
                raise self._fail(f"{name!r} has no attribute {key!r}")
            if callable(expected):
                ok = bool(expected(attr_value_to_python(attrs[key])))
            else:
                ok = attr_equals(attrs[key], expected)
            if not ok:
                shown = getattr(expected, "__name__", "a predicate") if callable(expected) else repr(expected)
                raise self._fail(f"{name!r} has {key}={attr_value_to_python(attrs[key])!r}, expected {shown}")

    def _match_inputs(self, node: int, expr: Op) -> None:
        wanted = expr.inputs or ()
        actual = [t for t in self.index.inputs[node] if t[1] != CONTROL]
        name = self.name(node)
        if len(actual) < len(wanted) or (len(actual) > len(wanted) and not expr.extra_inputs):
            raise self._fail(f"{name!r} has {len(actual)} inputs, expected {len(wanted)}")
        orders = self._orders(actual, expr)
        best: MatchFailure | None = None
        for order in orders:
            mark, progress = len(self._trail), self._progress
            try:
                for k, (slot, t) in enumerate(order):
                    self._match_input(name, slot, t, as_var(wanted[k]))
                return
            except MatchFailure as why:
                self._undo(mark)
                self._progress = progress
                if best is None or why.progress > best.progress:
                    best = why  # ties: the operands in their written order say most
        assert best is not None
        raise best

    def _orders(self, actual: list[Tensor], expr: Op) -> list[list[tuple[int, Tensor]]]:
        slots = list(enumerate(actual))
        n = len(expr.inputs or ())
        if expr.commutative:
            return [slots[:2], slots[1::-1]]
        if expr.unordered and (n > 1 or len(slots) > n):
            orders = itertools.islice(itertools.permutations(slots, n), MAX_ORDERS)
            return [list(o) for o in orders]
        return [slots[:n]]

    def _match_input(self, name: str, slot: int, tensor: Tensor, expr: Any) -> None:
        try:
            self._match(tensor, expr)
        except MatchFailure as why:
            if why.placed:
                raise
            raise MatchFailure(f"input {slot} of {name!r}: {why}", why.progress, placed=True) from None


#: Relative precision of constants stored in low-precision dtypes.
_DTYPE_RTOL = {"float16": 1e-3, "bfloat16": 8e-3}


def _const_problem(value: Any, expr: Const) -> str | None:
    """Why a constant's value is not the expected one (None when it is)."""
    import numpy as np

    if expr.value is not None:
        expected = np.asarray(expr.value)
        if value.shape != expected.shape and not (value.size == expected.size == 1):
            return f"has shape {list(value.shape)}, expected {list(expected.shape)}"
        rtol = expr.rtol if expr.rtol is not None else _DTYPE_RTOL.get(str(value.dtype), 1e-6)
        try:
            same = np.allclose(np.asarray(value, dtype=np.float64).reshape(-1),
                               expected.astype(np.float64).reshape(-1), rtol=rtol, atol=expr.atol)
        except (TypeError, ValueError):
            same = np.array_equal(value.reshape(-1), expected.reshape(-1))
        if not same:
            return f"is {_short(value)}, expected {expr.describe()}"
    if expr.where is not None and not expr.where(value):
        return f"is {_short(value)}, which is not {expr.describe()}"
    return None


def _short(value: Any) -> str:
    flat = value.reshape(-1)
    if flat.size == 1:
        return repr(flat[0].item())
    shown = ", ".join(repr(v) for v in flat[:4].tolist())
    return f"[{shown}{', ...' if flat.size > 4 else ''}] (shape {list(value.shape)})"


def match_at(view: GraphView, pattern: OpPattern, root: int,
             inside: Container[int] | None = None) -> PatternMatch:
    """Match ``pattern`` with its root at node ``root``; raises :class:`MatchFailure`."""
    return PatternMatcher(view, inside=inside).match_pattern(pattern, root)


def find_matches(view: GraphView, pattern: OpPattern,
                 on_failure: Callable[[int, MatchFailure], None] | None = None) -> list[PatternMatch]:
    """Every match of ``pattern``, trying as roots only the nodes of its root types (by
    the index's op-type table), in graph order; ``on_failure`` hears about the rest."""
    roots: list[int] = []
    for t in pattern.root_types:
        roots.extend(view.index.nodes_of_type(t))
    if len(pattern.root_types) > 1:
        roots.sort()
    found = []
    for root in roots:
        try:
            found.append(match_at(view, pattern, root))
        except MatchFailure as why:
            if on_failure is not None:
                on_failure(root, why)
    return found
