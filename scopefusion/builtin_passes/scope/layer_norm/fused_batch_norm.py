"""tf_keras ``LayerNormalization``'s fused path (epsilon >= 1.001e-5, float32)::

    shape = Shape(x)                                  (a Const when x's shape is static)
    pre   = Prod(shape[:a]);  inner = Prod(shape[a:])
    xr    = Reshape(x, Pack(1, pre, inner, 1))
    y, .. = FusedBatchNormV3(xr, ones, zeros, [], [], epsilon, is_training=True, data_format=NCHW)
    out   = Reshape(y, shape) * gamma + beta

Every NCHW channel of ``xr`` is one row of x's leading axes ``[0, a)``, and
its "spatial" values are the axes ``[a, rank)``: training-mode batch
statistics normalise each row over exactly those axes.  ``a`` comes from the
strided slices, epsilon from the FusedBatchNormV3 attribute.  The op's batch
mean and variance outputs have shape ``[pre]``, not the kept dimensions the
LayerNorm op's mean and variance have, so they are not mapped.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ....core.fusion.refusal import Refused, fail
from .algebra import Evaluator, Tensor, data_consumers, symbol
from .common import LayerNormMatch, params_axis, result_node, scale_and_offset, see_through_reshape, static_shape

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.instances import ScopePart
    from ....core.scope.scope_graph import Scope, ScopeGraph

FUSED_BATCH_NORM = "FusedBatchNormV3"


def analyse_fused_batch_norm(scope: "Scope | ScopePart") -> LayerNormMatch:
    sg = scope.graph
    inside = set(scope.node_names())
    fbns = [n.name for n in scope.nodes() if n.op == FUSED_BATCH_NORM]
    if len(fbns) != 1:
        fail(f"expected one {FUSED_BATCH_NORM}, found {len(fbns)}")
    fbn = fbns[0]
    attr = sg.node(fbn).attr
    if not attr["is_training"].b:
        fail(f"{fbn!r} uses moving statistics (is_training=False): a batch norm, not a layer norm")
    if attr["data_format"].s != b"NCHW":
        fail(f"{fbn!r} is {attr['data_format'].s.decode()}, not the NCHW layer-norm trick")
    if not (filled_with(sg, sg.producer(fbn, 1), 1.0) and filled_with(sg, sg.producer(fbn, 2), 0.0)):
        fail(f"{fbn!r} scales or shifts by more than ones and zeros: a batch norm")
    stats = sorted({p for _, p in data_consumers(sg, fbn) if p != 0})
    if stats:
        gradient = any(p != 0 and sg.op_of(c) == "FusedBatchNormGradV3" for c, p in data_consumers(sg, fbn))
        fail(f"output {stats[0]} of {fbn!r} (its batch statistics) is read" + (
            " by its gradient (a training graph): ScopeLayerNormGradPass fuses the gradient, the forward stays "
            "as it is" if gradient else ""))

    x, shape, begin, restore = reshaped_input(sg, inside, fbn)
    try:  # the reshape - FusedBatchNormV3 - reshape back trick is tf_keras' own: say so in reasons
        return _keras_trick(scope, inside, x, shape, begin, restore, attr)
    except Refused as why:
        raise Refused(f"{KERAS_TRICK}: {why.reason}", *why.nodes) from None


#: What the reshape - FusedBatchNormV3 (NCHW, training) - reshape back structure is, in the user's terms.
KERAS_TRICK = "tf_keras LayerNormalization (its FusedBatchNormV3 path)"


def reshaped_input(sg: "ScopeGraph", inside: set[str], fbn: str) -> tuple[Tensor, Tensor, int, str]:
    """``(x, shape, begin, restore)`` of tf_keras' trick around ``fbn``: ``x`` reshaped (inside the
    scope) so that the axes from ``begin`` on are one, normalised, and reshaped back to ``x``'s
    ``shape`` by the one node ``restore``."""
    squeeze = sg.producer(fbn, 0)[0]
    if squeeze not in inside or sg.op_of(squeeze) != "Reshape":
        fail(f"{fbn!r} does not normalise a reshaped input")
    x = sg.producer(squeeze, 0)
    shape, begin = _squeezed_shape(sg, inside, sg.producer(squeeze, 1)[0], x)
    restores = [c for c, p in data_consumers(sg, fbn)
                if p == 0 and c in inside and sg.op_of(c) == "Reshape" and sg.producer(c, 1) == shape]
    if len(restores) != 1:
        fail(f"the output of {fbn!r} is not reshaped back to the input's shape")
    return x, shape, begin, restores[0]


def _keras_trick(scope: "Scope | ScopePart", inside: set[str], x: Tensor, shape: Tensor, begin: int, restore: str,
                 attr: Any) -> LayerNormMatch:
    sg = scope.graph
    rank = reshape_rank(sg, shape, x)
    if rank is not None and not 0 <= begin < rank:
        fail(f"the normalised axes start at {begin}, outside a rank-{rank} input")
    evaluator = Evaluator(sg, inside, {x: symbol("x"), (restore, 0): symbol("xhat")})
    output = result_node(scope, inside, evaluator, ())
    poly = evaluator.value((output, 0))
    gamma, beta = scale_and_offset(scope, evaluator, poly, "xhat", symbol("xhat"))
    gamma, beta = see_through_reshape(sg, inside, gamma), see_through_reshape(sg, inside, beta)
    begin_params_axis = params_axis(sg, x, gamma, beta)
    return LayerNormMatch(
        x=x, gamma=gamma, beta=beta, output=output, mean=None, variance=None,
        epsilon=float(attr["epsilon"].f), begin_norm_axis=begin, begin_params_axis=begin_params_axis,
        dtype=attr["T"].type,
        description=f"LayerNorm over axes [{begin}, rank): Reshape + {FUSED_BATCH_NORM} (NCHW, training mode)",
    )


def filled_with(sg: "ScopeGraph", t: Tensor, value: float) -> bool:
    """Is ``t`` a constant (or a ``Fill``) holding only ``value``?"""
    if t[1] != 0:
        return False
    const = sg.const_value(t[0])
    if const is not None:
        return const.size > 0 and bool(np.all(const == value))
    node = sg.resolve_forwarding(t[0])
    if sg.op_of(node) != "Fill":
        return False
    fill = sg.const_value(sg.producer(node, 1)[0])
    return fill is not None and fill.size == 1 and float(fill.reshape(-1)[0]) == value


def _squeezed_shape(sg: "ScopeGraph", inside: set[str], pack: str, x: Tensor) -> tuple[Tensor, int]:
    """``(shape tensor, a)`` of ``Pack(1, Prod(shape[:a]), Prod(shape[a:]), 1)``."""
    if pack not in inside or sg.op_of(pack) != "Pack" or len(sg.input_names(pack)) != 4:
        fail("cannot read the normalised axes: the reshape is not to [1, pre, inner, 1]")
    ones = [sg.const_value(sg.producer(pack, k)[0]) for k in (0, 3)]
    if any(v is None or v.size != 1 or int(v.reshape(-1)[0]) != 1 for v in ones):
        fail("cannot read the normalised axes: the reshape is not to [1, pre, inner, 1]")
    (src_pre, lo_pre, hi_pre), (src_in, lo_in, hi_in) = (_prod_of_slice(sg, inside, sg.producer(pack, k))
                                                         for k in (1, 2))
    if src_pre != src_in or lo_pre not in (None, 0) or hi_in is not None or hi_pre is None or hi_pre != lo_in:
        fail("cannot read the normalised axes: the reshape does not split the shape at one axis")
    shape = src_pre
    node = shape[0]
    if sg.op_of(node) == "Shape":
        if sg.producer(node, 0) != x:
            fail(f"the reshape reads the shape of {sg.producer(node, 0)[0]!r}, not of its input")
    else:
        value = sg.const_value(node)
        known = static_shape(sg, x)
        if value is None or value.ndim != 1:
            fail("cannot read the normalised axes: the shape is neither Shape(x) nor a constant")
        if known is not None and (len(known) != value.size or any(
                k is not None and k != int(v) for k, v in zip(known, value, strict=True))):
            fail(f"the constant shape {value.tolist()} is not the input's shape")
    return shape, int(hi_pre)


def _prod_of_slice(sg: "ScopeGraph", inside: set[str], t: Tensor) -> tuple[Tensor, int | None, int | None]:
    """``(shape tensor, start, stop)`` of ``Prod(StridedSlice(shape, start, stop, 1), [0])``."""
    prod = t[0]
    if prod not in inside or sg.op_of(prod) != "Prod":
        fail("cannot read the normalised axes: no Prod of a shape slice")
    axis = sg.const_value(sg.producer(prod, 1)[0])
    if axis is None or axis.reshape(-1).tolist() != [0]:
        fail("cannot read the normalised axes: the Prod does not reduce a shape slice")
    ss = sg.producer(prod, 0)[0]
    if ss not in inside or sg.op_of(ss) != "StridedSlice":
        fail("cannot read the normalised axes: no StridedSlice of the shape")
    attr = sg.node(ss).attr
    if any(attr[m].i for m in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask") if m in attr):
        fail("cannot read the normalised axes: an unusual shape slice")
    begin, end, strides = (sg.const_value(sg.producer(ss, k)[0]) for k in (1, 2, 3))
    if begin is None or end is None or strides is None or any(v.size != 1 for v in (begin, end, strides)) \
            or int(strides.reshape(-1)[0]) != 1:
        fail("cannot read the normalised axes: the shape slice is not constant with stride 1")
    start = None if attr["begin_mask"].i & 1 else int(begin.reshape(-1)[0])
    stop = None if attr["end_mask"].i & 1 else int(end.reshape(-1)[0])
    return sg.producer(ss, 0), start, stop


def reshape_rank(sg: "ScopeGraph", shape: Tensor, x: Tensor) -> int | None:
    value = sg.const_value(shape[0])
    if value is not None:
        return int(value.size)
    known = static_shape(sg, x)
    return None if known is None else len(known)
