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
whether they lie inside the scope or follow it (and what computes their shapes).  The box indices
must be the ones ``native_crop_and_resize`` computes (box k of image b crops image b): constants
for a known box shape, computed from ``tf.shape(boxes)`` for an unknown batch.

Refused with the reason: a crop that no pooling reads (a crop and resize, not an ROI align), a
pooling that does not read [N, h, w, C] crops, an NCHW pooling, other box indices, a reshape's shape
computation that something else reads too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.fusion.refusal import Refused, fail
from ...core.graph.attrs import attr_value_to_python
from ...core.graph.matching import MatchFailure, PatternMatcher
from ...core.graph.pattern import const, one_of, op
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
    def boxes_dims(end: int, shrink: int) -> Any:  # tf.shape(boxes)[:end] or [0]
        return op("StridedSlice", op("Shape", "$boxes"), const([0]), const([end]), const([1]), end_mask=0,
                  shrink_axis_mask=shrink, ellipsis_mask=0, new_axis_mask=0)

    return {
        "crops": op("CropAndResize", "$features", op("Reshape", "$boxes", const([-1, 4])), "$box_ind",
                    const(label="crop_size"), label="crop"),
        "box_ind": op("Reshape", op("Mul", "$ones", op("ExpandDims", "$images", const(1))), const([-1])),
        # ones(shape[:2]) and range(shape[0]): constants when the box shape is known, else computed
        "ones": one_of(const(label="ones"), op("Fill", boxes_dims(2, 0), const(1))),
        "images": op("Range", const(0), one_of(const(label="images"), boxes_dims(1, 1)), const(1)),
    }


def _check_box_indices(sg: "ScopeGraph", m: PatternMatcher) -> None:
    """The box indices are those of native_crop_and_resize for boxes [B, K, 4]: box k of image b crops
    image b (checked on the constants when the shape is known; computed from it otherwise)."""
    shape = sg.static_shape(m.tensors["boxes"])
    if shape is None or len(shape) != 3 or shape[2] != 4:
        fail(f"the boxes are not [B, K, 4] (shape {shape})")
    b, k = shape[0], shape[1]
    if "ones" in m.consts:
        ones = np.asarray(m.consts["ones"])
        if b is None or k is None or ones.shape != (b, k) or not np.all(ones == 1):
            fail(f"the box indices are not built from ones([{b}, {k}])")
    if "images" in m.consts:
        images = np.asarray(m.consts["images"])
        if b is None or images.size != 1 or int(images.reshape(-1)[0]) != b:
            fail(f"the box indices are not built from range({b}): box k of image b does not crop image b")


def _data_readers(sg: "ScopeGraph", name: str) -> tuple[list[str], list[str]]:
    """The nodes reading ``name``'s values, and those reading only its shape."""
    readers = sorted(set(sg.consumer_names(name)))
    shapes = [r for r in readers if sg.op_of(r) == "Shape"]
    return [r for r in readers if r not in shapes], shapes


def _shape_feeders(sg: "ScopeGraph", inside: frozenset[int], reshape: str, taken: set[int]) -> set[int]:
    """The nodes that compute a reshape's target shape: in the scope, every one; outside it, those
    that feed nothing else (their constants stay).  ``Shape`` reads end the walk."""
    index = sg.index
    found: set[int] = set()
    todo = [index.data_input(index.index[reshape], 1)[0]]
    while todo:
        i = todo.pop()
        if i in found or i in taken or (i not in inside and sg.const_value_of(i) is not None):
            continue
        found.add(i)
        if index.ops[i] != "Shape":
            todo.extend(t[0] for t in index.inputs[i] if t[1] >= 0)
    allowed = found | taken | {index.index[reshape]}
    for i in found - inside:
        others = [c for c, _, _ in index.consumers[i] if c not in allowed]
        if others:
            fail(f"{index.names[i]}, which shapes {reshape}, is read by {index.names[others[0]]} too", index.names[i])
    return found


def _follow_to_pool(sg: "ScopeGraph", crop: str, crop_shape: Sequence[int | None]) -> tuple[list[str], str]:
    """The reshapes from the crops to the pooling, and the pooling node.  Reshapes keep the order of
    the values, so the pooling reads the crops themselves when its input is [N, h, w, C]."""
    chain: list[str] = []
    at = crop
    while True:
        readers, _ = _data_readers(sg, at)
        if len(readers) != 1:
            fail(f"{at} is read by {len(readers)} nodes, not by one reshape or pooling", at)
        reader = readers[0]
        kind = sg.op_of(reader)
        if kind in POOLS:
            break
        if kind != "Reshape" or sg.producer(reader, 0) != (at, 0):
            fail(f"the crops go to {reader} ({kind}), not to a pooling", reader)
        chain.append(reader)
        at = reader
    if sg.producer(reader, 0) != (at, 0):
        fail("the pooling does not read the crops", reader)
    shape = sg.static_shape((sg.index.index[at], 0)) if chain else list(crop_shape)
    if shape is None or len(shape) != 4 or list(shape[1:]) != list(crop_shape[1:]):
        fail(f"the pooling reads {at} of shape {shape}, not the crops [N, h, w, C] {list(crop_shape)}", at)
    return chain, reader


def _members(sg: "ScopeGraph", scope: "Scope", m: PatternMatcher, chain: list[str], pool: str) -> set[int]:
    """Every node of the ROI align: the crop's, the reshapes' with what shapes them, the pooling."""
    index = sg.index
    inside = frozenset(scope.all_node_indices())
    taken = set(m.members) | {index.index[n] for n in (*chain, pool)}
    for reshape in chain:
        taken |= _shape_feeders(sg, inside, reshape, taken)
    for node in (sg.index.names[m.nodes["crop"]], *chain):
        for reader in _data_readers(sg, node)[1]:
            if index.index[reader] not in taken:
                fail(f"the shape of {node} is read by {reader}, which the ROI align does not compute", reader)
    return taken


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
            inside = frozenset(scope.all_node_indices())
            names = scope.graph.index.names
            results.append(ScopesResult([scope], sorted(names[i] for i in found[1] if i not in inside)))
        return results

    def may_fuse(self, op_types: Any) -> bool:
        return self.patterns_may_match(op_types)

    def _analyse(self, scope: "Scope") -> tuple[PatternMatcher, set[int], str]:
        sg = scope.graph
        inside = frozenset(scope.all_node_indices())
        crop = scope.nodes_by_op("CropAndResize")[0].name
        m = PatternMatcher(sg, inside=inside, defs=_box_index_defs())
        try:
            m.match((sg.index.index[crop], 0), "$crops")
        except MatchFailure as why:
            fail(f"not native_crop_and_resize's crop of [B, K, 4] boxes: {why}")
        _check_box_indices(sg, m)
        size = [int(v) for v in np.asarray(m.consts["crop_size"]).reshape(-1)]
        features = sg.static_shape(m.tensors["features"])
        channels = features[3] if features is not None and len(features) == 4 else None
        if channels is None:
            fail("the features' channel count is not known")
        chain, pool = _follow_to_pool(sg, crop, [None, *size, channels])
        return m, _members(sg, scope, m, chain, pool), pool

    def generate_fusion_result(self, scopes: Sequence["Scope"], result: FusionScopesResult) -> None:
        scope = scopes[0]
        found = self._extra.get(id(scope))
        if isinstance(found, BaseException):
            raise found
        if found is None:  # pragma: no cover - only results of last_match_scopes_and_ops arrive
            fail("not a candidate of this pass")
        m, members, pool = found
        sg = scope.graph
        inside = frozenset(scope.all_node_indices())
        extra = unmatched_nodes(scope, members)
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
        def key(name: str) -> str:  # nodes after the scope by their full names
            return scope.suffix_of(name) if sg.index.index[name] in inside else name

        readers = input_slots(sg, frozenset(members) | inside, [m.tensors["features"], m.tensors["boxes"]])
        for reader, slots in readers.items():
            result.insert_inputs(key(reader), slots)
        result.insert_outputs(key(pool), [0])
