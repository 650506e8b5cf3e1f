"""ScopeClipBoxesPass: ``box_list_ops.clip_to_window`` scopes -> ``ClipBoxes``.

``clip_to_window(boxlist, window, filter_nonoverlapping)`` (TF Object Detection API,
``core/box_list_ops.py``) opens a ``ClipToWindow`` name scope::

    ClipToWindow/split                      y_min, x_min, y_max, x_max = split(boxes, 4, axis=1)
    ClipToWindow/unstack                    win_y_min, win_x_min, win_y_max, win_x_max = unstack(window)
    ClipToWindow/Minimum*, Maximum*         y_min' = max(min(y_min, win_y_max), win_y_min), ...
    ClipToWindow/concat                     clipped = concat([y_min', x_min', y_max', x_max'], 1)

and, with ``filter_nonoverlapping=True`` (the default), drops the boxes left with no area::

    ClipToWindow/Area/{split, sub, sub_1, mul, Squeeze}, Greater, Where, Reshape, Cast
    ClipToWindow/Gather/GatherV2*           clipped = gather(clipped, indices)

The window is a fused-op *input*, not an attribute: in detection graphs it is computed at run time
(from the true image shape, or per image inside batched NMS).  A window written as a constant stays
in the graph as a ``Const`` feeding that input.  ``filter_nonoverlapping`` is read from the graph
(the presence of the area filter) into an attribute.  A filtering clip of a box list that carries
extra fields (scores, classes, ...) gathers those fields too; ``ClipBoxes`` outputs only boxes, so
such a scope is refused with the reason.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ...core.scope.base_pass import ScopeBasePass
from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.fusion.refusal import fail
from ...core.scope.patterns import PatternSet, ScopePattern
from ...core.scope.results import FusionScopesResult
from ...core.graph.matching import MatchFailure, PatternMatcher
from ...core.graph.pattern import const, op
from ...core.scope.port_maps import input_slots, unmatched_nodes

if TYPE_CHECKING:  # pragma: no cover
    from ...core.scope.scope_graph import Scope


def clip_boxes_reference(boxes: Any, window: Any, *, filter_nonoverlapping: bool, T: Any) -> tuple[Any]:
    """Clip boxes [N, 4] ([ymin, xmin, ymax, xmax]) to ``window`` [4]; with
    ``filter_nonoverlapping`` keep only the clipped boxes of positive area."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    # Its own name scope: when TensorFlow inlines the function, its nodes are named
    # "<fused node>/<node>", which must not collide with nodes kept under the fused scope
    # (a constant window written inside ClipToWindow stays there).
    with tf.name_scope("clip_boxes_reference"):
        lo = tf.stack([window[0], window[1], window[0], window[1]])
        hi = tf.stack([window[2], window[3], window[2], window[3]])
        clipped = tf.maximum(tf.minimum(boxes, hi), lo)
        if filter_nonoverlapping:
            area = (clipped[:, 2] - clipped[:, 0]) * (clipped[:, 3] - clipped[:, 1])
            keep = tf.cast(tf.reshape(tf.where(area > tf.zeros([], area.dtype)), [-1]), tf.int32)
            clipped = tf.gather(clipped, keep)
        return (clipped,)


CLIP_BOXES = FusedOpDef(
    name="ClipBoxes",
    inputs=(
        TensorArg("boxes", type_attr="T", description="[N, 4] boxes ymin, xmin, ymax, xmax"),
        TensorArg("window", type_attr="T", description="[4] window ymin, xmin, ymax, xmax"),
    ),
    outputs=(TensorArg("clipped", type_attr="T",
                       description="[M, 4]; M = N unless filter_nonoverlapping drops boxes"),),
    attrs=(
        AttrDef("filter_nonoverlapping", "bool", description="drop boxes of zero area after clipping"),
        AttrDef("T", "type"),
    ),
    reference=clip_boxes_reference,
    description="Clip box corners to a window, optionally dropping boxes that do not overlap it",
)


def _clip_defs() -> dict[str, Any]:
    def part(var: str, k: int) -> Any:
        return op("Split", const(1), var, port=k, num_split=4)

    def window(k: int) -> Any:
        return op("Unpack", "$window", port=k, num=4, axis=0)

    def clip(k: int) -> Any:  # coordinate k of [ymin, xmin, ymax, xmax]; y is 0, x is 1
        axis = k % 2
        return op("Maximum", op("Minimum", part("$boxes", k), window(2 + axis)), window(axis))

    return {
        "clipped": op("ConcatV2", clip(0), clip(1), clip(2), clip(3), const(1), N=4),
        "area": op("Squeeze", op("Mul", op("Sub", part("$clipped", 2), part("$clipped", 0)),
                                  op("Sub", part("$clipped", 3), part("$clipped", 1))), squeeze_dims=[1]),
        "keep": op("Cast", op("Reshape", op("Where", op("Greater", "$area", const(0.0))), const([-1]))),
    }


class ScopeClipBoxesPass(ScopeBasePass):
    """box_list_ops.clip_to_window scopes (TF Object Detection API) -> ClipBoxes."""

    name = "ScopeClipBoxesPass"
    general = False
    description = "OD API box_list_ops.clip_to_window scopes -> ClipBoxes(boxes, window)"

    def define_patterns(self) -> list[PatternSet]:
        pattern = (
            ScopePattern("ClipBoxes")
            .add_scope_feature(suffix="ClipToWindow")
            .add_node_op_type_feature("Minimum", 4)
            .add_node_op_type_feature("Maximum", 4)
            .add_node_op_type_feature("Unpack", 1)
            .add_node_op_type_feature("ConcatV2", 1)
        )
        return [[[pattern]]]

    def generate_fusion_result(self, scopes: Sequence["Scope"], result: FusionScopesResult) -> None:
        scope = scopes[0]
        sg = scope.graph
        inside = frozenset(scope.all_node_indices())
        at = sg.index.index
        concat = scope.nodes_by_op("ConcatV2")[0].name
        m = PatternMatcher(sg, inside=inside, defs=_clip_defs())
        try:
            m.match((at[concat], 0), "$clipped")
        except MatchFailure as why:
            fail(f"not a clip to a window: {why}")
        outputs = [concat]
        gathers = scope.nodes_by_op("GatherV2")
        filtering = bool(gathers) or scope.count("Where") > 0
        if filtering:
            fields = []
            outputs = []
            for g in gathers:
                if sg.producer(g.name, 0) != (concat, 0):
                    fields.append(g.name)
                    continue
                try:
                    m.match(sg.index.data_input(at[g.name], 1), "$keep")
                    m.match(sg.index.data_input(at[g.name], 2), const(0))
                except MatchFailure as why:
                    fail(f"the non-overlapping filter is not gather(clipped, where(area > 0)): {why}")
                m.members.add(at[g.name])
                outputs.append(g.name)
            if fields:
                fail(
                    f"filter_nonoverlapping also gathers {len(fields)} extra box-list field(s) "
                    f"({scope.suffix_of(fields[0])}, ...); ClipBoxes outputs only the boxes", *fields)
            if not outputs:
                fail("the non-overlapping filter gathers no clipped boxes")
        extra = unmatched_nodes(scope, m.members)
        if extra:
            fail(f"the scope computes more than the clip: {', '.join(extra[:3])}", *extra[:3])
        result.set_type(CLIP_BOXES.name)
        result.set_description("ClipBoxes" + (" dropping boxes of zero area" if filtering else ""))
        result.set_attr("filter_nonoverlapping", filtering)
        result.set_attr("T", sg.node(concat).attr["T"].type)
        for reader, slots in input_slots(sg, inside, [m.tensors["boxes"], m.tensors["window"]]).items():
            result.insert_inputs(scope.suffix_of(reader), slots)
        for out in outputs:
            result.insert_outputs(scope.suffix_of(out), [0])
