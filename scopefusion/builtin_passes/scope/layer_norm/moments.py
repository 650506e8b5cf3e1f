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

from ....core.fusion.refusal import fail
from ....core.graph.vocabulary import dtype_name
from .algebra import ADD_OPS, Evaluator, Tensor, add, data_consumers, is_float_array, mul, symbol
from .common import (
    LOW_PRECISION, LayerNormMatch, norm_axis, params_axis, precision_cast, result_node, scale_and_offset,
    see_through_reshape, strip_output_cast,
)

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.instances import ScopePart
    from ....core.scope.scope_graph import Scope, ScopeGraph

NORMALISERS = ("Rsqrt", "Sqrt")


def analyse_moments(scope: "Scope | ScopePart") -> LayerNormMatch:
    sg = scope.graph
    inside = set(scope.node_names())
    norms = [n.name for n in scope.nodes() if n.op in NORMALISERS]
    if len(norms) != 1:
        fail(f"expected one Rsqrt or Sqrt node, found {len(norms)}")
    norm = norms[0]
    norm_op = sg.op_of(norm)
    variance_tensor, epsilon = _variance_plus_epsilon(sg, inside, norm, norm_op)
    variance = sg.resolve_forwarding(_below_down_cast(sg, inside, variance_tensor)[0])
    x, mean, spelling = _mean_and_input(sg, inside, variance)
    for m in (mean, variance):
        if not _keeps_dims(sg, m):
            fail(f"{m!r} does not keep reduced dimensions")
    axes = _axes(sg, mean)
    if _axes(sg, variance) != axes:
        fail("mean and variance reduce different axes")

    # In half or bfloat16 the statistics are computed in float32: x is cast up (by
    # tf.nn.moments, or by a Keras layer around its whole body) and, with tf.nn.moments,
    # the mean and variance are cast back down. Either side of a cast is the same symbol.
    x_low = sg.producer(x[0], 0) if x[1] == 0 and precision_cast(sg, inside, x[0], up=True) else None
    mean_casts = [c for c, port in data_consumers(sg, mean) if port == 0 and precision_cast(sg, inside, c, up=False)]
    # the same mean computed twice (tf.math.reduce_variance takes a mean of its own)
    twins = [n.name for n in scope.nodes() if n.op == "Mean" and n.name not in (mean, variance)
             and sg.producer(n.name, 0) == x and _keeps_dims(sg, n.name) and _axes(sg, n.name) == axes]
    rstd = symbol("rstd", 1 if norm_op == "Rsqrt" else -1)
    leaves = {x: symbol("x"), (mean, 0): symbol("mean"), (norm, 0): rstd}
    if x_low is not None:
        leaves[x_low] = symbol("x")
    for other in (*mean_casts, *twins):
        leaves[(other, 0)] = symbol("mean")
    evaluator = Evaluator(sg, inside, leaves)
    output = result_node(scope, inside, evaluator, (mean, variance, *mean_casts, *twins))
    output, output_cast = strip_output_cast(sg, inside, output)
    poly = evaluator.value((output, 0))
    base = add(mul(symbol("x"), symbol("rstd")), mul(symbol("mean"), symbol("rstd")), -1.0)
    gamma, beta = scale_and_offset(scope, evaluator, poly, "x", base)
    gamma, beta = see_through_reshape(sg, inside, gamma), see_through_reshape(sg, inside, beta)

    # The fused op computes in the output's type: float32 statistics of a half or bfloat16
    # layer norm (tf.nn.moments) make a half LayerNorm of the input before its up-cast,
    # whose mean and variance are the casts back down.
    dtype = _dtype(sg, output) or _dtype(sg, mean)
    if dtype is None:
        fail(f"cannot tell the dtype of {output!r} from its attributes")
    low = x_low is not None and dtype in LOW_PRECISION
    x_fused = x_low if low and x_low is not None else x
    mean_out: str | None = mean
    variance_out: str | None = variance
    if low:
        variance_out = variance_tensor[0] if _dtype(sg, variance_tensor[0]) == dtype else None
        mean_out = mean_casts[0] if len(mean_casts) == 1 else None
        if mean_out is None or variance_out is None:
            mean_out = variance_out = None  # no statistics outputs of the fused op's type
    begin_norm_axis = norm_axis(sg, x_fused, axes)
    begin_params_axis = params_axis(sg, x_fused, gamma, beta)
    normaliser = "rsqrt" if norm_op == "Rsqrt" else "1 / sqrt"
    precision = ""
    if output_cast is not None:
        precision = f", computed in float32 and cast to {_type_name(_dtype(sg, output_cast))}"
    elif low:
        precision = ", statistics computed in float32"
    return LayerNormMatch(
        x=x_fused, gamma=gamma, beta=beta, output=output, mean=mean_out, variance=variance_out, epsilon=epsilon,
        begin_norm_axis=begin_norm_axis, begin_params_axis=begin_params_axis, dtype=dtype,
        description=f"LayerNorm over axes {axes}: mean of {spelling}, {normaliser}(variance + epsilon){precision}",
        output_cast=output_cast,
    )


def _type_name(dtype: int | None) -> str:
    return dtype_name(dtype) if dtype is not None else "unknown"


def _dtype(sg: "ScopeGraph", name: str) -> int | None:
    """The DataType of output 0 of an elementwise op, a Cast or a Mean, from its attributes."""
    attrs = sg.node(name).attr
    for key in ("DstT", "T", "dtype"):
        if key in attrs and attrs[key].WhichOneof("value") == "type":
            return attrs[key].type
    return None


def _below_down_cast(sg: "ScopeGraph", inside: set[str], tensor: Tensor) -> Tensor:
    """The float32 tensor under a Cast down to half or bfloat16, else ``tensor``."""
    if tensor[1] == 0 and precision_cast(sg, inside, tensor[0], up=False):
        return sg.producer(tensor[0], 0)
    return tensor


def _variance_plus_epsilon(sg: "ScopeGraph", inside: set[str], norm: str, norm_op: str) -> tuple[Tensor, float]:
    """The variance tensor under ``norm`` (a Mean, or its cast down to half) and the
    epsilon added to it (0 when none is)."""
    arg = sg.producer(norm, 0)
    node = arg[0]
    op = sg.op_of(node)

    def is_variance(t: Tensor) -> bool:
        return sg.op_of(sg.resolve_forwarding(_below_down_cast(sg, inside, t)[0])) == "Mean"

    if node in inside and op in ADD_OPS:
        for slot in (0, 1):
            value = sg.const_value(sg.producer(node, 1 - slot)[0])
            candidate = sg.producer(node, slot)
            if value is not None and is_variance(candidate):
                if value.size != 1 or not is_float_array(value):
                    fail("epsilon is not a scalar constant")
                return candidate, float(value.reshape(-1)[0])
        fail(f"{node!r} does not add a constant epsilon to a Mean")
    if is_variance(arg):
        return arg, 0.0
    fail(f"{norm_op} reads {op} {node!r}, not variance + epsilon")


def _mean_and_input(sg: "ScopeGraph", inside: set[str], variance: str) -> tuple[Tensor, str, str]:
    """``(x, mean, spelling)`` of a variance ``Mean`` over squared differences from the mean."""
    if variance not in inside:
        fail(f"the variance {variance!r} lies outside the scope")
    diff = sg.producer(variance, 0)[0]
    op = sg.op_of(diff)
    spelling = op
    if diff in inside and op == "SquaredDifference":
        pair = [sg.producer(diff, 0), sg.producer(diff, 1)]
    elif diff in inside and op in ("Square", "Mul") and sg.op_of(sg.producer(diff, 0)[0]) == "Sub":
        sub = sg.producer(diff, 0)
        if op == "Mul" and sg.producer(diff, 1) != sub:
            fail(f"the variance Mean reduces Mul {diff!r}, not a square")
        if sub[0] not in inside:
            fail(f"the variance Mean squares {sub[0]!r}, outside the scope")
        pair = [sg.producer(sub[0], 0), sg.producer(sub[0], 1)]
        spelling = f"{op}(Sub)"
    else:
        fail(f"the variance Mean reduces {op} {diff!r}, not a SquaredDifference from the mean")
    for a, b in (pair, pair[::-1]):
        mean = sg.resolve_forwarding(b[0])
        if (b[1] == 0 and mean in inside and mean != variance and sg.op_of(mean) == "Mean"
                and sg.producer(mean, 0) == a):
            return a, mean, spelling
    fail(f"{spelling} {diff!r} does not subtract the mean of the same input")


def _keeps_dims(sg: "ScopeGraph", mean: str) -> bool:
    attrs = sg.node(mean).attr
    return "keep_dims" in attrs and attrs["keep_dims"].b


def _axes(sg: "ScopeGraph", mean: str) -> list[int]:
    value = sg.const_value(sg.producer(mean, 1)[0])
    if value is None:
        fail(f"the reduction indices of {mean!r} are not constant")
    return sorted(int(a) for a in value.reshape(-1))
