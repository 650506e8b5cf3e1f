"""ScopeROIAlignPass: a crop-and-resize of proposals followed by a pooling -> ``ROIAlign``.

The Faster R-CNN meta-architecture of the TF Object Detection API computes the second stage's
input (``_compute_second_stage_input_feature_maps``) as::

    CropAndResize/...                 ops.native_crop_and_resize(features, boxes [B, K, 4], crop_size):
        Reshape(boxes, [-1, 4]), box indices reshape(ones([B, K]) * expand_dims(range(B), 1), [-1]),
        CropAndResize, then Reshape to [B, K, crop_h, crop_w, C]
    Reshape                           _flatten_first_two_dimensions: [B * K, crop_h, crop_w, C]
    MaxPool2D/MaxPool                 slim.max_pool2d(kernel, stride)

that is a region-of-interest align: bilinear samples on a grid of ``crop_size`` per box, pooled by
the window.  The pass takes the ``CropAndResize`` scope of ``native_crop_and_resize`` (or a scope
named ``roi_align`` holding the crop and the pooling) with the reshapes and the pooling after it,
whether they lie inside the scope or follow it.  The box indices must be the ones
``native_crop_and_resize`` computes (box k of image b crops image b), known statically.

Refused with the reason: a crop that no pooling reads (a crop and resize, not an ROI align),
reshapes that change more than the first two dimensions, an NCHW pooling, box indices computed
at run time (an unknown batch or box count).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.fusion.refusal import Refused, fail
from ...core.graph.attrs import attr_value_to_python
from ...core.graph.matching import MatchFailure, PatternMatcher
from ...core.graph.pattern import const, op
from ...core.scope.base_pass import ScopeBasePass
from ...core.scope.patterns import PatternSet, ScopePattern
from ...core.scope.port_maps import input_slots, unmatched_nodes
from ...core.scope.results import FusionScopesResult, ScopesResult

if TYPE_CHECKING:  # pragma: no cover
    from ...core.scope.scope_graph import Scope, ScopeGraph

POOLS = {"MaxPool": "max", "AvgPool": "avg"}


def roi_align_reference(features: Any, boxes: Any, *, crop_size: Sequence[int], method: str,
                        extrapolation_value: float, pooling: str, ksize: Sequence[int],
                        strides: Sequence[int], padding: str, T: Any) -> tuple[Any]:
    """Crop every box of ``boxes`` [B, K, 4] (normalized ymin, xmin, ymax, xmax) out of its own
    image of ``features`` [B, H, W, C], resize it to ``crop_size`` and pool it: [B * K, h, w, C]."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    with tf.name_scope("roi_align_reference"):
        shape = tf.shape(boxes)
        indices = tf.reshape(tf.ones(shape[:2], tf.int32) * tf.expand_dims(tf.range(shape[0]), 1), [-1])
        crops = tf.image.crop_and_resize(features, tf.reshape(boxes, [-1, 4]), indices, list(crop_size),
                                         method=method, extrapolation_value=extrapolation_value)
        pool = tf.nn.max_pool2d if pooling == "max" else tf.nn.avg_pool2d
        return (pool(crops, list(ksize), list(strides), padding),)


ROI_ALIGN = FusedOpDef(
    name="ROIAlign",
    inputs=(
        TensorArg("features", type_attr="T", description="[B, H, W, C] feature maps"),
        TensorArg("boxes", dtype="float32", description="[B, K, 4] normalized boxes ymin, xmin, ymax, xmax per image"),
    ),
    outputs=(TensorArg("pooled", dtype="float32", description="[B * K, h, w, C] pooled crops"),),
    attrs=(
        AttrDef("crop_size", "list(int)", description="[crop_h, crop_w]: bilinear samples per box"),
        AttrDef("method", "string", description="the crop's interpolation (bilinear or nearest)"),
        AttrDef("extrapolation_value", "float", description="the value sampled outside the image"),
        AttrDef("pooling", "string", description="max or avg"),
        AttrDef("ksize", "list(int)", description="the pooling window, NHWC"),
        AttrDef("strides", "list(int)", description="the pooling strides, NHWC"),
        AttrDef("padding", "string", description="the pooling padding, SAME or VALID"),
        AttrDef("T", "type"),
    ),
    reference=roi_align_reference,
    description="Region-of-interest align: per-image bilinear crops of the boxes, pooled",
)


def _box_index_defs() -> dict[str, Any]:
    return {
        "crops": op("CropAndResize", "$features", op("Reshape", "$boxes", const([-1, 4])), "$box_ind",
                    const(label="crop_size"), label="crop"),
        "box_ind": op("Reshape", op("Mul", const(label="ones"), op("ExpandDims", "$images", const(1))), const([-1])),
        "images": op("Range", const(0), const(label="images"), const(1)),
    }


def _check_box_indices(sg: "ScopeGraph", m: PatternMatcher) -> tuple[int, int]:
    """The box indices are those of native_crop_and_resize for boxes [B, K, 4]; returns (B, K)."""
    shape = sg.static_shape(m.tensors["boxes"])
    if shape is None or len(shape) != 3 or shape[2] != 4:
        fail(f"the boxes are not [B, K, 4] (shape {shape})")
    b, k = shape[0], shape[1]
    if b is None or k is None:
        fail("the box indices are computed at run time (unknown batch or box count); ROIAlign takes "
             "them from a known box shape")
    ones, images = np.asarray(m.consts["ones"]), np.asarray(m.consts["images"])
    if ones.shape != (b, k) or not np.all(ones == 1):
        fail(f"the box indices are not built from ones([{b}, {k}])")
    if images.size != 1 or int(images.reshape(-1)[0]) != b:
        fail(f"the box indices are not built from range({b}): box k of image b does not crop image b")
    return b, k


def _shape_feeders(sg: "ScopeGraph", inside: frozenset[int], reshape: str) -> set[int]:
    """The nodes of the scope that compute a reshape's target shape (and feed nothing else)."""
    index = sg.index
    start = index.data_input(index.index[reshape], 1)[0]
    found: set[int] = set()
    todo = [start]
    while todo:
        i = todo.pop()
        if i in found or i not in inside:
            continue
        found.add(i)
        todo.extend(t[0] for t in index.inputs[i] if t[1] >= 0)
    return found


def _single_reader(sg: "ScopeGraph", name: str) -> str | None:
    readers = set(sg.consumer_names(name))
    return readers.pop() if len(readers) == 1 else None


def _follow_to_pool(sg: "ScopeGraph", crop: str, crop_shape: Sequence[int | None]) -> tuple[list[str], str]:
    """The reshapes from the crops to the pooling, and the pooling node."""
    chain: list[str] = []
    at = crop
    while True:
        reader = _single_reader(sg, at)
        if reader is None:
            fail(f"{at} is read by {len(sg.consumer_names(at))} nodes, not by one reshape or pooling", at)
        kind = sg.op_of(reader)
        if kind in POOLS:
            break
        if kind != "Reshape" or sg.producer(reader, 0) != (at, 0):
            fail(f"the crops go to {reader} ({kind}), not to a pooling", reader)
        chain.append(reader)
        at = reader
    if sg.producer(reader, 0) != (at, 0):
        fail("the pooling does not read the crops", reader)
    for reshape in chain:
        shape = sg.static_shape((sg.index.index[reshape], 0))
        if shape is None or None in shape:
            fail(f"the shape of {reshape} is not known: it may reorder more than the boxes' dimensions", reshape)
    shape = sg.static_shape((sg.index.index[at], 0)) if chain else list(crop_shape)
    if shape is None or len(shape) != 4 or list(shape[1:]) != list(crop_shape[1:]):
        fail(f"the pooling reads {at} of shape {shape}, not the crops [B * K, h, w, C] "
             f"{list(crop_shape)}", at)
    return chain, reader


class ScopeROIAlignPass(ScopeBasePass):
    """OD API native_crop_and_resize + pooling (Faster R-CNN second-stage input) -> ROIAlign."""

    name = "ScopeROIAlignPass"
    general = False
    description = "OD API CropAndResize scopes (or roi_align scopes) and the pooling after them -> ROIAlign"

    def define_patterns(self) -> list[PatternSet]:
        def pattern(suffix: str) -> ScopePattern:
            return (ScopePattern("ROIAlign").add_scope_feature(suffix=suffix)
                    .add_node_op_type_feature("CropAndResize", 1))

        return [[[pattern("CropAndResize"), pattern("roi_align")]]]

    def last_match_scopes_and_ops(self, scope_graph: "ScopeGraph") -> list[ScopesResult]:
        """One result per matched scope, with the reshapes and the pooling that follow it."""
        results = []
        self._extra: dict[int, Any] = {}
        for scope in self.matched_scopes(scope_graph):
            try:
                found = self._analyse(scope)
            except Refused as why:  # refused in generate_fusion_result, with its reason
                self._extra[id(scope)] = why
                results.append(ScopesResult([scope]))
                continue
            self._extra[id(scope)] = found
            inside = frozenset(scope.node_names())
            results.append(ScopesResult([scope], [n for n in (*found[1], found[2]) if n not in inside]))
        return results

    def may_fuse(self, op_types: Any) -> bool:
        return self.patterns_may_match(op_types)

    def _analyse(self, scope: "Scope") -> tuple[PatternMatcher, list[str], str]:
        sg = scope.graph
        inside = frozenset(scope.all_node_indices())
        crop = scope.nodes_by_op("CropAndResize")[0].name
        m = PatternMatcher(sg, inside=inside, defs=_box_index_defs())
        try:
            m.match((sg.index.index[crop], 0), "$crops")
        except MatchFailure as why:
            fail(f"not native_crop_and_resize's crop of [B, K, 4] boxes: {why}")
        b, k = _check_box_indices(sg, m)
        size = [int(v) for v in np.asarray(m.consts["crop_size"]).reshape(-1)]
        features = sg.static_shape(m.tensors["features"])
        channels = features[3] if features is not None and len(features) == 4 else None
        chain, pool = _follow_to_pool(sg, crop, [b * k, *size, channels])
        return m, chain, pool

    def generate_fusion_result(self, scopes: Sequence["Scope"], result: FusionScopesResult) -> None:
        scope = scopes[0]
        found = self._extra.get(id(scope))
        if isinstance(found, BaseException):
            raise found
        if found is None:  # pragma: no cover - only results of last_match_scopes_and_ops arrive
            fail("not a candidate of this pass")
        m, chain, pool = found
        sg = scope.graph
        inside = frozenset(scope.all_node_indices())
        members = set(m.members)
        for reshape in chain:
            if sg.index.index[reshape] in inside:
                members |= {sg.index.index[reshape]} | _shape_feeders(sg, inside, reshape)
        extra = unmatched_nodes(scope, members | ({sg.index.index[pool]} & inside))
        if extra:
            fail(f"the scope computes more than the ROI align: {', '.join(extra[:3])}", *extra[:3])
        crop_attrs = {k: attr_value_to_python(v) for k, v in sg.node(sg.index.names[m.nodes["crop"]]).attr.items()}
        pool_attrs = {k: attr_value_to_python(v) for k, v in sg.node(pool).attr.items()}
        if pool_attrs.get("data_format", "NHWC") != "NHWC":
            fail(f"the pooling is {pool_attrs['data_format']}; ROIAlign pools the crops as they are (NHWC)", pool)
        size = [int(v) for v in np.asarray(m.consts["crop_size"]).reshape(-1)]
        pooling = POOLS[sg.op_of(pool)]
        result.set_type(ROI_ALIGN.name)
        result.set_description(f"ROIAlign {size} crops, {pooling} pooled {pool_attrs['ksize'][1:3]}")
        result.set_attr("crop_size", size)
        result.set_attr("method", crop_attrs.get("method", "bilinear"))
        result.set_attr("extrapolation_value", float(crop_attrs.get("extrapolation_value", 0.0)))
        result.set_attr("pooling", pooling)
        result.set_attr("ksize", list(pool_attrs["ksize"]))
        result.set_attr("strides", list(pool_attrs["strides"]))
        result.set_attr("padding", pool_attrs["padding"])
        result.set_attr("T", sg.node(sg.index.names[m.nodes["crop"]]).attr["T"].type)
        for reader, slots in input_slots(sg, inside, [m.tensors["features"], m.tensors["boxes"]]).items():
            result.insert_inputs(scope.suffix_of(reader), slots)
        result.insert_outputs(pool if sg.index.index[pool] not in inside else scope.suffix_of(pool), [0])
