"""ScopeKeepRatioResizeBilinearPass: ``preprocessor.resize_to_range`` -> ``KeepRatioResizeBilinear``.

``resize_to_range(image, min_dimension, max_dimension)`` (TF Object Detection API,
``core/preprocessor.py``; the ``keep_aspect_ratio_resizer`` of Faster R-CNN and SSD pipelines)
opens a ``ResizeToRange`` name scope.  For an image whose size is known only at run time it
computes the new size in the graph (``_compute_new_dynamic_size``)::

    h, w = to_float(shape(image)[0]), to_float(shape(image)[1])
    large = stack([to_int32(round(h * s)), to_int32(round(w * s))])     s = min_dimension / min(h, w)
    small = stack([to_int32(round(h * t)), to_int32(round(w * t))])     t = max_dimension / max(h, w)
    new_size = cond(to_float(reduce_max(large)) > max_dimension, small, large)   (only with a maximum)
    new_size = stack(unstack(new_size) + [shape(image)[2]])
    resized = squeeze(ResizeBilinear(expand_dims(image, 0), new_size[:2]), 0)

and returns ``[resized, new_size]``.  The fused op has both outputs and the attributes
``min_dimension``, ``max_dimension`` (0: none), ``align_corners`` and ``half_pixel_centers`` (read
from the graph); it computes exactly that.

Refused with the reason: another resize method than bilinear, masks resized alongside,
``pad_to_max_dimension``, and an image whose size is static (the OD API then computes the new size
in Python: the scope holds a constant size and a plain resize, the range is not in the graph).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.fusion.refusal import fail
from ...core.graph.attrs import attr_value_to_python
from ...core.graph.matching import MatchFailure, PatternMatcher
from ...core.graph.pattern import const, op
from ...core.scope.base_pass import ScopeBasePass
from ...core.scope.patterns import PatternSet, ScopePattern
from ...core.scope.port_maps import input_slots, unmatched_nodes
from ...core.scope.results import FusionScopesResult

if TYPE_CHECKING:  # pragma: no cover
    from ...core.scope.scope_graph import Scope

RESIZE_OPS = ("ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic", "ResizeArea")


def keep_ratio_resize_bilinear_reference(image: Any, *, min_dimension: float, max_dimension: float,
                                         align_corners: bool, half_pixel_centers: bool,
                                         T: Any) -> tuple[Any, Any]:
    """Resize ``image`` [H, W, C] bilinearly so that its shorter side is ``min_dimension``, or its
    longer side ``max_dimension`` if that would pass it; returns the image (float32) and its
    size ``[h, w, C]`` (int32)."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    with tf.name_scope("keep_ratio_resize_bilinear_reference"):
        shape = tf.shape(image)
        h, w = tf.cast(shape[0], tf.float32), tf.cast(shape[1], tf.float32)

        def sized(scale: Any) -> Any:
            return tf.stack([tf.cast(tf.round(h * scale), tf.int32), tf.cast(tf.round(w * scale), tf.int32)])

        size = sized(tf.constant(min_dimension, tf.float32) / tf.minimum(h, w))
        if max_dimension:
            limit = tf.constant(max_dimension, tf.float32)
            small = sized(limit / tf.maximum(h, w))
            size = tf.where(tf.cast(tf.reduce_max(size), tf.float32) > limit, small, size)
        new_size = tf.concat([size, shape[2:3]], 0)
        resized = tf.raw_ops.ResizeBilinear(images=tf.expand_dims(image, 0), size=size,
                                            align_corners=align_corners, half_pixel_centers=half_pixel_centers)
        return tf.squeeze(resized, [0]), new_size


KEEP_RATIO_RESIZE_BILINEAR = FusedOpDef(
    name="KeepRatioResizeBilinear",
    inputs=(TensorArg("image", type_attr="T", description="[H, W, C] image of a size known at run time"),),
    outputs=(
        TensorArg("resized", dtype="float32", description="[h, w, C] image, aspect ratio kept"),
        TensorArg("new_size", dtype="int32", description="[3]: h, w, C"),
    ),
    attrs=(
        AttrDef("min_dimension", "float", description="the shorter side's target"),
        AttrDef("max_dimension", "float", description="the longer side's limit (0: none)"),
        AttrDef("align_corners", "bool"),
        AttrDef("half_pixel_centers", "bool"),
        AttrDef("T", "type"),
    ),
    reference=keep_ratio_resize_bilinear_reference,
    description="Bilinear resize keeping the aspect ratio: shorter side to a minimum, longer side within a maximum",
)


#: the end of new_size[:-1] (or [:2]) on the [3] size
FIRST_TWO_END = const(where=lambda v: np.asarray(v).reshape(-1).tolist() in ([2], [-1]), description="[2] or [-1]")


def _side(k: int) -> Any:
    return op("StridedSlice", "$shape", const([k]), const([k + 1]), const([1]), shrink_axis_mask=1)


def _resize_defs(bounded: bool) -> dict[str, Any]:
    def sized(scale: Any) -> Any:
        return op("Pack", *(op("Cast", op("Round", op("Mul", side, scale)), DstT=3) for side in ("$h", "$w")),
                  axis=0, N=2)

    defs: dict[str, Any] = {
        "new_size": op("Pack", op("Unpack", "$size", port=0, num=2), op("Unpack", "$size", port=1, num=2),
                       _side(2), axis=0, N=3),
        "resized": op("Squeeze", op("ResizeBilinear", op("ExpandDims", "$image", const(0)),
                                    op("StridedSlice", "$new_size", const([0]), FIRST_TWO_END, const([1]),
                                       end_mask=0, shrink_axis_mask=0),
                                    label="resize"), squeeze_dims=[0]),
        "shape": op("Shape", "$image", out_type=3),
        "h": op("Cast", _side(0), DstT=1),
        "w": op("Cast", _side(1), DstT=1),
        "large": sized(op("RealDiv", const(label="min_dimension"), op("Minimum", "$h", "$w"))),
        "size": "$large",
    }
    if bounded:
        defs["small"] = sized(op("RealDiv", const(label="max_dimension"), op("Maximum", "$h", "$w")))
        pred = op("Identity", op("Greater", op("Cast", op("Max", "$large", const(0)), DstT=1),
                                 const(label="limit")))
        defs["size"] = op("Merge", op("Switch", "$large", pred, port=0), op("Switch", "$small", pred, port=1),
                          unordered=True)
    return defs


class ScopeKeepRatioResizeBilinearPass(ScopeBasePass):
    """preprocessor.resize_to_range scopes (TF Object Detection API) -> KeepRatioResizeBilinear."""

    name = "ScopeKeepRatioResizeBilinearPass"
    general = False
    description = "OD API preprocessor.resize_to_range scopes -> KeepRatioResizeBilinear(image)"

    def define_patterns(self) -> list[PatternSet]:
        # resize_images of one [H, W, C] image: ExpandDims, the resize, Squeeze (whatever the method)
        pattern = (
            ScopePattern("KeepRatioResizeBilinear")
            .add_scope_feature(suffix="ResizeToRange")
            .add_node_op_type_feature("ExpandDims", 0, 1)
            .add_node_op_type_feature("Squeeze", 0, 1)
        )
        return [[[pattern]]]

    def generate_fusion_result(self, scopes: Sequence["Scope"], result: FusionScopesResult) -> None:
        scope = scopes[0]
        sg = scope.graph
        resizes = [n for kind in RESIZE_OPS for n in scope.nodes_by_op(kind)]
        if len(resizes) != 1:
            fail(f"the scope resizes {len(resizes)} tensors (masks too?); KeepRatioResizeBilinear resizes "
                 "one image" if resizes else "the scope resizes nothing")
        if resizes[0].op != "ResizeBilinear":
            fail(f"the image is resized by {resizes[0].op}, not bilinearly", resizes[0].name)
        if scope.count("Pad") or scope.count("PadV2"):
            fail("the image is padded to the maximum dimension (pad_to_max_dimension); "
                 "KeepRatioResizeBilinear does not pad")
        if not scope.nodes_by_op("Shape"):
            fail("the image's size is static: the new size was computed in Python (a constant), the "
                 "range is not in the graph")
        inside = frozenset(scope.all_node_indices())
        bounded = scope.count("Merge") > 0
        m = PatternMatcher(sg, inside=inside, defs=_resize_defs(bounded))
        squeeze = sg.consumer_names(resizes[0].name)
        packs = [n.name for n in scope.nodes_by_op("Pack") if sg.op_of(sg.producer(n.name, 0)[0]) == "Unpack"]
        if len(squeeze) != 1 or len(packs) != 1:
            fail("not resize_to_range's resize and new size")
        try:
            m.match((sg.index.index[squeeze[0]], 0), "$resized")
            m.match((sg.index.index[packs[0]], 0), "$new_size")
        except MatchFailure as why:
            fail(f"not resize_to_range's keep-aspect-ratio resize: {why}")
        if bounded and not np.array_equal(m.consts["limit"], m.consts["max_dimension"]):
            fail("the size is bounded by another value than the one it is scaled to")
        extra = unmatched_nodes(scope, m.members)
        if extra:
            fail(f"the scope computes more than the resize: {', '.join(extra[:3])}", *extra[:3])
        bounds = [float(np.asarray(m.consts[k]).reshape(-1)[0]) if k in m.consts else 0.0
                  for k in ("min_dimension", "max_dimension")]
        attrs = {k: attr_value_to_python(v) for k, v in sg.node(sg.index.names[m.nodes["resize"]]).attr.items()}
        result.set_type(KEEP_RATIO_RESIZE_BILINEAR.name)
        result.set_description(f"KeepRatioResizeBilinear to the range {bounds}")
        result.set_attr("min_dimension", bounds[0])
        result.set_attr("max_dimension", bounds[1])
        result.set_attr("align_corners", bool(attrs.get("align_corners", False)))
        result.set_attr("half_pixel_centers", bool(attrs.get("half_pixel_centers", False)))
        result.set_attr("T", sg.node(sg.index.names[m.nodes["resize"]]).attr["T"].type)
        for reader, slots in input_slots(sg, inside, [m.tensors["image"]]).items():
            result.insert_inputs(scope.suffix_of(reader), slots)
        result.insert_outputs(scope.suffix_of(squeeze[0]), [0])
        result.insert_outputs(scope.suffix_of(packs[0]), [1])
