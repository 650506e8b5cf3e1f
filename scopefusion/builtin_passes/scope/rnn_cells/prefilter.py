"""Cheap looks before the full match of a step: at the graph, then at a candidate root.

Discovery tries each form at every node of its root op types in the whole graph; most graphs
hold no recurrent cell at all, and most of those nodes are no step's output.  Two looks rule
them out before the full matcher is asked:

* :meth:`FirstLook.graph_may_hold`: every step of the form holds a node of each of some op-type
  groups (a ``Split``, a ``Sigmoid``, a ``MatMul``; a GRU's ``Sub``), in any spelling the matcher
  sees; a graph lacking one has no step, and no root is tried;
* :meth:`FirstLook.could_match`: the first level of a step's expression already rules out nearly
  every root: the node's data inputs must have the op types the expression's inputs ask for (in
  either order where the expression is commutative or unordered; any alternative of a
  ``one_of``), nothing bound.  The types each expression asks for are worked out once per form.

A node they pass is matched in full; one they reject cannot match.
"""
from __future__ import annotations

from functools import lru_cache
from itertools import permutations
from typing import TYPE_CHECKING, Any, Mapping

from ....core.graph.canonical import witnesses
from ....core.graph.pattern import Alt, Op, OpPattern, Var
from ....core.graph.vocabulary import CONTROL

if TYPE_CHECKING:  # pragma: no cover
    from ....core.graph.index import GraphIndex
    from .steps import CellForm


def _types(expr: Any, defs: Mapping[str, Any], depth: int = 0) -> frozenset[str] | None:
    """The op types a tensor matching ``expr`` may come from (None: any)."""
    if isinstance(expr, Var) and expr.name in defs and depth < 4:
        return _types(defs[expr.name], defs, depth + 1)
    if isinstance(expr, Op):
        return frozenset(expr.types) or None
    if isinstance(expr, Alt):
        found: set[str] = set()
        for option in expr.options:
            types = _types(option, defs, depth + 1)
            if types is None:
                return None
            found |= types
        return frozenset(found)
    return None  # a constant (seen through reads), a variable, any tensor


class FirstLook:
    """The cheap looks of one form's step expression (its definitions ``defs``, root ``$out``)."""

    def __init__(self, defs: Mapping[str, Any]) -> None:
        self.defs = defs
        self._wanted: dict[int, list[frozenset[str] | None]] = {}  # by id of an Op expression
        #: op-type groups every step holds a node of (each group with the types that can spell it)
        self.required = [witnesses(group) for group in OpPattern("step", defs["out"], defs).required_types()]

    def graph_may_hold(self, index: "GraphIndex") -> bool:
        """Whether the graph holds a node of every op-type group a step has (else it holds no step)."""
        return all(any(index.nodes_of_type(t) for t in group) for group in self.required)

    def could_match(self, index: "GraphIndex", node: int, expr: Any = None) -> bool:
        """Whether ``node`` may be the output of ``expr`` (the step's ``$out`` by default) as far as
        its first level says."""
        expr = self.defs["out"] if expr is None else expr
        if isinstance(expr, Var):
            return expr.name not in self.defs or self.could_match(index, node, self.defs[expr.name])
        if isinstance(expr, Op):
            return self._op_fits(index, node, expr)
        if isinstance(expr, Alt):
            return any(self.could_match(index, node, option) for option in expr.options)
        return True

    def _op_fits(self, index: "GraphIndex", node: int, expr: Op) -> bool:
        if expr.types and index.ops[node] not in expr.types:
            return False
        if expr.inputs is None:
            return True
        ins = [t for t in index.inputs[node] if t[1] != CONTROL]
        if len(ins) < len(expr.inputs) or (len(ins) > len(expr.inputs) and not expr.extra_inputs):
            return False
        wanted = self._wanted.get(id(expr))
        if wanted is None:
            wanted = self._wanted[id(expr)] = [_types(e, self.defs) for e in expr.inputs]
        orders = permutations(range(len(wanted))) if expr.commutative or expr.unordered else [range(len(wanted))]
        return any(all(w is None or index.ops[ins[k][0]] in w for w, k in zip(wanted, order, strict=True))
                   for order in orders)


@lru_cache(maxsize=256)
def first_look(form: "CellForm") -> FirstLook:
    """The looks of ``form`` (in its own gate order), worked out once per form."""
    return FirstLook(form.defs())
