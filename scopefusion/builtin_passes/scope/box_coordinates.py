"""ScopeNormalizeBBoxPass and ScopeToAbsoluteBBoxPass: ``box_list_ops`` coordinate conversions.

``to_normalized_coordinates(boxlist, height, width, check_range=False)`` (TF Object Detection API,
``core/box_list_ops.py``; the Faster R-CNN first stage normalizes its proposals with it) opens a
``ToNormalizedCoordinates`` name scope::

    ToNormalizedCoordinates/{Cast, Cast_1}          height, width cast to float32
    ToNormalizedCoordinates/{truediv, truediv_1}    1 / height, 1 / width
    ToNormalizedCoordinates/Scale/split             y_min, x_min, y_max, x_max = split(boxes, 4, 1)
    ToNormalizedCoordinates/Scale/mul .. mul_3      y * (1 / height), x * (1 / width)
    ToNormalizedCoordinates/Scale/concat            concat([y_min, x_min, y_max, x_max], 1)

``to_absolute_coordinates(boxlist, height, width, check_range=False)`` opens
``ToAbsoluteCoordinates`` and multiplies by the cast height and width themselves.  The fused ops
compute exactly that: ``NormalizeBBox`` multiplies by the reciprocals (not a division: the graph
rounds ``1 / height`` first), ``ToAbsoluteBBox`` by the sizes.

Each checks the whole scope node by node.  ``check_range=True`` (the default of both functions)
adds an assertion on the largest coordinate (a ``tf.Assert``, for the absolute conversion inside a
``cond``); the fused ops check no ranges, so such a scope is refused with the reason.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.fusion.refusal import fail
from ...core.graph.matching import MatchFailure, PatternMatcher
from ...core.graph.pattern import const, one_of, op
from ...core.scope.base_pass import ScopeBasePass
from ...core.scope.patterns import PatternSet, ScopePattern
from ...core.scope.port_maps import input_slots, unmatched_nodes
from ...core.scope.results import FusionScopesResult

if TYPE_CHECKING:  # pragma: no cover
    from ...core.scope.scope_graph import Scope


def _sizes(height: Any, width: Any) -> tuple[Any, Any]:
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    return tf.cast(height, tf.float32), tf.cast(width, tf.float32)


def _scaled(boxes: Any, y_scale: Any, x_scale: Any) -> Any:
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    y_min, x_min, y_max, x_max = tf.split(boxes, 4, axis=1)
    return tf.concat([y_scale * y_min, x_scale * x_min, y_scale * y_max, x_scale * x_max], 1)


def normalize_bbox_reference(boxes: Any, height: Any, width: Any, *, Tsize: Any) -> tuple[Any]:
    """Absolute boxes [N, 4] ([ymin, xmin, ymax, xmax]) divided by the image size, as the OD API
    does it: multiplied by ``1 / height`` and ``1 / width`` (float32)."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    # Its own name scope: inlined, its nodes are named "<fused node>/<node>".
    with tf.name_scope("normalize_bbox_reference"):
        h, w = _sizes(height, width)
        return (_scaled(boxes, 1.0 / h, 1.0 / w),)


def to_absolute_bbox_reference(boxes: Any, height: Any, width: Any, *, Tsize: Any) -> tuple[Any]:
    """Normalized boxes [N, 4] ([ymin, xmin, ymax, xmax]) multiplied by the image size (float32)."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    with tf.name_scope("to_absolute_bbox_reference"):
        h, w = _sizes(height, width)
        return (_scaled(boxes, h, w),)


def _def(name: str, reference: Any, what: str, description: str) -> FusedOpDef:
    return FusedOpDef(
        name=name,
        inputs=(
            TensorArg("boxes", dtype="float32", description=f"[N, 4] {what} boxes ymin, xmin, ymax, xmax"),
            TensorArg("height", type_attr="Tsize", description="scalar image height"),
            TensorArg("width", type_attr="Tsize", description="scalar image width"),
        ),
        outputs=(TensorArg("converted", dtype="float32", description="[N, 4] converted boxes"),),
        attrs=(AttrDef("Tsize", "type", description="the type of height and width (cast to float32)"),),
        reference=reference,
        description=description,
    )


NORMALIZE_BBOX = _def("NormalizeBBox", normalize_bbox_reference, "absolute",
                      "Box corners in pixels -> normalized to [0, 1] by the image height and width")
TO_ABSOLUTE_BBOX = _def("ToAbsoluteBBox", to_absolute_bbox_reference, "normalized",
                        "Normalized box corners -> pixels by the image height and width")


def _coordinate_defs(reciprocal: bool) -> dict[str, Any]:
    def part(k: int) -> Any:
        return op("Split", const(1), "$boxes", port=k, num_split=4)

    def size(var: str) -> Any:
        # DstT 1: float32; no Cast when the size is float32 already
        cast = one_of(op("Cast", var, DstT=1, label=f"cast_{var[1:]}"), var)
        return op("RealDiv", const(1.0), cast) if reciprocal else cast

    return {
        "converted": op("ConcatV2", "$y0", "$x0", "$y1", "$x1", const(1), N=4),
        "y0": op("Mul", "$y_scale", part(0)),
        "x0": op("Mul", "$x_scale", part(1)),
        "y1": op("Mul", "$y_scale", part(2)),
        "x1": op("Mul", "$x_scale", part(3)),
        "y_scale": size("$height"),
        "x_scale": size("$width"),
    }


class _CoordinatesPass(ScopeBasePass):
    general = False
    scope_name = ""
    fused: FusedOpDef
    reciprocal = False

    def define_patterns(self) -> list[PatternSet]:
        pattern = (
            ScopePattern(self.fused.name)
            .add_scope_feature(suffix=self.scope_name, sub_scope_mask="Scale")
            .add_node_op_type_feature("Split", 1)
            .add_node_op_type_feature("Mul", 4)
            .add_node_op_type_feature("ConcatV2", 1)
        )
        return [[[pattern]]]

    def generate_fusion_result(self, scopes: Sequence["Scope"], result: FusionScopesResult) -> None:
        scope = scopes[0]
        sg = scope.graph
        asserts = scope.nodes_by_op("Assert")
        if asserts:
            fail(f"the scope asserts the range of the boxes (check_range=True); {self.fused.name} "
                 "checks no ranges", asserts[0].name)
        inside = frozenset(scope.all_node_indices())
        concat = scope.nodes_by_op("ConcatV2")[0].name
        m = PatternMatcher(sg, inside=inside, defs=_coordinate_defs(self.reciprocal))
        try:
            m.match((sg.index.index[concat], 0), "$converted")
        except MatchFailure as why:
            fail(f"not box_list_ops' {self.scope_name}: {why}")
        extra = unmatched_nodes(scope, m.members)
        if extra:
            fail(f"the scope computes more than the conversion: {', '.join(extra[:3])}", *extra[:3])
        sizes = [m.tensors["height"], m.tensors["width"]]
        for node, port in sizes:
            shape = sg.static_shape((node, port))
            if shape is not None and shape != []:
                fail(f"the image size {sg.index.names[node]} is not a scalar", sg.index.names[node])
        # the sizes' type: what the casts to float32 read (float32 where nothing is cast)
        dtypes = {sg.index.nodes[m.nodes[c]].attr["SrcT"].type if c in m.nodes else 1
                  for c in ("cast_height", "cast_width")}
        if len(dtypes) != 1:
            fail("height and width are of different types", *(sg.index.names[t[0]] for t in sizes))
        result.set_type(self.fused.name)
        result.set_description(f"{self.fused.name} of box_list_ops' {self.scope_name}")
        result.set_attr("Tsize", dtypes.pop())
        for reader, slots in input_slots(sg, inside, [m.tensors["boxes"], *sizes]).items():
            result.insert_inputs(scope.suffix_of(reader), slots)
        result.insert_outputs(scope.suffix_of(concat), [0])


class ScopeNormalizeBBoxPass(_CoordinatesPass):
    """box_list_ops.to_normalized_coordinates scopes (TF Object Detection API) -> NormalizeBBox."""

    name = "ScopeNormalizeBBoxPass"
    description = "OD API box_list_ops.to_normalized_coordinates scopes -> NormalizeBBox(boxes, height, width)"
    scope_name = "ToNormalizedCoordinates"
    fused = NORMALIZE_BBOX
    reciprocal = True


class ScopeToAbsoluteBBoxPass(_CoordinatesPass):
    """box_list_ops.to_absolute_coordinates scopes (TF Object Detection API) -> ToAbsoluteBBox."""

    name = "ScopeToAbsoluteBBoxPass"
    description = "OD API box_list_ops.to_absolute_coordinates scopes -> ToAbsoluteBBox(boxes, height, width)"
    scope_name = "ToAbsoluteCoordinates"
    fused = TO_ABSOLUTE_BBOX
