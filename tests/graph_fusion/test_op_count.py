"""``OpPattern.op_count``: the ops of a pattern's smallest match, a labelled op and a variable's
definition counted once.  Its memo keys each sub-expression by the part of the labels met so far
that the sub-expression can meet; here it is checked against the same count worked out without
any memo, on random patterns with shared labels, variables and nested alternatives."""
from __future__ import annotations

import random
from typing import Any, Mapping

import pytest

from scopefusion import ANY, OpPattern, one_of, op
from scopefusion.core.graph.pattern import Alt, Op, Var, as_var


def _plain_count(expr: Any, defs: Mapping[str, Any], seen: frozenset[str]) -> tuple[int, frozenset[str]]:
    """The count by its definition, walking every path (exponential; small patterns only)."""
    expr = as_var(expr)
    if isinstance(expr, Op) and not (expr.label is not None and expr.label in seen):
        after = seen | {expr.label} if expr.label is not None else seen
        total = 1
        for e in expr.inputs or ():
            count, after = _plain_count(e, defs, after)
            total += count
        return total, after
    if isinstance(expr, Alt):
        return min(_plain_count(e, defs, seen)[0] for e in expr.options), seen
    if isinstance(expr, Var) and expr.name in defs and "$" + expr.name not in seen:
        return _plain_count(defs[expr.name], defs, seen | {"$" + expr.name})
    return 0, seen


def _random_expr(rng: random.Random, depth: int, var_names: list[str]) -> Any:
    roll = rng.random()
    if depth == 0 or roll < 0.15:
        return rng.choice([ANY, *("$" + v for v in var_names)])
    if roll < 0.35:
        return one_of(*(_random_expr(rng, depth - 1, var_names) for _ in range(rng.randint(2, 3))))
    label = rng.choice([None, None, "a", "b", "c"])
    inputs = [_random_expr(rng, depth - 1, var_names) for _ in range(rng.randint(0, 3))]
    return op(rng.choice(["Add", "Mul", "Exp"]), *inputs, label=label)


@pytest.mark.parametrize("seed", range(60))
def test_op_count_equals_the_count_without_a_memo(seed):
    rng = random.Random(seed)
    var_names = ["u", "v", "w"][: rng.randint(0, 3)]
    defs = {v: _random_expr(rng, 2, var_names) for v in var_names}  # may name each other, or themselves
    root = op("AddV2", *(_random_expr(rng, 4, var_names) for _ in range(rng.randint(1, 3))))
    assert OpPattern("p", root, defs=defs).op_count() == _plain_count(root, defs, frozenset())[0]


def test_a_label_counts_once_along_operands_and_each_alternative_starts_afresh():
    shared = op("Exp", ANY, label="e")
    assert OpPattern("p", op("Mul", shared, op("Log", shared))).op_count() == 3
    # what an alternative met is not carried past it: its options need not all have met it
    root = op("Mul", one_of(shared, op("Log", shared)), one_of(op("Sqrt", shared), shared), label="m")
    assert OpPattern("p", root).op_count() == _plain_count(root, {}, frozenset())[0] == 3
    defs = {"x": op("Exp", "$y", label="e"), "y": op("Log", "$x")}  # definitions naming each other
    assert OpPattern("p", op("Mul", "$x", "$y"), defs=defs).op_count() == _plain_count(
        op("Mul", "$x", "$y"), defs, frozenset())[0] == 3
