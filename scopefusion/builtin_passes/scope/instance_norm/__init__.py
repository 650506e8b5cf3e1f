"""ScopeInstanceNormPass: instance normalization scopes -> ``InstanceNorm``.

Two spellings are recognised, both built from ``tf.nn.moments`` (with kept
dimensions) and ``tf.nn.batch_normalization``:

* ``tf_slim.instance_norm`` (NHWC or NCHW, rank >= 3, ``center`` / ``scale``
  on or off)::

      .../InstanceNorm/moments/{mean, StopGradient, SquaredDifference, variance}
      .../InstanceNorm/instancenorm/{add, Rsqrt, mul, mul_1, mul_2, sub, add_1}
      .../InstanceNorm/{Reshape, Reshape_1}      (NCHW: beta and gamma as [1, C, 1, 1])

* the same written by hand in any scope::

      with tf.name_scope("norm"):
          mean, variance = tf.nn.moments(x, [1, 2], keepdims=True)
          y = tf.nn.batch_normalization(x, mean, variance, beta, gamma, epsilon)

The pattern labels ``moments`` scopes (Mean x2, SquaredDifference); each is
analysed by wiring, never by node names: the moments' input ``x``, the batch
normalization that reads the moments, epsilon, gamma and beta.  The moments
are an instance normalization's when they keep dimensions and reduce exactly
the spatial axes of ``x``: ``[1, rank - 1)`` (NHWC) or ``[2, rank)`` (NCHW),
rank >= 3.  Moments over the batch axis (batch norms) or over axes that
include the channel axis (layer norms) are refused as "not an instance
normalization", with the reason, so that every match of the pattern is
accounted for in the report.
NCHW moments reduce the trailing axes, as a layer norm does: there gamma /
beta must be per channel, and without gamma and beta only the tf_slim naming
(``InstanceNorm`` / ``instancenorm``) tells an instance norm from a layer norm.
An instance normalization the op cannot take (gamma of shape [1, 1, 1, C] or
per instance, another output formula, ...) is refused with the reason.

A result holds the moments and batch-normalization nodes only (plus the
Reshapes of NCHW parameters) and is named after the scope holding the
moments; anything else in that scope, such as a tf_slim ``activation_fn``,
stays in the graph and reads the fused op.  A missing gamma or beta
(``scale=False`` / ``center=False``) is passed to the fused op as explicit
per-channel ones / zeros built next to it (an inner graph ending in the
``InstanceNorm`` node ``<scope>/instance_norm``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, AbstractSet, Any, Sequence

import numpy as np

from ....core.fusion.refusal import Refused, fail
from ....core.graph.protos import message_class
from ....core.graph.tensor_codec import make_tensor_proto
from ....core.graph.vocabulary import DT_INT32, numpy_dtype
from ....core.scope.base_pass import ScopeBasePass
from ....core.scope.patterns import PatternSet, ScopePattern
from ....core.scope.results import FusionScopesResult, ScopesResult
from .analysis import _analyse, _Candidate, _Match, _slots_of
from .op import INSTANCE_NORM, MOMENTS_LABEL, instance_norm_reference
from .reads import OTHER_NORMALIZATION

if TYPE_CHECKING:  # pragma: no cover
    from ....core.fusion.candidate import FusedInput
    from ....core.scope.scope_graph import Scope, ScopeGraph

__all__ = ["INSTANCE_NORM", "ScopeInstanceNormPass", "instance_norm_reference"]


class ScopeInstanceNormPass(ScopeBasePass):
    """Instance normalization scopes (tf_slim instance_norm, moments + batch_normalization) -> InstanceNorm."""

    name = "ScopeInstanceNormPass"
    general = False
    description = ("tf_slim instance_norm / tf.nn.moments over spatial axes + batch_normalization "
                   "-> InstanceNorm(x, gamma, beta)")

    def __init__(self) -> None:
        self._candidates: dict[int, _Candidate] = {}

    def define_patterns(self) -> list[PatternSet]:
        moments = (
            ScopePattern(MOMENTS_LABEL)
            .add_scope_feature(suffix="moments")
            .add_node_op_type_feature("Mean", 2)
            .add_node_op_type_feature("SquaredDifference", 1)
        )
        return [[[moments]]]

    def may_fuse(self, op_types: AbstractSet[str]) -> bool:
        return self.patterns_may_match(op_types)  # its results are its matched scopes

    def last_match_scopes_and_ops(self, scope_graph: "ScopeGraph") -> list[ScopesResult]:
        """One result per matched ``moments`` scope; moments of another normalization
        (a batch or layer norm's) are refused with the reason."""
        matched = self.matched_scopes(scope_graph)
        siblings: dict[int, int] = {}
        for m in matched:
            key = id(m.parent)
            siblings[key] = siblings.get(key, 0) + 1
        groups: list[ScopesResult] = []
        self._candidates = {}
        for m in matched:
            parent = m.parent
            assert parent is not None  # a moments scope is never the root
            slim_named = parent.last_name == "InstanceNorm"
            try:
                match = _analyse(m, alone=siblings[id(parent)] == 1)
            except Refused as why:
                if why.kind == OTHER_NORMALIZATION:  # refused, so that every match has its reason
                    name = parent.name if slim_named else m.name
                    candidate = _Candidate(m, name, rejection=f"not an instance normalization: {why.reason}")
                else:
                    name = parent.name if parent.name and siblings[id(parent)] == 1 else m.name
                    candidate = _Candidate(m, name, rejection=why.reason)
                groups.append(ScopesResult([m]))
            else:
                candidate = _Candidate(m, match.name, match=match)
                groups.append(ScopesResult(list(match.scopes), list(match.extra_nodes)))
            self._candidates[id(m)] = candidate
        return groups

    def generate_fusion_result(self, scopes: Sequence["Scope"], result: FusionScopesResult) -> None:
        candidate = self._candidates.get(id(scopes[0]))
        if candidate is None:  # pragma: no cover - only results of last_match_scopes_and_ops arrive
            fail("not a candidate of this pass")
        result.set_name(candidate.name)
        if candidate.match is None:
            fail(candidate.rejection or "not an instance normalization")
        match = candidate.match
        result.set_type(INSTANCE_NORM.name)
        result.set_description(
            f"InstanceNorm {match.attrs['data_format']} over axes {match.attrs['axes']}"
        )
        for key, value in match.attrs.items():
            result.set_attr(key, value)
        sg = scopes[0].graph

        # the fused op's own inputs: x, then gamma and beta where the graph has them
        params = [p for p in (match.gamma, match.beta) if p is not None]
        complete = len(params) == 2
        for reader in match.x_readers:
            result.insert_inputs(reader, _slots_of(sg, reader, match.x, 0))
        for k, param in enumerate(params, start=1):
            slots: list[int | None] = [None] * len(sg.input_names(param.reader))
            slots[param.slot] = k
            result.insert_inputs(param.reader, slots)
        result.insert_outputs(match.out_add, [0])
        result.insert_outputs(match.mean_out, [1])
        result.insert_outputs(match.variance_out, [2])
        if not complete:
            _missing_params_inner_graph(result, match)


# ---------------------------------------------------------------- inner graph
def _const_attr(value: Any, dtype: int) -> dict[str, Any]:
    proto = make_tensor_proto(np.asarray(value, dtype=numpy_dtype(dtype)))
    AttrValue = message_class("AttrValue")
    return {"value": AttrValue(tensor=proto), "dtype": AttrValue(type=dtype)}


def _missing_params_inner_graph(result: FusionScopesResult, match: _Match) -> None:
    """``scale=False`` / ``center=False``: feed the fused op per-channel ones / zeros.

    Fused input 0 is x, fused input 1 the parameter that exists (if any).  The
    ones / zeros have the other parameter's shape, or [C] read from x's shape.
    """
    T = match.attrs["T"]
    fi = result.fused_input
    t = {"T": T}
    if match.gamma is None and match.beta is not None:
        result.add_inner_node("scale", "OnesLike", [fi(1)], t)
        args: list[str | FusedInput] = [fi(0), "scale", fi(1)]
    elif match.beta is None and match.gamma is not None:
        result.add_inner_node("offset", "ZerosLike", [fi(1)], t)
        args = [fi(0), fi(1), "offset"]
    else:
        c = match.channel_axis
        result.add_inner_node("shape", "Shape", [fi(0)], {"T": T, "out_type": DT_INT32})
        for name, value in (("channel_begin", [c]), ("channel_end", [c + 1]), ("channel_stride", [1])):
            result.add_inner_node(name, "Const", [], _const_attr(value, DT_INT32))
        result.add_inner_node(
            "channels", "StridedSlice", ["shape", "channel_begin", "channel_end", "channel_stride"],
            {"T": DT_INT32, "Index": DT_INT32, "begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0,
             "new_axis_mask": 0, "shrink_axis_mask": 0},
        )
        result.add_inner_node("one", "Const", [], _const_attr(1, T))
        result.add_inner_node("scale", "Fill", ["channels", "one"], {"T": T, "index_type": DT_INT32})
        result.add_inner_node("offset", "ZerosLike", ["scale"], t)
        args = [fi(0), "scale", "offset"]
    result.add_inner_node("instance_norm", INSTANCE_NORM.name, args, dict(match.attrs))
    for port in range(len(INSTANCE_NORM.outputs)):
        result.set_inner_output(port, f"instance_norm:{port}")


