"""The call ops of :mod:`.shape_inference`: which nodes call into the function library, and
their outputs' shapes through the called bodies (:mod:`.shape_functions`), merged with what
the node declares (``output_shapes``)."""
from __future__ import annotations

from typing import Any, Mapping

from .shape_context import Dims, OpContext, merge_dims
from .shape_functions import CALL_OPS, CASE_OPS, IF_OPS, WHILE_OPS, Answer, FunctionShapes
from .shape_rules_nn import NN_RULES

_FUNCTIONAL = CALL_OPS | IF_OPS | CASE_OPS | WHILE_OPS


def is_call(op: str, functions: Mapping[str, Any]) -> bool:
    """Whether a node of op type ``op`` runs a library function (by name or functionally)."""
    return op in _FUNCTIONAL or op in functions


def _declared(node: Any) -> list[Dims] | None:
    if "output_shapes" not in node.attr:
        return None
    declared = node.attr["output_shapes"].list.shape
    if not declared:
        return None
    return [None if s.unknown_rank else [d.size if d.size >= 0 else None for d in s.dim] for s in declared]


def _with_declared(found: list[Dims], declared: list[Dims] | None) -> list[Dims]:
    if declared is None:
        return found
    out = list(found) + [None] * (len(declared) - len(found))
    for k, shape in enumerate(declared):
        mine = out[k]
        if shape is not None:
            out[k] = shape if mine is None or len(mine) != len(shape) else merge_dims(mine, shape)
    return out


def call_shapes(ctx: OpContext, functions: FunctionShapes) -> Answer | None:
    """The shapes of a call node's outputs and the op types outside the table they depend on;
    None when the called body cannot be followed (a functional loop then has the shapes it
    declares)."""
    op, attrs = ctx.op, ctx.node.attr
    inputs = [ctx.shape(k) for k in range(len(ctx.data))]
    answer: Answer | None
    if op in CALL_OPS:
        answer = functions.call(attrs["f"].func.name, inputs) if "f" in attrs else None
    elif op in IF_OPS:
        names = [attrs[k].func.name for k in ("then_branch", "else_branch") if k in attrs]
        answer = functions.branches(names, inputs[1:]) if len(names) == 2 else None
    elif op in CASE_OPS:
        names = [f.name for f in attrs["branches"].list.func] if "branches" in attrs else []
        answer = functions.branches(names, inputs[1:]) if names else None
    elif op in WHILE_OPS:
        answer = functions.loop(attrs["body"].func.name, inputs) if "body" in attrs else None
    else:
        answer = functions.call(op, inputs)
    declared = _declared(ctx.node)
    if answer is None:  # a loop not followed has the shapes it declares, else its inputs'
        return (NN_RULES[op](ctx), frozenset()) if op in WHILE_OPS else None
    return _with_declared(answer[0], declared), answer[1]
