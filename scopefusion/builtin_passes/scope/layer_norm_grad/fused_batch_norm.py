"""The gradient of tf_keras ``LayerNormalization``'s fused path (epsilon >= 1.001e-5), found from its
``FusedBatchNormGradV3``.

The forward (see :mod:`..layer_norm.fused_batch_norm`) reshapes x to ``[1, pre, inner, 1]``, normalises
it with a training-mode NCHW ``FusedBatchNormV3`` scaling by ones and shifting by zeros, reshapes the
result back (``xhat``) and computes ``xhat * gamma + beta``.  Its gradient, under the gradient scope of
the forward's::

    g      = Reshape(dy * gamma, [1, pre, inner, 1])
    dxr, . = FusedBatchNormGradV3(g, xr, ones, fbn:3, fbn:4, fbn:5)   # the forward op's own reserve spaces
    dx     = Reshape(dxr, shape(x))
    dgamma = Sum(xhat * dy, leading axes);  dbeta = Sum(dy, leading axes)   (reshaped to gamma's shape)

It is this gradient when the ``FusedBatchNormGradV3`` differentiates that exact forward op: training
mode, NCHW, the forward's epsilon, the forward's reshaped input, its scale of ones and its three reserve
spaces, and ``y_backprop`` a reshape to the forward's squeezed shape of the product of one tensor by
gamma.  A batch norm's gradient (a scale that is not ones, NHWC, moving statistics) is refused with the
reason; the rest (the tensors leaving the region told apart by what they depend on) is the analysis
every form shares (:func:`.region.gradient_region`).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ....core.fusion.refusal import Refused, fail
from ....core.graph.vocabulary import CONTROL
from ..layer_norm.algebra import Evaluator, symbol
from ..layer_norm.common import Tensor, static_shape
from ..layer_norm.fused_batch_norm import FUSED_BATCH_NORM, KERAS_TRICK, filled_with, reshape_rank, reshaped_input
from .calls import forward_call
from .region import Forward, GradRegion, check_forward, common_scope, gradient_region, gradient_scope, own_members
from .region import _downstream, _sums

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import ScopeGraph

FUSED_BATCH_NORM_GRAD = "FusedBatchNormGradV3"


def find_fused_region(sg: "ScopeGraph", grad: str) -> GradRegion:
    """The gradient region of the tf_keras layer norm whose ``FusedBatchNormV3`` ``grad`` differentiates."""
    fbn = _differentiated(sg, grad)
    try:
        return _region(sg, grad, fbn)
    except Refused as why:  # say in the user's terms which form this was
        raise Refused(f"the gradient of {KERAS_TRICK}: {why.reason}", *why.nodes) from None


def _differentiated(sg: "ScopeGraph", grad: str) -> str:
    """The ``FusedBatchNormV3`` whose layer-norm trick ``grad`` is the gradient of."""
    attr = sg.node(grad).attr
    fbn = sg.resolve_forwarding(sg.producer(grad, 3)[0])
    if sg.op_of(fbn) != FUSED_BATCH_NORM:
        fail(f"{grad!r} differentiates {sg.op_of(fbn)} {fbn!r}, not a {FUSED_BATCH_NORM}")
    forward = sg.node(fbn).attr
    if not (attr["is_training"].b and forward["is_training"].b):
        fail(f"{grad!r} is the gradient of a batch norm using moving statistics (is_training=False)")
    if attr["data_format"].s != b"NCHW" or forward["data_format"].s != b"NCHW":
        fail(f"{grad!r} is the gradient of a {forward['data_format'].s.decode()} batch norm, not of tf_keras' "
             "NCHW layer-norm trick")
    if attr["epsilon"].f != forward["epsilon"].f:
        fail(f"{grad!r} adds epsilon {attr['epsilon'].f:g}, {fbn!r} {forward['epsilon'].f:g}")
    reads = [sg.producer(grad, k) for k in range(1, 6)]
    wanted = [sg.producer(fbn, 0), sg.producer(fbn, 1), (fbn, 3), (fbn, 4), (fbn, 5)]
    if reads != wanted:
        fail(f"{grad!r} does not read {fbn!r}'s input, scale and reserve spaces: not its gradient")
    if not (filled_with(sg, sg.producer(fbn, 1), 1.0) and filled_with(sg, sg.producer(fbn, 2), 0.0)):
        fail(f"{fbn!r} scales or shifts by more than ones and zeros: the gradient of a batch norm")
    return fbn


def _region(sg: "ScopeGraph", grad: str, fbn: str) -> GradRegion:
    squeeze = sg.producer(fbn, 0)[0]
    forward = forward_call(sg, common_scope(sg, (fbn, squeeze)), fbn, frozenset({FUSED_BATCH_NORM}))
    inside = set(forward.node_names())
    x, shape, begin, restore = reshaped_input(sg, inside, fbn)
    rank = reshape_rank(sg, shape, x)
    if rank is None or not 0 <= begin < rank:
        fail(f"the normalised axes start at {begin}, outside the input's rank ({rank})")
    scope, members = own_members(sg, gradient_scope(sg, grad, forward), grad)
    fwd = set(forward.all_node_indices())
    gamma, gamma_side = _scale(sg, restore, fwd)
    extra = _sums(sg, members)
    evaluator = Evaluator(sg, inside, {x: symbol("x"), (restore, 0): symbol("xhat")})
    check_forward(sg, forward, evaluator, (fbn, squeeze, restore), members, "xhat", symbol("xhat"))
    _check_backprop(sg, grad, fbn, members, gamma, shape, begin)
    found = Forward(forward, x, gamma, gamma_side, list(range(begin, rank)), float(sg.node(fbn).attr["epsilon"].f),
                    begin)
    return gradient_region(sg, grad, found, scope, members, extra, reads_x=False)


def _scale(sg: "ScopeGraph", xhat: str, fwd: set[int]) -> tuple[Tensor, set[int]]:
    """gamma as the forward multiplies the reshaped-back normalised x by it, and the forward nodes that
    depend on it."""
    index = sg.index
    for c, port, _ in index.consumers[index.index[xhat]]:
        if c in fwd and port >= 0 and index.ops[c] == "Mul":
            other = [t for t in index.inputs[c] if t[1] != CONTROL and t[0] != index.index[xhat]]
            if len(other) == 1:
                return (index.names[other[0][0]], other[0][1]), _downstream(sg, c, fwd) | {other[0][0]}
    fail(f"nothing in the forward scope multiplies {xhat!r} by a scale (gamma)")


def _check_backprop(sg: "ScopeGraph", grad: str, fbn: str, members: set[int], gamma: Tensor, shape: Tensor,
                    begin: int) -> None:
    """``grad``'s ``y_backprop`` must be ``Reshape(t * gamma)`` to the ``[1, pre, inner, 1]`` the forward
    normalised: dy times gamma, the gradient of ``xhat * gamma``."""
    index = sg.index
    reshape = sg.producer(grad, 0)[0]
    if sg.op_of(reshape) != "Reshape" or index.index[reshape] not in members:
        fail(f"{grad!r} does not read a reshaped gradient of y")
    if not _squeezed_shape_of(sg, sg.producer(reshape, 1), fbn, shape, begin):
        fail(f"{reshape!r} reshapes to another shape than the forward normalised")
    product = sg.resolve_forwarding(sg.producer(reshape, 0)[0])
    if sg.op_of(product) != "Mul" or len(sg.input_names(product)) != 2 \
            or gamma not in [sg.producer(product, k) for k in (0, 1)]:
        fail(f"{grad!r} does not differentiate through a product with gamma {gamma[0]!r}")


def _squeezed_shape_of(sg: "ScopeGraph", target: Tensor, fbn: str, shape: Tensor, begin: int) -> bool:
    """Is ``target`` the shape ``fbn`` normalised: the forward's own shape tensor, the ``Shape`` of the
    op's input or output, or a constant equal to x's shape ``shape`` (a tensor) split at ``begin``?"""
    squeezed = sg.producer(fbn, 0)
    if target == sg.producer(squeezed[0], 1):
        return True
    node = sg.resolve_forwarding(target[0])
    if sg.op_of(node) == "Shape":
        return sg.producer(node, 0) in (squeezed, (fbn, 0))
    value, known = sg.const_value(node), sg.const_value(shape[0])
    dims = known.reshape(-1).tolist() if known is not None else static_shape(sg, sg.producer(squeezed[0], 0))
    if value is None or dims is None or None in dims:
        return False
    sizes = [int(d) for d in dims if d is not None]
    return bool(value.reshape(-1).tolist() == [1, math.prod(sizes[:begin]), math.prod(sizes[begin:]), 1])
