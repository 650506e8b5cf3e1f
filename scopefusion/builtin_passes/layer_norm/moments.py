"""Layer norms that compute their own moments (every form but the fused-batch-norm trick).

The statistics are found by their wiring::

    mean     = Mean(x, axes, keep_dims)
    variance = Mean(SquaredDifference(x, mean) | Square(Sub(x, mean)), axes, keep_dims)
    rstd     = Rsqrt(variance + epsilon)          (or Sqrt(variance + epsilon) as a divisor)

(``mean`` may be read through ``StopGradient`` / ``Identity``), then the
output node is expanded into a polynomial (:mod:`.algebra`) that must equal
``x*rstd*gamma - mean*rstd*gamma + beta`` for one gamma and one beta tensor.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .algebra import ADD_OPS, Evaluator, Tensor, add, mul, symbol
from .common import LayerNormMatch, norm_axis, params_axis, result_node, scale_and_offset, see_through_reshape
from .errors import NotLayerNorm

if TYPE_CHECKING:  # pragma: no cover
    from ...core.scope_graph import Scope, ScopeGraph

NORMALISERS = ("Rsqrt", "Sqrt")


def analyse_moments(scope: "Scope") -> LayerNormMatch:
    sg = scope.graph
    inside = set(scope.node_names())
    norms = [n.name for n in scope.nodes() if n.op in NORMALISERS]
    if len(norms) != 1:
        raise NotLayerNorm(f"expected one Rsqrt or Sqrt node, found {len(norms)}")
    norm = norms[0]
    norm_op = sg.op_of(norm)
    variance_tensor, epsilon = _variance_plus_epsilon(sg, inside, norm, norm_op)
    variance = sg.resolve_forwarding(variance_tensor[0])
    x, mean, spelling = _mean_and_input(sg, inside, variance)
    for m in (mean, variance):
        node = sg.node(m)
        if "keep_dims" not in node.attr or not node.attr["keep_dims"].b:
            raise NotLayerNorm(f"{m!r} does not keep reduced dimensions")
    axes = _axes(sg, mean)
    if _axes(sg, variance) != axes:
        raise NotLayerNorm("mean and variance reduce different axes")

    leaves = {x: symbol("x"), (mean, 0): symbol("mean"), (norm, 0): symbol("rstd", 1 if norm_op == "Rsqrt" else -1)}
    evaluator = Evaluator(sg, inside, leaves)
    output = result_node(scope, inside, evaluator, (mean, variance))
    poly = evaluator.value((output, 0))
    base = add(mul(symbol("x"), symbol("rstd")), mul(symbol("mean"), symbol("rstd")), -1.0)
    gamma, beta = scale_and_offset(scope, evaluator, poly, "x", base)
    gamma, beta = see_through_reshape(sg, inside, gamma), see_through_reshape(sg, inside, beta)
    begin_norm_axis = norm_axis(sg, x, axes)
    begin_params_axis = params_axis(sg, x, gamma, beta)
    normaliser = "rsqrt" if norm_op == "Rsqrt" else "1 / sqrt"
    return LayerNormMatch(
        x=x, gamma=gamma, beta=beta, output=output, mean=mean, variance=variance, epsilon=epsilon,
        begin_norm_axis=begin_norm_axis, begin_params_axis=begin_params_axis,
        dtype=sg.node(mean).attr["T"].type,
        description=f"LayerNorm over axes {axes}: mean of {spelling}, {normaliser}(variance + epsilon)",
    )


def _variance_plus_epsilon(sg: "ScopeGraph", inside: set[str], norm: str, norm_op: str) -> tuple[Tensor, float]:
    """The variance tensor under ``norm`` and the epsilon added to it (0 when none is)."""
    arg = sg.producer(norm, 0)
    node = arg[0]
    op = sg.op_of(node)
    if node in inside and op in ADD_OPS:
        for slot in (0, 1):
            value = sg.const_value(sg.producer(node, 1 - slot)[0])
            candidate = sg.producer(node, slot)
            if value is not None and sg.op_of(sg.resolve_forwarding(candidate[0])) == "Mean":
                if value.size != 1 or value.dtype.kind != "f":
                    raise NotLayerNorm("epsilon is not a scalar constant")
                return candidate, float(value.reshape(-1)[0])
        raise NotLayerNorm(f"{node!r} does not add a constant epsilon to a Mean")
    if op == "Mean" or sg.op_of(sg.resolve_forwarding(node)) == "Mean":
        return arg, 0.0
    raise NotLayerNorm(f"{norm_op} reads {op} {node!r}, not variance + epsilon")


def _mean_and_input(sg: "ScopeGraph", inside: set[str], variance: str) -> tuple[Tensor, str, str]:
    """``(x, mean, spelling)`` of a variance ``Mean`` over squared differences from the mean."""
    if variance not in inside:
        raise NotLayerNorm(f"the variance {variance!r} lies outside the scope")
    diff = sg.producer(variance, 0)[0]
    op = sg.op_of(diff)
    spelling = op
    if diff in inside and op == "SquaredDifference":
        pair = [sg.producer(diff, 0), sg.producer(diff, 1)]
    elif diff in inside and op in ("Square", "Mul") and sg.op_of(sg.producer(diff, 0)[0]) == "Sub":
        sub = sg.producer(diff, 0)
        if op == "Mul" and sg.producer(diff, 1) != sub:
            raise NotLayerNorm(f"the variance Mean reduces Mul {diff!r}, not a square")
        if sub[0] not in inside:
            raise NotLayerNorm(f"the variance Mean squares {sub[0]!r}, outside the scope")
        pair = [sg.producer(sub[0], 0), sg.producer(sub[0], 1)]
        spelling = f"{op}(Sub)"
    else:
        raise NotLayerNorm(f"the variance Mean reduces {op} {diff!r}, not a SquaredDifference from the mean")
    for a, b in (pair, pair[::-1]):
        mean = sg.resolve_forwarding(b[0])
        if (b[1] == 0 and mean in inside and mean != variance and sg.op_of(mean) == "Mean"
                and sg.producer(mean, 0) == a):
            return a, mean, spelling
    raise NotLayerNorm(f"{spelling} {diff!r} does not subtract the mean of the same input")


def _axes(sg: "ScopeGraph", mean: str) -> list[int]:
    value = sg.const_value(sg.producer(mean, 1)[0])
    if value is None:
        raise NotLayerNorm(f"the reduction indices of {mean!r} are not constant")
    return sorted(int(a) for a in value.reshape(-1))
