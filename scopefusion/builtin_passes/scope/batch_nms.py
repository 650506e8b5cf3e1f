"""ScopeBatchMultiClassNMSPass: ``post_processing.batch_multiclass_non_max_suppression`` scopes ->
``BatchMultiClassNonMaxSuppression``.

``batch_multiclass_non_max_suppression`` (TF Object Detection API, ``core/post_processing.py``)
opens a ``BatchMultiClassNonMaxSuppression`` name scope and runs ``multiclass_non_max_suppression``
on every image of the batch through ``shape_utils.static_or_dynamic_map_fn``:

* static batch size: ``unstack`` the inputs, one ``MultiClassNonMaxSuppression[_i]`` and one
  ``PadOrClipBoxList[_i]`` scope per image, ``stack`` the results (an acyclic graph);
* dynamic batch size: ``tf.map_fn``, i.e. ``map/TensorArray*`` and a ``map/while`` loop
  (Enter/Merge/Switch/Exit/NextIteration in TF1 graphs) whose body holds those scopes.

Per image and class, ``NonMaxSuppressionV3`` selects at most ``max_size_per_class`` boxes (score
above ``score_threshold``, IoU at most ``iou_threshold``); the selections are concatenated class by
class (padded with index 0 and score -1), sorted by score (``TopKV2``), clipped to the clip window
(``ClipToWindow``, dropping boxes left with no area), re-scored (-1 for zero area) and re-sorted,
cut to ``max_total_size`` and padded with zeros to ``max_total_size``.  With
``use_static_shapes=True`` the per-class NMS is ``tf.image.non_max_suppression_padded`` (a
``PartitionedCall`` of its function in TF 2 graphs), no box is dropped and nothing is padded
afterwards; the pass reads that into the ``use_static_shapes`` attribute.

The fused op takes ``boxes`` [B, N, q, 4], ``scores`` [B, N, C] and the clip window, [B, 4] (one
per image) or [4] (one for the batch, which the OD API tiles inside the scope).  When the caller gave
no clip window the OD API derives one [4] window from the extent of all boxes inside the scope; that
derivation (it reads only ``boxes``) is then kept in the graph and feeds the fused op's
``clip_window`` input, so the fused op always has the same three inputs.

The pass finds the inputs by following the data back from the ``NonMaxSuppressionV3`` and
``ClipToWindow`` nodes to the batch split (``unstack`` or ``TensorArrayScatterV3``), tells the outputs
apart by what they are computed from, and reads every attribute from the graph.  It refuses, with
the reason, the variants the fused op does not represent: ``num_valid_boxes``, ``masks`` or
``additional_fields`` given (more inputs or outputs), ``NonMaxSuppressionV4``/``V5`` nodes (the
padded NMS of TF 1 graphs, soft NMS: a ``V5`` whose ``soft_nms_sigma`` is the constant 0 and that
does not pad is hard NMS, ``tf.image.non_max_suppression_with_scores`` as the TF2-era OD API calls
it, and is read like ``NonMaxSuppressionV3``), a dynamic batch built with TF2 control flow (a ``While`` op
whose body function holds the NMS), per-class NMS nodes that disagree on thresholds, and anything
it cannot trace.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ...core.fusion.refusal import fail
from ...core.graph.vocabulary import dtype_name
from ...core.scope.base_pass import ScopeBasePass
from ...core.scope.patterns import PatternSet, ScopePattern
from ...core.scope.results import FusionScopesResult
from .batch_nms_op import BATCH_MULTICLASS_NMS, PADDED_NMS_DEFAULTS, PADDED_NMS_FUNCTION
from ...core.scope.port_maps import input_slots

if TYPE_CHECKING:  # pragma: no cover
    from ...core.scope.scope_graph import Scope, ScopeGraph

Tensor = tuple[str, int]

SCOPE = "BatchMultiClassNonMaxSuppression"
PADDED_NMS_OPS = ("NonMaxSuppressionV4", "NonMaxSuppressionV5")
V2_LOOP_OPS = ("While", "StatelessWhile")


# --------------------------------------------------------------------- analysis
FORWARD_OPS = frozenset({"Identity", "Enter", "Reshape", "Slice", "Squeeze", "ExpandDims"})
OUTPUT_FORWARD_OPS = frozenset({"Identity", "Enter", "Exit", "Reshape", "Slice", "Pad", "GatherV2"})


def _tname(tensor: Tensor) -> str:
    return tensor[0] if tensor[1] == 0 else f"{tensor[0]}:{tensor[1]}"


class _Analysis:
    def __init__(self, scope: "Scope") -> None:
        self.scope = scope
        self.sg: "ScopeGraph" = scope.graph
        self.inside = frozenset(scope.node_names())
        self.direct = frozenset(scope.node_names(direct=True))

    # -- tracing -----------------------------------------------------------------
    def _through_enter(self, tensor: Tensor) -> Tensor:
        while tensor[0] in self.inside and self.sg.op_of(tensor[0]) in ("Enter", "Identity"):
            tensor = self.sg.producer(tensor[0], 0)
        return tensor

    def batch_source(self, tensor: Tensor) -> Tensor:
        """Follow a per-image tensor back to the batched tensor it was split from (the input of the
        static ``unstack`` or of the ``TensorArrayScatterV3`` of ``tf.map_fn``)."""
        sg = self.sg
        for _ in range(64):
            name = tensor[0]
            if name not in self.inside:
                fail(f"{_tname(tensor)} comes from outside the scope without a batch split")
            op = sg.op_of(name)
            if op == "Unpack" and name in self.direct:
                return sg.producer(name, 0)
            if op == "TensorArrayReadV3":
                scatter = self._through_enter(sg.producer(name, 2))[0]
                if scatter not in self.inside or sg.op_of(scatter) != "TensorArrayScatterV3":
                    fail(f"{name!r} does not read a scattered batch")
                return sg.producer(scatter, 2)
            if op in FORWARD_OPS or op == "Unpack":
                tensor = sg.producer(name, 0)
                continue
            if op in ("Select", "SelectV2") and sg.op_of(sg.producer(name, 0)[0]) == "Less":
                tensor = sg.producer(name, 1)  # where(i < num_valid_boxes, scores, float32 min)
                continue
            fail(f"{_tname(tensor)} ({op}) is computed inside the scope, not split from a batch")
        fail(f"cannot trace {_tname(tensor)} to a batch split")

    def output_source(self, tensor: Tensor) -> tuple[str, str]:
        """Follow a batched output back to where its per-image values are computed."""
        sg = self.sg
        for _ in range(64):
            name = tensor[0]
            op = sg.op_of(name)
            if op == "Pack" and name in self.direct:
                tensor = sg.producer(name, 0)
            elif op == "TensorArrayGatherV3":
                array = self._through_enter(sg.producer(name, 0))[0]
                writes = [n.name for n in self.scope.nodes_by_op("TensorArrayWriteV3")
                          if self._through_enter(sg.producer(n.name, 0))[0] == array]
                if len(writes) != 1:
                    fail(f"{name!r}: expected one TensorArrayWriteV3 to {array!r}, found {len(writes)}")
                tensor = sg.producer(writes[0], 2)
            elif op in OUTPUT_FORWARD_OPS:
                tensor = sg.producer(name, 0)
            else:
                return name, op
            if tensor[0] not in self.inside:
                fail(f"an output is read straight from outside ({_tname(tensor)})")
        fail(f"cannot trace output {_tname(tensor)}")

    def const_scalar(self, tensor: Tensor, what: str) -> float:
        value = self.sg.const_value(tensor[0]) if tensor[1] == 0 else None
        if value is None or value.size != 1:
            fail(f"{what} ({_tname(tensor)}) is not a scalar constant")
        return value.reshape(-1)[0].item()

    # -- the parts -------------------------------------------------------------------
    def nms_nodes(self) -> list[str]:
        loops = [n.name for op in V2_LOOP_OPS for n in self.scope.nodes_by_op(op)]
        if loops:
            fail(
                f"the per-image NMS runs in the body function of a TF2 {self.sg.op_of(loops[0])} loop "
                f"({self.scope.suffix_of(loops[0])}), which the pass does not look into; freeze the model "
                "with TF1 control flow or a static batch size")
        raw = [n.name for op in PADDED_NMS_OPS for n in self.scope.nodes_by_op(op)]
        hard = [name for name in raw if self._hard_nms_with_scores(name)]
        refused = [name for name in raw if name not in hard]
        if refused:
            fail(
                f"{self.sg.op_of(refused[0])} ({self.scope.suffix_of(refused[0])}) is not supported: the "
                "padded per-class NMS of TF 1 graphs or soft NMS (a soft_nms_sigma that is not the constant 0)")
        padded = [n.name for n in self.scope.nodes_by_op("PartitionedCall")
                  if PADDED_NMS_FUNCTION in n.attr["f"].func.name]
        plain = [n.name for n in self.scope.nodes_by_op("NonMaxSuppressionV3")] + hard
        if padded and plain:
            fail("both padded and unpadded per-class NMS nodes")
        if not padded and not plain:
            fail("no NonMaxSuppressionV3 node")
        return padded or plain

    def _hard_nms_with_scores(self, name: str) -> bool:
        """``tf.image.non_max_suppression_with_scores`` with ``soft_nms_sigma=0`` (the OD API's
        per-class NMS since 2019): a ``NonMaxSuppressionV5`` that does not pad, whose sigma is the
        constant 0. It selects what ``NonMaxSuppressionV3`` selects, the selected scores being
        the input scores at the selected indices; its first five inputs are V3's."""
        sg = self.sg
        if sg.op_of(name) != "NonMaxSuppressionV5" or sg.node(name).attr["pad_to_max_output_size"].b:
            return False
        sigma = sg.producer(name, 5)
        value = sg.const_value(sigma[0]) if sigma[1] == 0 else None
        return value is not None and value.size == 1 and float(value.reshape(-1)[0]) == 0.0

    def static_shapes(self, nms: list[str]) -> bool:
        return self.sg.op_of(nms[0]) == "PartitionedCall"

    def attributes(self, nms: list[str]) -> dict[str, Any]:
        sg = self.sg
        iou = {self.const_scalar(sg.producer(n, 3), "iou_threshold") for n in nms}
        score = {self.const_scalar(sg.producer(n, 4), "score_threshold") for n in nms}
        per_class = set()
        size_nodes = set()
        static_shapes = self.static_shapes(nms)
        for n in nms:
            if static_shapes:
                per_class.add(int(self.const_scalar(sg.producer(n, 2), "max_size_per_class")))
                if len(sg.input_names(n)) != 8:
                    fail(f"{self.scope.suffix_of(n)} does not take the 8 inputs of the padded NMS")
                options = tuple(self.const_scalar(sg.producer(n, k), "padded NMS option") for k in (5, 6, 7))
                if options != PADDED_NMS_DEFAULTS:
                    fail(f"{self.scope.suffix_of(n)} is not non_max_suppression_padded with its "
                         f"default options {PADDED_NMS_DEFAULTS}: {options}")
                continue
            size = self._through_enter(sg.producer(n, 2))
            if sg.op_of(size[0]) != "Minimum":
                fail(f"the max output size of {n!r} is not min(max_size_per_class, num_boxes)")
            size_nodes.add(size[0])
            per_class.add(self._const_operand(size[0], "max_size_per_class"))
        if len(iou) != 1 or len(score) != 1 or len(per_class) != 1:
            fail("the per-class NMS nodes disagree on iou_threshold, score_threshold or "
                 "max_size_per_class")
        totals = set()
        for node in self.scope.nodes_by_op("Minimum"):
            if node.name in size_nodes or self.sg.scope_of(node.name).last_name == "ClipToWindow":
                continue
            ins = [sg.producer(node.name, k) for k in range(2)]
            if any(sg.const_value(t[0]) is not None for t in ins):
                totals.add(self._const_operand(node.name, "max_total_size"))
        if len(totals) > 1:
            fail(f"more than one max_total_size: {sorted(totals)}")
        subs = [s.last_name for s in self.scope.all_sub_scopes()]
        if "ClipToWindow" not in subs:
            fail("no ClipToWindow scope: not the clipping batch_multiclass_non_max_suppression")
        return {
            "score_threshold": float(score.pop()),
            "iou_threshold": float(iou.pop()),
            "max_size_per_class": int(per_class.pop()),
            "max_total_size": int(totals.pop()) if totals else 0,
            "change_coordinate_frame": "ChangeCoordinateFrame" in subs,
            "use_static_shapes": static_shapes,
        }

    def _const_operand(self, node: str, what: str) -> int:
        sg = self.sg
        for k in range(2):
            value = sg.const_value(sg.producer(node, k)[0])
            if value is not None:
                if value.size != 1:
                    break
                return int(value.reshape(-1)[0])
        fail(f"{what} ({node!r}) is not min(constant, ...)")

    def inputs(self, nms: list[str], *, num_valid: bool = False) -> list[Tensor]:
        """boxes, scores, clip window (and, with ``num_valid``, the count of valid boxes per image
        that a stage passes as ``num_valid_boxes``; this op's pass refuses it)."""
        sg = self.sg
        boxes = {self.batch_source(sg.producer(n, 0)) for n in nms}
        scores = {self.batch_source(sg.producer(n, 1)) for n in nms}
        windows = set()
        for scope in self.scope.all_sub_scopes():
            if scope.last_name != "ClipToWindow":
                continue
            windows.add(self.batch_source(self._clip_window_of(scope)))
        for label, found in (("boxes", boxes), ("scores", scores), ("clip window", windows)):
            if len(found) != 1:
                fail(f"the {label} of the per-image NMS come from {len(found)} different tensors")
        tensors = [boxes.pop(), scores.pop(), self._untiled(windows.pop())]
        for label, t in zip(("boxes", "scores"), tensors, strict=False):
            if t[0] in self.inside:
                fail(f"the {label} ({_tname(t)}) are computed inside the scope")
        # Every other value read from outside would be lost.
        counts: set[Tensor] = set()
        for name in self.scope.node_names():
            for k in range(len(sg.input_names(name))):
                t = sg.producer(name, k)
                if t[0] in self.inside or t in tensors or sg.const_value(t[0]) is not None:
                    continue
                if num_valid and self._splits_counts(name, k):
                    counts.add(t)
                    continue
                fail(
                    f"{self.scope.suffix_of(name)} reads {_tname(t)} from outside, which is neither boxes, "
                    "scores nor clip window (num_valid_boxes, masks and additional_fields are not supported)")
        if num_valid:
            if len(counts) != 1:
                fail(f"{len(counts)} tensors of valid box counts read from outside, not one (num_valid_boxes)")
            tensors.append(counts.pop())
        return tensors

    def _clip_window_of(self, scope: "Scope") -> Tensor:
        """The [4] window a ``ClipToWindow`` scope reads: ``tf.unstack(window)`` (one ``Unpack``)
        or ``window[0]`` ... ``window[3]`` (four element ``StridedSlice`` nodes of one tensor)."""
        sg = self.sg
        unpacks = scope.nodes_by_op("Unpack", direct=True)
        if len(unpacks) == 1:
            return sg.producer(unpacks[0].name, 0)
        elements: dict[Tensor, set[int]] = {}
        for node in scope.nodes_by_op("StridedSlice", direct=True):
            index = self._element_index(node.name)
            if index is not None:
                elements.setdefault(sg.producer(node.name, 0), set()).add(index)
        if not unpacks and len(elements) == 1:
            (window, indices), = elements.items()
            if indices == {0, 1, 2, 3}:
                return window
        fail(f"{scope.name!r} does not unstack one window nor take its four elements")

    def _element_index(self, name: str) -> int | None:
        """k for a ``StridedSlice`` that is ``x[k]`` of a vector (begin k, end k + 1, stride 1,
        the axis shrunk), else None."""
        sg = self.sg
        node = sg.node(name)
        if node.attr["shrink_axis_mask"].i != 1 or node.attr["ellipsis_mask"].i or node.attr["new_axis_mask"].i:
            return None
        begin, end, stride = (sg.const_value(sg.producer(name, k)[0]) for k in (1, 2, 3))
        if begin is None or end is None or stride is None or begin.size != 1 or stride.size != 1:
            return None
        k = int(begin.reshape(-1)[0])
        return k if int(stride.reshape(-1)[0]) == 1 and 0 <= k < 4 else None

    def _splits_counts(self, name: str, slot: int) -> bool:
        """``name`` splits an int32 batch of counts per image (``unstack``, or ``tf.map_fn``'s
        TensorArray scatter and the shape it sizes the array by)."""
        op = self.sg.op_of(name)
        node = self.sg.node(name)
        if op == "Unpack" and name in self.direct:
            return node.attr["T"].type == 3
        if op == "Shape":
            return self.sg.scope_of(name).last_name.startswith("TensorArrayUnstack")
        return op == "TensorArrayScatterV3" and slot == 2 and node.attr["T"].type == 3

    def _untiled(self, window: Tensor) -> Tensor:
        """A [4] window shared by all images is tiled to [B, 4] inside the scope
        (``tile(expand_dims(window, 0), [B, 1])``): the fused op takes the [4] window itself."""
        sg = self.sg
        if window[0] in self.inside and sg.op_of(window[0]) == "Tile":
            expand = sg.producer(window[0], 0)
            if expand[0] in self.inside and sg.op_of(expand[0]) == "ExpandDims":
                axis = sg.const_value(sg.producer(expand[0], 1)[0])
                if axis is not None and axis.size == 1 and int(axis.reshape(-1)[0]) == 0:
                    return sg.producer(expand[0], 0)
        return window

    def outputs(self) -> dict[str, int]:
        """Inner output node -> fused output index."""
        sg = self.sg
        found: dict[int, str] = {}
        for name in self.scope.node_names():
            op = sg.op_of(name)
            if op not in ("Pack", "TensorArrayGatherV3"):
                continue
            if any(c in self.inside for c in sg.consumer_names(name)):
                continue
            if op == "Pack" and name not in self.direct:
                continue
            node = sg.node(name)
            dtype = node.attr["T" if op == "Pack" else "dtype"].type
            source, source_op = self.output_source((name, 0))
            if dtype == 3:  # int32
                index = 3
            elif dtype != 1:
                fail(f"output {name!r} has dtype {dtype_name(dtype)}, not float32 or int32")
            elif source_op in ("Select", "SelectV2"):
                index = 1
            elif source_op == "ConcatV2":
                # the boxes are concatenated coordinate by coordinate (axis 1), the classes class
                # by class (axis 0)
                n_values = len(sg.input_names(source)) - 1
                axis = self.const_scalar(sg.producer(source, n_values), "concat axis")
                index = 0 if axis in (1, -1) else 2
            else:
                fail(
                    f"output {self.scope.suffix_of(name)} is computed by {source_op} "
                    f"{self.scope.suffix_of(source)}: masks or additional fields are not supported")
            if index in found:
                label = BATCH_MULTICLASS_NMS.outputs[index].name
                fail(f"two outputs look like {label}: {found[index]!r} and {name!r} "
                     "(masks or additional fields are not supported)")
            found[index] = name
        if not found:
            fail("no batched output (stack or TensorArray gather) found")
        return {name: index for index, name in found.items()}


class ScopeBatchMultiClassNMSPass(ScopeBasePass):
    """OD API batch_multiclass_non_max_suppression scopes -> BatchMultiClassNonMaxSuppression."""

    name = "ScopeBatchMultiClassNMSPass"
    general = False
    description = ("OD API post_processing.batch_multiclass_non_max_suppression scopes (static or "
                   "dynamic batch) -> BatchMultiClassNonMaxSuppression(boxes, scores, clip_window)")

    def define_patterns(self) -> list[PatternSet]:
        patterns = []
        # NonMaxSuppressionV3 and the padded NMS function (PartitionedCall) are what the fused op
        # represents; the others are found only to be refused with a reason
        for nms_op in ("NonMaxSuppressionV3", "PartitionedCall", *PADDED_NMS_OPS, *V2_LOOP_OPS):
            pattern = ScopePattern("BatchMultiClassNMS").add_scope_feature(suffix=SCOPE)
            pattern.add_node_op_type_feature(nms_op, 0, 1)
            if nms_op not in V2_LOOP_OPS:  # a TF2 loop hides the TopKV2 in its body function
                pattern.add_node_op_type_feature("TopKV2", 0, 1)
            patterns.append(pattern)
        return [[patterns]]

    #: whether the scope may take num_valid_boxes (a stage that carries it; this op does not)
    num_valid_boxes = False

    def generate_fusion_result(self, scopes: Sequence["Scope"], result: FusionScopesResult) -> None:
        scope = scopes[0]
        analysis = _Analysis(scope)
        nms = analysis.nms_nodes()
        attrs = analysis.attributes(nms)
        tensors = analysis.inputs(nms, num_valid=self.num_valid_boxes)
        outputs = analysis.outputs()
        result.set_type(BATCH_MULTICLASS_NMS.name)
        loop = "dynamic" if scope.count("TensorArrayScatterV3") else "static"
        result.set_description(f"batch multi-class NMS ({loop} batch, {len(nms)} per-class NMS nodes)")
        for key, value in attrs.items():
            result.set_attr(key, value)
        index = analysis.sg.index
        inside = frozenset(scope.all_node_indices())
        by_index = [(index.index[name], port) for name, port in tensors]
        for reader, slots in input_slots(analysis.sg, inside, by_index).items():
            result.insert_inputs(scope.suffix_of(reader), slots)
        for name, port in outputs.items():
            result.insert_outputs(scope.suffix_of(name), [port])
