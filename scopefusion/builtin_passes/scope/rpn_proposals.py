"""ScopeRpnProposalsPass: the Faster R-CNN first stage's post-processing -> ``RpnProposals``.

``FasterRCNNMetaArch.postprocess`` of the TF Object Detection API opens ``FirstStagePostprocessor``
and runs ``_postprocess_rpn`` there (for a model whose only stage is the RPN)::

    codes  = reshape(expand_dims(rpn_box_encodings, 2), [-1, 4])                      [B * N, 4]
    tiled  = reshape(tile(expand_dims(tile(expand_dims(anchors, 0), [B, 1, 1]), 2), [1, 1, 1, 1]), [-1, 4])
    boxes  = squeeze(reshape(Decode(codes, tiled), [B, N, 1, 4]), 2)                  a Decode scope
    scores = softmax(rpn_objectness_predictions_with_background)[:, :, 1]
    window = to_float(stack([0, 0, true_image_shapes[:, 0], true_image_shapes[:, 1]], 1))
    BatchMultiClassNonMaxSuppression(expand_dims(boxes, 2), expand_dims(scores, 2), window)
    per image: ToNormalizedCoordinates(nmsed_boxes[b], true_image_shapes[b][0], [1]); stack
    num_proposals = to_float(num_detections)

The fused op takes the RPN's box encodings and objectness logits, the anchors and the true image
shapes and gives the normalized proposals, their scores and their count.  The parts are checked by
the passes that know them (``ScopeDecodeBboxV2Pass``, ``ScopeBatchMultiClassNMSPass``,
``ScopeNormalizeBBoxPass``), which give the attributes; the wiring between them is matched op by op,
and a scope holding anything else is refused.  The batch must be known (the normalization then runs
once per image, unrolled); with an unknown batch the scope is refused with the reason.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.fusion.refusal import fail
from ...core.graph.matching import MatchFailure, PatternMatcher
from ...core.graph.pattern import const, one_of, op
from ...core.scope.base_pass import ScopeBasePass
from ...core.scope.patterns import PatternSet
from ...core.scope.port_maps import input_slots, unmatched_nodes
from ...core.scope.results import FusionScopesResult
from .batch_nms import ScopeBatchMultiClassNMSPass
from .batch_nms_op import batch_multiclass_nms_reference
from .box_coordinates import ScopeNormalizeBBoxPass
from .decode_bbox import ScopeDecodeBboxV2Pass, decode_bbox_v2_reference
from .stage_parts import Part, read_part, stage_patterns, sub_scopes

if TYPE_CHECKING:  # pragma: no cover
    from ...core.scope.scope_graph import Scope, ScopeGraph

Tensor = tuple[int, int]
SCOPE = "FirstStagePostprocessor"


def rpn_proposals_reference(rpn_box_encodings: Any, rpn_objectness: Any, anchors: Any, image_shapes: Any, *,
                            scales: Sequence[float], score_threshold: float, iou_threshold: float,
                            max_size_per_class: int, max_total_size: int, use_static_shapes: bool) -> tuple:
    """Decode the RPN's boxes against the anchors, score them by the foreground softmax, NMS them
    clipped to each image, and normalize the survivors by the image's size."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    with tf.name_scope("rpn_proposals_reference"):
        batch, count = tf.shape(rpn_box_encodings)[0], tf.shape(rpn_box_encodings)[1]
        tiled = tf.reshape(tf.tile(tf.expand_dims(anchors, 0), tf.stack([batch, 1, 1])), [-1, 4])
        (decoded,) = decode_bbox_v2_reference(tf.reshape(rpn_box_encodings, [-1, 4]), tiled, scales=scales,
                                              T=tf.float32)
        boxes = tf.reshape(decoded, tf.stack([batch, count, 1, 4]))
        scores = tf.nn.softmax(rpn_objectness)[:, :, 1:2]
        heights, widths = image_shapes[:, 0], image_shapes[:, 1]
        window = tf.cast(tf.stack([tf.zeros_like(heights), tf.zeros_like(widths), heights, widths], 1), tf.float32)
        nmsed, nmsed_scores, _, num = batch_multiclass_nms_reference(
            boxes, scores, window, score_threshold=score_threshold, iou_threshold=iou_threshold,
            max_size_per_class=max_size_per_class, max_total_size=max_total_size, change_coordinate_frame=False,
            use_static_shapes=use_static_shapes)
        y_scale = 1.0 / tf.cast(heights, tf.float32)
        x_scale = 1.0 / tf.cast(widths, tf.float32)
        scale = tf.stack([y_scale, x_scale, y_scale, x_scale], axis=1)[:, tf.newaxis, :]
        return nmsed * scale, nmsed_scores, tf.cast(num, tf.float32)


RPN_PROPOSALS = FusedOpDef(
    name="RpnProposals",
    inputs=(
        TensorArg("rpn_box_encodings", dtype="float32", description="[B, N, 4] box codes ty, tx, th, tw"),
        TensorArg("rpn_objectness", dtype="float32", description="[B, N, 2] logits, background first"),
        TensorArg("anchors", dtype="float32", description="[N, 4] anchors ymin, xmin, ymax, xmax (pixels)"),
        TensorArg("image_shapes", dtype="int32", description="[B, 3] true image shapes h, w, c"),
    ),
    outputs=(
        TensorArg("proposal_boxes", dtype="float32", description="[B, M, 4] normalized proposals, zero padded"),
        TensorArg("proposal_scores", dtype="float32", description="[B, M] objectness"),
        TensorArg("num_proposals", dtype="float32", description="[B] valid proposals per image"),
    ),
    attrs=(
        AttrDef("scales", "list(float)", description="the box coder's scale factors"),
        AttrDef("score_threshold", "float"),
        AttrDef("iou_threshold", "float"),
        AttrDef("max_size_per_class", "int"),
        AttrDef("max_total_size", "int", description="M, the proposals kept per image"),
        AttrDef("use_static_shapes", "bool", default=False),
    ),
    reference=rpn_proposals_reference,
    description="Faster R-CNN first stage: decode, clip, NMS and normalize the RPN's proposals",
)


def _slice(source: Any, begin: list[int], end: list[int], *, begin_mask: int = 0, end_mask: int = 0,
           shrink_axis_mask: int = 0) -> Any:
    """``source[begin:end]`` with unit strides and the given masks (each checked)."""
    return op("StridedSlice", source, const(begin), const(end), const([1] * len(begin)), begin_mask=begin_mask,
              end_mask=end_mask, shrink_axis_mask=shrink_axis_mask, ellipsis_mask=0, new_axis_mask=0)


def _glue_defs(batch: int, count: int) -> dict[str, Any]:
    # zeros_like of a row, folded to a constant when the batch is known
    zeros = one_of(const(where=lambda v: not np.any(v), description="zeros"),
                   op("ZerosLike", one_of("$clip_h", "$clip_w")))
    return {
        "codes": op("Reshape", op("ExpandDims", "$encodings", const(2)), const([-1, 4])),
        "tiled": op("Reshape", op("Tile", op("ExpandDims", op("Tile", op("ExpandDims", "$anchors", const(0)),
                                                                const([batch, 1, 1])), const(2)),
                                  const([1, 1, 1, 1])), const([-1, 4])),
        "boxes": op("ExpandDims", op("Squeeze", op("Reshape", "$decoded", const([batch, count, 1, 4])),
                                     squeeze_dims=[2]), const(2)),
        "scores": op("ExpandDims", _slice(op("Softmax", "$logits"), [0, 0, 1], [0, 0, 2], begin_mask=3, end_mask=3,
                                          shrink_axis_mask=4), const(2)),
        "window": op("Cast", op("Pack", zeros, zeros, "$clip_h", "$clip_w", axis=1, N=4), DstT=1),
        "clip_h": _slice("$image_shapes", [0, 0], [0, 1], begin_mask=1, end_mask=1, shrink_axis_mask=2),
        "clip_w": _slice("$image_shapes", [0, 1], [0, 2], begin_mask=1, end_mask=1, shrink_axis_mask=2),
    }



def _match(m: PatternMatcher, tensor: Tensor, expr: Any, what: str) -> None:
    try:
        m.match(tensor, expr)
    except MatchFailure as why:
        fail(f"the {what} is not wired as _postprocess_rpn wires it: {why}")


def _match_normalization(m: PatternMatcher, parts: list[Part], batch: int) -> None:
    """Image b's normalization reads row b of the NMS boxes and of the image shapes."""
    for b, part in enumerate(parts):
        row = op("Unpack", "$image_shapes", port=b, num=batch, axis=0)
        _match(m, part.inputs[0], op("Unpack", "$nmsed_boxes", port=b, num=batch, axis=0),
               f"boxes normalized by {part.scope.name}")
        _match(m, part.inputs[1], _slice(row, [0], [1], shrink_axis_mask=1), f"height of {part.scope.name}")
        _match(m, part.inputs[2], _slice(row, [1], [2], shrink_axis_mask=1), f"width of {part.scope.name}")


class ScopeRpnProposalsPass(ScopeBasePass):
    """OD API Faster R-CNN FirstStagePostprocessor scopes -> RpnProposals."""

    name = "ScopeRpnProposalsPass"
    general = False
    description = ("OD API Faster R-CNN FirstStagePostprocessor scopes (decode, softmax, NMS, normalize) "
                   "-> RpnProposals")

    def define_patterns(self) -> list[PatternSet]:
        return stage_patterns("RpnProposals", SCOPE)

    def generate_fusion_result(self, scopes: Sequence["Scope"], result: FusionScopesResult) -> None:
        scope = scopes[0]
        sg = scope.graph
        if scope.count("TensorArrayScatterV3") or scope.count("While"):
            fail("the batch is unknown: NMS and normalization run in loops; RpnProposals is matched on an "
                 "unrolled batch")
        decode = self._one(scope, "Decode", ScopeDecodeBboxV2Pass)
        nms = self._one(scope, "BatchMultiClassNonMaxSuppression", ScopeBatchMultiClassNMSPass)
        if nms.attrs.get("change_coordinate_frame"):
            fail("the proposals are NMSed relative to the clip window (change_coordinate_frame)")
        norms = [read_part(ScopeNormalizeBBoxPass, s) for s in sub_scopes(scope, "ToNormalizedCoordinates")]
        shape = sg.static_shape(nms.inputs[0])
        if shape is None or len(shape) != 4 or None in shape[:2] or shape[2:] != [1, 4]:
            fail(f"the NMS boxes are not [B, N, 1, 4] of a known batch (shape {shape})")
        batch, count = int(shape[0] or 0), int(shape[1] or 0)
        if len(norms) != batch:
            fail(f"{len(norms)} ToNormalizedCoordinates scopes for a batch of {batch}")
        parts = [decode, nms, *norms]
        inside = frozenset(scope.all_node_indices()) - {i for p in parts for i in p.scope.all_node_indices()}
        m = PatternMatcher(sg, inside=inside, defs=_glue_defs(batch, count))
        m.tensors.update(decoded=decode.outputs[0], nmsed_boxes=nms.outputs[0])
        _match(m, decode.inputs[0], "$codes", "box codes")
        _match(m, decode.inputs[1], "$tiled", "anchors")
        _match(m, nms.inputs[0], "$boxes", "NMS boxes")
        _match(m, nms.inputs[1], "$scores", "NMS scores")
        _match(m, nms.inputs[2], "$window", "clip window")
        _match_normalization(m, norms, batch)
        stacked = self._stack(sg, scope, norms)
        count_cast = [n.name for n in scope.nodes_by_op("Cast", direct=True)
                      if sg.producer(n.name, 0) == (sg.index.names[nms.outputs[3][0]], nms.outputs[3][1])]
        if len(count_cast) != 1:
            fail("the proposal count is not cast to float once (tf.to_float(num_proposals))")
        members = set(m.members) | {sg.index.index[stacked], sg.index.index[count_cast[0]]}
        extra = unmatched_nodes(scope, members | (frozenset(scope.all_node_indices()) - inside))
        if extra:
            fail(f"the scope computes more than the proposals: {', '.join(extra[:3])}", *extra[:3])
        result.set_type(RPN_PROPOSALS.name)
        result.set_description(f"RpnProposals: {max(nms.attrs['max_total_size'], 0)} proposals per image")
        result.set_attr("scales", decode.attrs["scales"])
        for key in ("score_threshold", "iou_threshold", "max_size_per_class", "max_total_size", "use_static_shapes"):
            result.set_attr(key, nms.attrs[key])
        tensors = [m.tensors[k] for k in ("encodings", "logits", "anchors", "image_shapes")]
        for reader, slots in input_slots(sg, frozenset(scope.all_node_indices()), tensors).items():
            result.insert_inputs(scope.suffix_of(reader), slots)
        result.insert_outputs(scope.suffix_of(stacked), [0])
        scores_node, scores_port = nms.outputs[1]
        ports: list[int | None] = [None] * (scores_port + 1)
        ports[scores_port] = 1
        result.insert_outputs(scope.suffix_of(sg.index.names[scores_node]), ports)
        result.insert_outputs(scope.suffix_of(count_cast[0]), [2])

    @staticmethod
    def _one(scope: "Scope", name: str, pass_type: type[ScopeBasePass]) -> Part:
        found = sub_scopes(scope, name)
        if len(found) != 1:
            fail(f"{len(found)} {name} scopes in the stage, not one")
        return read_part(pass_type, found[0])

    @staticmethod
    def _stack(sg: "ScopeGraph", scope: "Scope", norms: list[Part]) -> str:
        """The stack of the normalized boxes, image by image."""
        outs = [(sg.index.names[p.outputs[0][0]], p.outputs[0][1]) for p in norms]
        for node in scope.nodes_by_op("Pack", direct=True):
            if [sg.producer(node.name, k) for k in range(len(norms))] == outs and len(node.input) == len(norms):
                return node.name
        fail("the normalized boxes are not stacked image by image")

