"""ScopeLayerNormGradPass: the gradient of a layer norm in a training graph -> ``LayerNormGrad``.

A training graph built by ``tf.gradients`` (tf_slim, tf.compat.v1) or ``tf.GradientTape``
(tf_keras, Keras 3) holds, for each layer norm, its gradient: some sixty nodes under
``gradients/<layer norm scope>/`` or ``gradient_tape/<layer norm scope>/`` and the ``AddN``
nodes that sum their contributions.  This pass replaces them with one
``LayerNormGrad(dy, x, variance, mean, gamma) -> (pd_x, pd_gamma, pd_beta)``, the reference
system's signature, computing ``dx``, ``dgamma`` and ``dbeta`` as those nodes did (see
:mod:`.region` for how they are found and told apart).

How the forward and the gradient share the statistics: the reference's ``LayerNorm`` gives
``(y, mean, variance)`` and its ``LayerNormGrad`` reads them.  TensorFlow's gradient of a
layer norm never reads the variance (it reads ``rsqrt(variance + epsilon)``, the forward's
inner ``gamma * rstd`` and the mean), and it reads inner tensors of the forward op that no
fused ``LayerNorm`` output stands for.  So the gradient's result recomputes the mean and the
variance from ``x`` next to the ``LayerNormGrad`` (two ``Mean`` and a ``SquaredDifference`` in
the fused inner graph, the very ops of ``tf.nn.moments``: equal to the forward op's ``mean``
and ``variance`` outputs, which a back end may merge), and reads nothing of the forward but
``x`` and ``gamma`` (gamma itself where the gradient read it reshaped to x's rank, as Keras 3's
does; the reads it recomputes are declared with ``result.recompute``).  The forward, whose inner
tensors the gradient no longer reads, becomes a ``LayerNorm`` in the graph stage
(``LayerNormFusionPass``), in the same run.  (In the scope
stage, the scope pass sees the gradient still reading its inner tensors and leaves it.)

tf_keras' ``LayerNormalization`` at an epsilon of 1.001e-5 or more computes its forward with a
``FusedBatchNormV3`` trick and its gradient with a ``FusedBatchNormGradV3`` between reshapes
(:mod:`.fused_batch_norm`): that gradient becomes the same ``LayerNormGrad``, and the forward stays as
it is (the scope stage refuses it while its gradient reads the op's batch statistics, and the graph
stage has no form for it).

The pass runs where a gradient is: its pattern needs a ``RsqrtGrad`` or ``FusedBatchNormGradV3`` op,
which only a gradient function makes; in an inference graph it finds nothing.  ``graph_run_mode`` does
not switch it: the reference's scope passes run when the graph is parsed, which the run mode does not
steer, and a graph holding gradients computes them in either mode.

A layer called more than once in one scope (tf_keras does that: both calls' ops, and both
gradients, in one scope) has each call's gradient fused on its own, told apart by dataflow
(:mod:`.calls`), each fused op named like its ``pd_x``; calls the dataflow does not separate (of one
input, reading the same x and dy) are refused with the reason.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, AbstractSet, Any, Sequence

import numpy as np

from ....core.fusion.refusal import Refused, fail
from ....core.graph.protos import message_class
from ....core.graph.tensor_codec import make_tensor_proto
from ....core.graph.vocabulary import CONTROL, DT_INT32
from ....core.scope.base_pass import ScopeBasePass
from ....core.scope.instances import ScopePart
from ....core.scope.patterns import PatternSet, ScopePattern
from ....core.scope.results import FusionScopesResult, ScopesResult
from .op import LAYER_NORM_GRAD, layer_norm_grad_reference
from .fused_batch_norm import FUSED_BATCH_NORM_GRAD, find_fused_region
from .region import NORMALISER_GRADIENTS, GradRegion, find_region

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope, ScopeGraph

__all__ = ["LAYER_NORM_GRAD", "ScopeLayerNormGradPass", "layer_norm_grad_reference"]


class ScopeLayerNormGradPass(ScopeBasePass):
    """The gradient of a layer norm (tf.gradients, GradientTape) in a training graph -> LayerNormGrad."""

    name = "ScopeLayerNormGradPass"
    general = True
    description = ("a layer norm's gradient in a training graph (tf.gradients or GradientTape over tf_slim, "
                   "tf_keras, Keras 3) -> LayerNormGrad(dy, x, variance, mean, gamma)")

    def define_patterns(self) -> list[PatternSet]:
        return [[[ScopePattern("LayerNormGrad").add_node_op_type_feature("RsqrtGrad", 0, 1),
                  ScopePattern("LayerNormGrad").add_node_op_type_feature(FUSED_BATCH_NORM_GRAD, 0, 1)]]]

    def may_fuse(self, op_types: AbstractSet[str]) -> bool:
        return not NORMALISER_GRADIENTS.isdisjoint(op_types)

    def last_match_scopes_and_ops(self, scope_graph: "ScopeGraph") -> list[ScopesResult]:
        """One result per ``RsqrtGrad`` or ``FusedBatchNormGradV3`` under the matched scopes, in the
        gradient scope it lies in."""
        self._regions: dict[tuple[str, tuple[int, ...]], GradRegion | str] = {}
        results: list[ScopesResult] = []
        index = scope_graph.index
        for scope in self.matched_scopes(scope_graph):
            for i in scope.all_node_indices():
                if index.ops[i] not in NORMALISER_GRADIENTS:
                    continue
                found = _region_or_reason(scope_graph, index.names[i], index.ops[i])
                home = found.scope if isinstance(found, GradRegion) else scope
                part = home if isinstance(home, ScopePart) else None
                key = _key(home.name, part)
                if key in self._regions:  # another normaliser gradient of the same scope: refused once
                    continue
                self._regions[key] = found
                results.append(ScopesResult([part.scope if part is not None else home],  # type: ignore[list-item]
                                            found.extra if isinstance(found, GradRegion) else [], part=part))
        return results

    def generate_fusion_result(self, scopes: Sequence["Scope"], result: FusionScopesResult) -> None:
        region = self._regions[_key(scopes[0].name, result.part)]
        if isinstance(region, str):
            fail(region)
        if result.part is not None:  # one of several calls' gradients in the scope: named like its dx
            result.set_name(region.dx[0])
        _describe(scopes[0].graph, region, result)


def _key(scope: str, part: ScopePart | None) -> tuple[str, tuple[int, ...]]:
    return scope, tuple(part.indices) if part is not None else ()


def _region_or_reason(sg: "ScopeGraph", grad: str, op: str) -> GradRegion | str:
    try:
        return find_fused_region(sg, grad) if op == FUSED_BATCH_NORM_GRAD else find_region(sg, grad)
    except Refused as why:
        return f"{grad!r}: {why.reason}"


def _describe(sg: "ScopeGraph", region: GradRegion, result: FusionScopesResult) -> None:
    """The inner graph: mean and variance of x (as tf.nn.moments computes them), LayerNormGrad, and an
    AddN when x's gradient sums other contributions too."""
    attrs: dict[str, Any] = {"begin_norm_axis": region.begin_norm_axis, "begin_params_axis": region.begin_params_axis,
                             "epsilon": region.epsilon, "T": region.dtype}
    result.set_type(LAYER_NORM_GRAD.name)
    result.set_description(f"LayerNormGrad over axes {region.axes}, the gradient of {region.forward.name!r} "
                           f"(its {len(region.recomputed)} inner tensors the gradient read recomputed from x)"
                           + (f", plus {len(region.extra_terms)} other contribution(s) to dx" if region.extra_terms
                              else ""))
    tensors = list(dict.fromkeys([region.dy, region.x, region.gamma, *region.extra_terms]))  # dy may be a term too
    _map_inputs(sg, region, result, tensors)
    result.insert_input_tensor(1, *region.x)  # x, which the gradient may read reshaped only (tf_keras' fused path)
    result.insert_input_tensor(2, *region.gamma)  # the parameter, which the gradient may read reshaped
    for name, port in region.recomputed:  # the forward's rsqrt(variance + epsilon), mean, gamma * rsqrt, ...
        if (name, port) != region.gamma:
            result.recompute(name, port)
    x, dy, gamma = result.fused_input(1), result.fused_input(0), result.fused_input(2)
    stats = {"T": region.dtype, "Tidx": DT_INT32, "keep_dims": True}
    axes = make_tensor_proto(np.asarray(region.axes, dtype=np.int32))
    AttrValue = message_class("AttrValue")
    result.add_inner_node("axes", "Const", [], {"value": AttrValue(tensor=axes), "dtype": AttrValue(type=DT_INT32)})
    result.add_inner_node("mean", "Mean", [x, "axes"], stats)
    result.add_inner_node("squared_difference", "SquaredDifference", [x, "mean"], {"T": region.dtype})
    result.add_inner_node("variance", "Mean", ["squared_difference", "axes"], stats)
    result.add_inner_node(LAYER_NORM_GRAD.name, LAYER_NORM_GRAD.name, [dy, x, "variance", "mean", gamma], attrs)
    dx = f"{LAYER_NORM_GRAD.name}:0"
    if region.extra_terms:
        terms = [result.fused_input(tensors.index(t)) for t in region.extra_terms]
        result.add_inner_node("dx", "AddN", [dx, *terms], {"N": 1 + len(terms), "T": region.dtype})
        dx = "dx:0"
    result.set_inner_output(0, dx)
    result.set_inner_output(1, f"{LAYER_NORM_GRAD.name}:1")
    result.set_inner_output(2, f"{LAYER_NORM_GRAD.name}:2")
    for k, tensor in enumerate((region.dx, region.dgamma, region.dbeta)):
        if tensor is not None:
            result.insert_outputs(tensor[0], [None] * tensor[1] + [k])


def _map_inputs(sg: "ScopeGraph", region: GradRegion, result: FusionScopesResult, tensors: list[Any]) -> None:
    """Every member slot that reads one of ``tensors`` reads that fused input."""
    index = sg.index
    wanted = {(index.index[name], port): k for k, (name, port) in enumerate(tensors)}
    members = set(region.scope.all_node_indices()) | {index.index[n] for n in region.extra}
    for m in sorted(members, key=lambda i: index.position[i]):
        slots = [wanted.get(t) for t in index.inputs[m] if t[1] != CONTROL]
        if any(s is not None for s in slots):
            result.insert_inputs(index.names[m], slots)
