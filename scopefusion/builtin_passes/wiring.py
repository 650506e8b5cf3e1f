"""Matching a scope's wiring against an expression of ops, ports and constants.

Detection passes describe what a scope computes as a small expression tree
(:func:`op`, :class:`Const`, :class:`Alt`); :class:`ExprMatcher` walks the
graph from the scope's output and binds every node, so a scope whose wiring
differs anywhere is refused with the place it differs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence, Union

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from ..core.scope_graph import Scope, ScopeGraph

Tensor = tuple[str, int]


class NoMatch(Exception):
    """The scope's wiring differs from the expected expression; the message says where."""


@dataclass(frozen=True)
class Op:
    """A node of one of ``ops`` inside the scope, output ``port``, whose data inputs match ``args``
    (in order, or in either order for two-input ``commutative`` ops); ``attrs`` must hold."""

    ops: tuple[str, ...]
    args: tuple[Any, ...]
    port: int = 0
    commutative: bool = False
    attrs: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Const:
    """A constant (seen through Identity reads) equal to ``value`` if given; ``capture`` names it."""

    value: Any = None
    capture: str | None = None


@dataclass(frozen=True)
class Alt:
    """The first of several patterns that matches."""

    options: tuple[Any, ...]


Pattern = Union[str, Op, Const, Alt]

ADD = ("Add", "AddV2")
DIV = ("RealDiv", "Div")


def op(ops: str | tuple[str, ...], *args: Any, port: int = 0, commutative: bool | None = None,
       **attrs: Any) -> Op:
    names = (ops,) if isinstance(ops, str) else tuple(ops)
    if commutative is None:
        commutative = len(args) == 2 and all(o in ("Add", "AddV2", "Mul", "Minimum", "Maximum") for o in names)
    return Op(names, tuple(args), port, commutative, tuple(sorted(attrs.items())))


@dataclass
class ExprMatcher:
    """Match tensors of a scope against expression patterns.

    A string pattern ``"$name"`` is a variable: bound the first time it is met (to the tensor, or
    to the match of ``defs[name]`` when it has a definition) and compared afterwards.  Every node
    an :class:`Op` pattern matches is recorded in ``matched``.
    """

    graph: "ScopeGraph"
    inside: frozenset[str]
    defs: dict[str, Pattern] = field(default_factory=dict)
    bound: dict[str, Tensor] = field(default_factory=dict)
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    matched: set[str] = field(default_factory=set)

    def match(self, tensor: Tensor, pattern: Pattern) -> None:
        """Match ``tensor`` against ``pattern`` or raise :class:`NoMatch` (state rolled back)."""
        saved = (dict(self.bound), dict(self.consts), set(self.matched))
        try:
            self._match(tensor, pattern)
        except NoMatch:
            self.bound, self.consts, self.matched = saved
            raise

    # -- machinery ----------------------------------------------------------------
    def _forward(self, tensor: Tensor) -> Tensor:
        name, port = tensor
        while name in self.inside and self.graph.op_of(name) == "Identity":
            self.matched.add(name)
            name, port = self.graph.producer(name, 0)
        return name, port

    def _match(self, tensor: Tensor, pattern: Pattern) -> None:
        sg = self.graph
        if isinstance(pattern, str):
            if pattern in self.bound:
                if self._forward(self.bound[pattern]) != self._forward(tensor):
                    raise NoMatch(f"{_tname(tensor)} is not {pattern} ({_tname(self.bound[pattern])})")
                return
            if pattern in self.defs:
                self._match(tensor, self.defs[pattern])
            self.bound[pattern] = tensor
            return
        if isinstance(pattern, Alt):
            for option in pattern.options:
                try:
                    self.match(tensor, option)
                    return
                except NoMatch:
                    continue
            raise NoMatch(f"{_tname(tensor)} matches none of the expected forms")
        if isinstance(pattern, Const):
            value = sg.const_value(tensor[0]) if tensor[1] == 0 else None
            if value is None:
                raise NoMatch(f"{_tname(tensor)} is not a constant")
            if pattern.value is not None:
                expected = np.asarray(pattern.value)
                if value.shape != expected.shape and not (value.size == expected.size == 1):
                    raise NoMatch(f"{_tname(tensor)} has shape {value.shape}, expected {expected.shape}")
                if not np.allclose(value.reshape(-1).astype(np.float64), expected.reshape(-1), rtol=1e-6, atol=0):
                    raise NoMatch(f"{_tname(tensor)} is {value.tolist()}, expected {expected.tolist()}")
            if pattern.capture:
                self.consts[pattern.capture] = value
            node = sg.resolve_forwarding(tensor[0])
            if node in self.inside:
                self.matched.add(node)
            if tensor[0] in self.inside:
                self.matched.add(tensor[0])
            return
        assert isinstance(pattern, Op)
        name, port = self._forward(tensor)
        if name not in self.inside:
            raise NoMatch(f"{_tname((name, port))} lies outside the scope, expected {'/'.join(pattern.ops)}")
        actual = sg.op_of(name)
        if actual not in pattern.ops:
            raise NoMatch(f"{name!r} is {actual}, expected {'/'.join(pattern.ops)}")
        if port != pattern.port:
            raise NoMatch(f"{name!r} output {port} is used where output {pattern.port} is expected")
        node = sg.node(name)
        for key, value in pattern.attrs:
            if key not in node.attr or not _attr_is(node.attr[key], value):
                raise NoMatch(f"{name!r} has {key}={_attr_repr(node.attr.get(key))}, expected {value!r}")
        n_inputs = len(sg.input_names(name))
        if n_inputs != len(pattern.args):
            raise NoMatch(f"{name!r} has {n_inputs} inputs, expected {len(pattern.args)}")
        ins = [sg.producer(name, k) for k in range(n_inputs)]
        orders = [ins, ins[::-1]] if pattern.commutative else [ins]
        first: NoMatch | None = None
        for order in orders:
            saved = (dict(self.bound), dict(self.consts), set(self.matched))
            try:
                for t, arg in zip(order, pattern.args):
                    self._match(t, arg)
                self.matched.add(name)
                return
            except NoMatch as why:
                self.bound, self.consts, self.matched = saved
                first = first or why  # the operands in their written order say most
        assert first is not None
        raise first


def _attr_is(attr: Any, value: Any) -> bool:
    kind = attr.WhichOneof("value")
    if kind == "list":
        return list(attr.list.i) == list(value)
    return getattr(attr, kind) == value if kind else False


def _attr_repr(attr: Any) -> str:
    if attr is None:
        return "<unset>"
    kind = attr.WhichOneof("value")
    return repr(getattr(attr, kind)) if kind else "<empty>"


def _tname(tensor: Tensor) -> str:
    return tensor[0] if tensor[1] == 0 else f"{tensor[0]}:{tensor[1]}"


def input_slots(graph: "ScopeGraph", inside: frozenset[str] | set[str], tensors: Sequence[Tensor]
                ) -> dict[str, list[int | None]]:
    """Port maps for fused inputs ``tensors``: per inner node reading any of them, its input
    slots, each the index of the fused input it reads or None."""
    out: dict[str, list[int | None]] = {}
    for fused, tensor in enumerate(tensors):
        for consumer in graph.consumer_names(tensor[0]):
            if consumer not in inside or consumer in out:
                continue
            n = len(graph.input_names(consumer))
            ins = [graph.producer(consumer, k) for k in range(n)]
            slots = [tensors.index(t) if t in tensors else None for t in ins]
            if any(s is not None for s in slots):
                out[consumer] = slots
    return out


def unmatched_nodes(scope: "Scope", matched: set[str]) -> list[str]:
    """Nodes of the scope that are neither matched nor constants (or reads of constants)."""
    sg = scope.graph
    out = []
    for name in scope.node_names():
        if name in matched:
            continue
        if sg.const_value(name) is not None:
            continue
        out.append(name)
    return out
