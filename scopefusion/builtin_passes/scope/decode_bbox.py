"""ScopeDecodeBboxV2Pass: the Faster R-CNN box coder's ``Decode`` scope -> ``DecodeBboxV2``.

``FasterRcnnBoxCoder.decode`` (TF Object Detection API, ``box_coders/faster_rcnn_box_coder.py``)
opens a ``Decode`` name scope and computes, from anchor-encoded boxes ``rel_codes`` [N, 4] and
anchors [N, 4] as ``[ymin, xmin, ymax, xmax]``::

    Decode/get_center_coordinates_and_sizes/{transpose, unstack, sub, sub_1, truediv, add, ...}
        ha, wa = ymax_a - ymin_a, xmax_a - xmin_a; yca, xca = ymin_a + ha / 2, xmin_a + wa / 2
    Decode/{transpose, unstack}        ty, tx, th, tw = unstack(transpose(rel_codes))
    Decode/truediv .. truediv_3        ty /= scales[0], ... (only when the coder has scale factors)
    Decode/{Exp, Exp_1, mul*, add*}    w = exp(tw) * wa; h = exp(th) * ha; yc = ty * ha + yca; ...
    Decode/{sub, sub_1, add_2, add_3}  ymin = yc - h / 2, xmin = xc - w / 2, ymax = ..., xmax = ...
    Decode/{stack, transpose_1}        boxes = transpose(stack([ymin, xmin, ymax, xmax]))

The pattern finds candidates by name and op counts; the whole scope is then matched node by node
against that expression (wiring, ports, constants), the four scale factors are read from the
``truediv`` constants (1.0 where the coder divides by nothing), and a scope holding anything else
is refused with the reason.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence


from ...core.scope.base_pass import ScopeBasePass
from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.fusion.refusal import fail
from ...core.scope.patterns import PatternSet, ScopePattern
from ...core.scope.results import FusionScopesResult
from ...core.graph.matching import MatchFailure, PatternMatcher
from ...core.graph.pattern import Alt, Op, const, one_of, op
from ...core.scope.port_maps import input_slots, unmatched_nodes
from ...core.graph.vocabulary import ADD_OPS as ADD, DIV_OPS as DIV

if TYPE_CHECKING:  # pragma: no cover
    from ...core.scope.scope_graph import Scope

Tensor = tuple[str, int]


def decode_bbox_v2_reference(rel_codes: Any, anchors: Any, *, scales: Sequence[float], T: Any) -> tuple[Any]:
    """Decode Faster R-CNN box codes [N, 4] (ty, tx, th, tw) against anchors [N, 4]
    ([ymin, xmin, ymax, xmax]) into boxes [N, 4] ([ymin, xmin, ymax, xmax])."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    # Its own name scope: when TensorFlow inlines the function, its nodes are named
    # "<fused node>/<node>", which must not collide with nodes kept under the fused scope.
    with tf.name_scope("decode_bbox_v2_reference"):
        ymin_a, xmin_a, ymax_a, xmax_a = (anchors[..., k] for k in range(4))
        ha = ymax_a - ymin_a
        wa = xmax_a - xmin_a
        yca = ymin_a + ha / 2.0
        xca = xmin_a + wa / 2.0
        ty, tx, th, tw = (rel_codes[..., k] / tf.cast(scales[k], rel_codes.dtype) for k in range(4))
        w = tf.exp(tw) * wa
        h = tf.exp(th) * ha
        yc = ty * ha + yca
        xc = tx * wa + xca
        return (tf.stack([yc - h / 2.0, xc - w / 2.0, yc + h / 2.0, xc + w / 2.0], axis=-1),)


DECODE_BBOX_V2 = FusedOpDef(
    name="DecodeBboxV2",
    inputs=(
        TensorArg("rel_codes", type_attr="T", description="[N, 4] encoded boxes ty, tx, th, tw"),
        TensorArg("anchors", type_attr="T", description="[N, 4] anchors ymin, xmin, ymax, xmax"),
    ),
    outputs=(TensorArg("boxes", type_attr="T", description="[N, 4] boxes ymin, xmin, ymax, xmax"),),
    attrs=(
        AttrDef("scales", "list(float)", description="the coder's scale factors for ty, tx, th, tw"),
        AttrDef("T", "type"),
    ),
    reference=decode_bbox_v2_reference,
    description="Faster R-CNN box decoding: center/size deltas relative to anchors -> box corners",
)


# ------------------------------------------------------------------------ the pass
PERM = const([1, 0])
HALF = const(2.0)


def _decode_defs() -> dict[str, Any]:
    def unpack(var: str, k: int) -> Op:
        return op("Unpack", var, port=k, num=4, axis=0)

    def scaled(k: int) -> Alt:
        return one_of(op(DIV, unpack("$codes_t", k), const(label=f"scale{k}")), unpack("$codes_t", k))

    return {
        "boxes": op("Transpose", op("Pack", "$ymin", "$xmin", "$ymax", "$xmax", axis=0, N=4), PERM),
        "ymin": op("Sub", "$yc", op(DIV, "$h", HALF)),
        "xmin": op("Sub", "$xc", op(DIV, "$w", HALF)),
        "ymax": op(ADD, "$yc", op(DIV, "$h", HALF)),
        "xmax": op(ADD, "$xc", op(DIV, "$w", HALF)),
        "w": op("Mul", op("Exp", "$tw"), "$wa"),
        "h": op("Mul", op("Exp", "$th"), "$ha"),
        "yc": op(ADD, op("Mul", "$ty", "$ha"), "$yca"),
        "xc": op(ADD, op("Mul", "$tx", "$wa"), "$xca"),
        "ty": scaled(0),
        "tx": scaled(1),
        "th": scaled(2),
        "tw": scaled(3),
        "codes_t": op("Transpose", "$rel_codes", PERM),
        "ha": op("Sub", unpack("$anchors_t", 2), unpack("$anchors_t", 0)),
        "wa": op("Sub", unpack("$anchors_t", 3), unpack("$anchors_t", 1)),
        "yca": op(ADD, unpack("$anchors_t", 0), op(DIV, "$ha", HALF)),
        "xca": op(ADD, unpack("$anchors_t", 1), op(DIV, "$wa", HALF)),
        "anchors_t": op("Transpose", "$anchors", PERM),
    }


class ScopeDecodeBboxV2Pass(ScopeBasePass):
    """Faster R-CNN box coder Decode scopes (TF Object Detection API) -> DecodeBboxV2."""

    name = "ScopeDecodeBboxV2Pass"
    general = False
    description = "OD API FasterRcnnBoxCoder Decode scopes -> DecodeBboxV2(rel_codes, anchors)"

    def define_patterns(self) -> list[PatternSet]:
        pattern = (
            ScopePattern("DecodeBboxV2")
            .add_scope_feature(suffix="Decode", sub_scope_mask="get_center_coordinates_and_sizes")
            .add_node_op_type_feature("Exp", 2)
            .add_node_op_type_feature("Unpack", 2)
            .add_node_op_type_feature("Transpose", 3)
            .add_node_op_type_feature("Pack", 1)
        )
        return [[[pattern]]]

    def generate_fusion_result(self, scopes: Sequence["Scope"], result: FusionScopesResult) -> None:
        scope = scopes[0]
        sg = scope.graph
        inside = frozenset(scope.all_node_indices())
        names = frozenset(scope.node_names())
        pack = scope.nodes_by_op("Pack")[0].name
        outs = [c for c in sg.consumer_names(pack) if c in names and sg.op_of(c) == "Transpose"]
        if len(outs) != 1:
            fail("the stacked corners are not transposed once into the output")
        out = outs[0]
        m = PatternMatcher(sg, inside=inside, defs=_decode_defs())
        try:
            m.match((sg.index.index[out], 0), "$boxes")
        except MatchFailure as why:
            fail(f"not the Faster R-CNN decode: {why}")
        extra = unmatched_nodes(scope, m.members)
        if extra:
            fail(f"the scope computes more than the decode: {', '.join(extra[:3])}", *extra[:3])
        scales = []
        for k in range(4):
            value = m.consts.get(f"scale{k}")
            if value is not None and value.size != 1:
                fail(f"scale factor {k} is not a scalar")
            scales.append(1.0 if value is None else float(value.reshape(-1)[0]))
        result.set_type(DECODE_BBOX_V2.name)
        result.set_description(f"DecodeBboxV2 with scales {scales}")
        result.set_attr("scales", scales)
        result.set_attr("T", sg.node(scope.nodes_by_op("Exp")[0].name).attr["T"].type)
        for reader, slots in input_slots(sg, inside, [m.tensors["rel_codes"], m.tensors["anchors"]]).items():
            result.insert_inputs(scope.suffix_of(reader), slots)
        result.insert_outputs(scope.suffix_of(out), [0])
