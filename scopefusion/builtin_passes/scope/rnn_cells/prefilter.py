"""A cheap look at a candidate root before the full match of a step.

Discovery tries each form at every node of its root op types in the whole graph; most of those
nodes are no step's output, and the full matcher is the costly way to learn it.  The first level
of a step's expression already rules out nearly all of them: :func:`could_match` checks that the
node's data inputs have the op types the expression's inputs ask for (in either order where the
expression is commutative or unordered; any alternative of a ``one_of``), without binding
anything.  A node it passes is matched in full; one it rejects cannot match.
"""
from __future__ import annotations

from itertools import permutations
from typing import TYPE_CHECKING, Any, Mapping

from ....core.graph.pattern import Alt, Op, Var
from ....core.graph.vocabulary import CONTROL

if TYPE_CHECKING:  # pragma: no cover
    from ....core.graph.index import GraphIndex


def _types(expr: Any, defs: Mapping[str, Any], depth: int = 0) -> set[str] | None:
    """The op types a tensor matching ``expr`` may come from (None: any)."""
    if isinstance(expr, Var) and expr.name in defs and depth < 4:
        return _types(defs[expr.name], defs, depth + 1)
    if isinstance(expr, Op):
        return set(expr.types) or None
    if isinstance(expr, Alt):
        found: set[str] = set()
        for option in expr.options:
            types = _types(option, defs, depth + 1)
            if types is None:
                return None
            found |= types
        return found
    return None  # a constant (seen through reads), a variable, any tensor


def _op_fits(index: "GraphIndex", node: int, expr: Op, defs: Mapping[str, Any]) -> bool:
    if expr.types and index.ops[node] not in expr.types:
        return False
    if expr.inputs is None:
        return True
    ins = [t for t in index.inputs[node] if t[1] != CONTROL]
    if len(ins) < len(expr.inputs) or (len(ins) > len(expr.inputs) and not expr.extra_inputs):
        return False
    wanted = [_types(e, defs) for e in expr.inputs]
    orders = permutations(range(len(wanted))) if expr.commutative or expr.unordered else [range(len(wanted))]
    return any(all(w is None or index.ops[ins[k][0]] in w for w, k in zip(wanted, order, strict=True))
               for order in orders)


def could_match(index: "GraphIndex", node: int, expr: Any, defs: Mapping[str, Any]) -> bool:
    """Whether ``node`` may be the output of ``expr`` as far as its first level says."""
    if isinstance(expr, Var):
        return expr.name not in defs or could_match(index, node, defs[expr.name], defs)
    if isinstance(expr, Op):
        return _op_fits(index, node, expr, defs)
    if isinstance(expr, Alt):
        return any(could_match(index, node, option, defs) for option in expr.options)
    return True
