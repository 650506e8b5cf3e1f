"""ScopeLayerNormPass: layer normalization scopes -> ``LayerNorm``.

The forms real code produces, each in a scope of its own::

    tf_slim layer_norm, tf_keras LayerNormalization (epsilon < 1.001e-5),
    any tf.nn.moments + tf.nn.batch_normalization:
        <scope>/moments/{mean, StopGradient, SquaredDifference, variance}
        <scope>/batchnorm/{add, Rsqrt, mul, mul_1, mul_2, sub, add_1}
    Keras 3 LayerNormalization (keras.ops.layer_normalization):
        <scope>/moments/{...}, <scope>/{add, Rsqrt, Reshape, mul, mul_2, Neg, mul_1, Reshape_1, add_1, add_2}
    hand-written, e.g. GPT-2's norm():
        <scope>/{Mean, sub, Square, Mean_1, add, Rsqrt, sub_1, mul, mul_1, add_1}
    or with tf.math.reduce_variance (a second mean of x, in reduce_variance/)
    tf_keras LayerNormalization (epsilon >= 1.001e-5): the reshape + FusedBatchNormV3 trick
        <scope>/{Shape, StridedSlice, Prod, Pack, Reshape, Fill, FusedBatchNormV3, Reshape_1, mul, add}

Patterns find candidates by op types (and the ``moments`` / ``batchnorm``
sub-scopes ``tf.nn.moments`` and ``tf.nn.batch_normalization`` open); the
analyses then identify the nodes by their wiring, never by their names
(:mod:`.moments` for every form that computes its own statistics,
:mod:`.fused_batch_norm` for the trick), and read epsilon and the axes from the
graph.  In half or bfloat16, the float32 statistics between casts are seen through: a
layer computing in float32 between two casts (Keras mixed precision) becomes a float32
LayerNorm followed by its own down-cast; ``tf.nn.moments`` on float16 input becomes a
float16 LayerNorm.  What the op cannot represent (no gamma or beta, axes that are not
trailing, gamma not shaped like x's trailing axes, RMS-style scaling, ...) is
refused with a reason.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ....core.fusion.refusal import fail
from ....core.graph.vocabulary import CONTROL, FLOAT_DTYPES
from ....core.scope.base_pass import ScopeBasePass
from ....core.scope.instances import ScopePart, split_instances
from ....core.scope.patterns import PatternSet, ScopePattern
from ....core.scope.results import FusionScopesResult, ScopesResult
from .common import LayerNormMatch
from .fused_batch_norm import FUSED_BATCH_NORM, analyse_fused_batch_norm
from .moments import analyse_moments
from .op import LAYER_NORM, layer_norm_reference
from .structure import AnalysisCache

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope, ScopeGraph

__all__ = ["LAYER_NORM", "ScopeLayerNormPass", "layer_norm_reference", "analyse"]

#: DT_FLOAT, DT_DOUBLE, DT_BFLOAT16, DT_HALF
#: Ops a layer norm's own scope never holds (inputs, matrix products, convolutions).
NOT_IN_A_LAYER_NORM = ("Placeholder", "MatMul", "BatchMatMulV2", "Einsum", "Conv2D", "BiasAdd")
#: The label of a ``tf.nn.moments`` sub-scope while calls are counted.
MOMENTS_LABEL = "LayerNormMoments"
#: The label of a single call's layer norm scope while calls are counted.
SINGLE_CALL_LABEL = "LayerNormCall"
#: Nodes that locate a layer norm's statistics.
CORE_OPS = ("Mean", "Rsqrt", "Sqrt", FUSED_BATCH_NORM)


def analyse(scope: "Scope | ScopePart") -> LayerNormMatch:
    """The layer norm in ``scope``; refused (:func:`fail`) with the reason when it is none."""
    if scope.is_root:
        fail("the layer norm lies in no name scope")
    if scope.count(FUSED_BATCH_NORM):
        return analyse_fused_batch_norm(scope)
    return analyse_moments(scope)


class ScopeLayerNormPass(ScopeBasePass):
    """Layer normalization scopes (tf_slim, tf_keras, Keras 3, hand-written) -> LayerNorm."""

    name = "ScopeLayerNormPass"
    general = True
    description = ("layer norm scopes (tf_slim, tf_keras incl. its FusedBatchNormV3 path, Keras 3, "
                   "GPT-2-style hand-written) -> LayerNorm(x, gamma, beta)")

    def define_patterns(self) -> list[PatternSet]:
        # tf_slim's default scope name: kept so that look-alikes named LayerNorm are reported
        slim = (ScopePattern("LayerNorm").add_scope_feature(suffix="LayerNorm")
                .add_node_op_type_feature("Mean", 2).add_node_op_type_feature("SquaredDifference", 1)
                .add_node_op_type_feature("Rsqrt", 1))
        # tf.nn.moments + tf.nn.batch_normalization under any name (tf_keras, a tf_slim scope
        # of another name): cheap counts first, then the sub-scope names these functions give
        # (instance norms name theirs "instancenorm"; batch norms over moving statistics have
        # no Mean; a training batch norm updates its moving averages: more Mul and Sub).
        # Without offset (center=False) a Neg stands for the Sub, without scale one Mul is
        # missing: matched so that the analysis refuses them with the reason.  A tf_keras layer
        # called several times numbers its calls' sub-scopes in one scope (moments_1/, ...).
        nn_forms = [_nn_form(mul, sub) for mul, sub in ((3, 1), (3, -1), (2, 1), (2, -1))]
        # flat forms (Keras 3, hand-written): the normaliser lies directly in the scope
        # (3 Means: tf.math.reduce_variance takes a mean of its own)
        flat = [
            ScopePattern("LayerNorm").add_node_op_type_feature("Mean", means).add_node_op_type_feature(op, 1)
            .add_node_attr_feature(op, "T", FLOAT_DTYPES)
            for means in (2, 3) for op in ("Rsqrt", "Sqrt")
        ]
        # tf_keras' FusedBatchNormV3 trick (once per call of the layer)
        fused = (ScopePattern("LayerNorm").add_node_op_type_feature(FUSED_BATCH_NORM, 0, 1)
                 .add_node_attr_feature(FUSED_BATCH_NORM, "is_training", True)
                 .add_node_attr_feature(FUSED_BATCH_NORM, "data_format", "NCHW")
                 .add_node_op_type_feature("Reshape", 0, 1))
        return [[[slim]], [flat], [[fused]], [nn_forms], _several_calls()]

    def _analyses(self, graph: "ScopeGraph") -> AnalysisCache:
        """The analyses of ``graph`` so far: each distinct layer-norm structure is analysed once."""
        cache: AnalysisCache | None = getattr(self, "_analysis_cache", None)
        if cache is None or cache.graph is not graph:
            cache = AnalysisCache(graph)
            self._analysis_cache = cache
        return cache

    def last_match_scopes_and_ops(self, scope_graph: "ScopeGraph") -> list[ScopesResult]:
        """One result per layer norm, in the tightest scope holding its statistics: a
        matched parent scope (say a Keras model holding one layer norm and a Dense)
        gives way to the layer norm's own scope."""
        results, seen, met = [], set(), set()
        index = scope_graph.index
        core = {i for op in CORE_OPS for i in index.nodes_of_type(op)}  # the statistics' nodes
        anchors = {i for op in CALL_ANCHORS for i in index.nodes_of_type(op)}
        for scope in self.matched_scopes(scope_graph):
            if id(scope) in met:  # matched by two pattern sets: its tightest scope is taken already
                continue
            met.add(id(scope))
            tight = _tightest(scope, core)
            if id(tight) not in seen:
                seen.add(id(tight))
                results.extend(_calls(tight, anchors))
        return results

    def generate_fusion_result(self, scopes: Sequence["Scope"], result: FusionScopesResult) -> None:
        scope = result.part or scopes[0]
        analyses = self._analyses(scope.graph)
        match = analyses.analyse(scope, analyse)
        if result.part is not None:  # one of several calls in the scope: named like its output
            result.set_name(match.output_cast or match.output)
        result.set_type(LAYER_NORM.name)
        result.set_description(match.description)
        result.set_attr("begin_norm_axis", match.begin_norm_axis)
        result.set_attr("begin_params_axis", match.begin_params_axis)
        result.set_attr("epsilon", match.epsilon)
        result.set_attr("T", match.dtype)
        if len({match.x, match.gamma, match.beta}) != 3:
            fail("x, gamma and beta are not three different tensors")
        _insert_inputs(scope, match, result, analyses.facts)
        if match.output_cast is not None:
            _cast_after(scope, match, result)
            return
        result.insert_outputs(scope.suffix_of(match.output), [0])
        if match.mean is not None and match.variance is not None:
            result.insert_outputs(scope.suffix_of(match.mean), [1])
            result.insert_outputs(scope.suffix_of(match.variance), [2])


def _insert_inputs(scope: "Scope | ScopePart", match: LayerNormMatch, result: FusionScopesResult,
                   facts: dict[str, Any] | None) -> None:
    """Every inner read of x, gamma and beta: which data input slot of which node reads which.
    They follow from the scope's wiring and where x, gamma and beta lie in it: found once per
    structure when ``facts`` are those of the scope's alike ones (:attr:`AnalysisCache.facts`)."""
    reads = None if facts is None else facts.get("input_slots")
    if reads is None:
        reads = _input_slots(scope, match)
        if facts is not None:
            facts["input_slots"] = reads
    for suffix, slots in reads:
        result.insert_inputs(suffix, slots)


def _input_slots(scope: "Scope | ScopePart", match: LayerNormMatch) -> list[tuple[str, tuple[int | None, ...]]]:
    """Per inner node reading x, gamma or beta (in graph order): its name relative to the scope
    and, per data input slot, the fused input it reads (None: another tensor)."""
    index = scope.graph.index
    fused_input = {(index.index[name], port): k for k, (name, port) in enumerate((match.x, match.gamma, match.beta))}
    names, inputs, consumers = index.names, index.inputs, index.consumers
    readers = {c for p, port in fused_input for c, read, _ in consumers[p] if read == port}  # control: port -1
    return [(scope.suffix_of(names[i]), tuple([fused_input.get(t) for t in inputs[i] if t[1] != CONTROL]))
            for i in sorted(readers.intersection(scope.all_node_indices()))]


def _cast_after(scope: "Scope | ScopePart", match: LayerNormMatch, result: FusionScopesResult) -> None:
    """A layer norm computed in float32 and cast down to half or bfloat16 (Keras layers
    under a low-precision or mixed dtype policy): the scope becomes a float32 LayerNorm
    followed by the same Cast, under the Cast's own name, so numerics do not change.
    The Cast that brings x up to float32 stays in the graph as the LayerNorm's input."""
    sg = scope.graph
    cast = scope.suffix_of(match.output_cast)  # type: ignore[arg-type]
    result.add_inner_node(LAYER_NORM.name, LAYER_NORM.name,
                          [result.fused_input(0), result.fused_input(1), result.fused_input(2)], dict(result.attrs))
    cast_attrs = sg.node(match.output_cast).attr  # type: ignore[arg-type]
    result.add_inner_node(cast, "Cast", [f"{LAYER_NORM.name}:0"], {key: cast_attrs[key] for key in cast_attrs})
    result.insert_outputs(cast, [0])
    result.set_inner_output(0, f"{cast}:0")
    if match.mean is not None and match.variance is not None:
        result.insert_outputs(scope.suffix_of(match.mean), [1])
        result.insert_outputs(scope.suffix_of(match.variance), [2])
        result.set_inner_output(1, f"{LAYER_NORM.name}:1")
        result.set_inner_output(2, f"{LAYER_NORM.name}:2")


def _nn_form(muls: int, subs: int, label: str = "LayerNorm") -> ScopePattern:
    """One call of tf.nn.moments + tf.nn.batch_normalization: ``muls`` Mul (3 with a scale, 2
    without) and ``subs`` Sub (1 with an offset, -1: absent, a Neg instead)."""
    form = (ScopePattern(label).add_node_op_type_feature("Mean", 2)
            .add_node_op_type_feature("SquaredDifference", 1).add_node_op_type_feature("Rsqrt", 1)
            .add_node_op_type_feature("Mul", muls).add_node_op_type_feature("Sub", subs))
    if subs < 0:
        form.add_node_op_type_feature("Neg", 1)
    for op in NOT_IN_A_LAYER_NORM:  # so that the graph's root or a model scope rarely match
        form.add_node_op_type_feature(op, -1)
    return form.add_scope_feature(sub_scope_mask="moments").add_scope_feature(sub_scope_mask="batchnorm")


#: One node of each of these per call of a layer norm.
CALL_ANCHORS = frozenset({FUSED_BATCH_NORM, "Rsqrt", "Sqrt"})
def _several_calls() -> list[list[ScopePattern]]:
    """A tf_keras layer called several times in one scope: first each call's ``moments``
    sub-scope is labelled (``moments``, ``moments_1``, ... all have the last name ``moments``),
    and so is a layer norm scope of a single call (its moments then stay unlabelled: a model
    scope holding several layer norm layers is not one layer called several times); then the
    scope holding two or more such moments, a ``batchnorm`` sub-scope, and no single-call layer
    norm below it."""
    moments = (ScopePattern(MOMENTS_LABEL).add_scope_feature(suffix="moments")
               .add_node_op_type_feature("Mean", 2).add_node_op_type_feature("SquaredDifference", 1))
    single = [_nn_form(mul, sub, SINGLE_CALL_LABEL) for mul, sub in ((3, 1), (3, -1), (2, 1), (2, -1))]
    layer = (ScopePattern("LayerNorm").add_scope_feature(sub_type=MOMENTS_LABEL, num=2, at_least=True)
             .add_scope_feature(sub_type=SINGLE_CALL_LABEL, num=0)
             .add_node_op_type_feature("Rsqrt", 0, 1).add_node_op_type_feature("SquaredDifference", 0, 1))
    for op in NOT_IN_A_LAYER_NORM:
        layer.add_node_op_type_feature(op, -1)
    return [[*single, moments], [layer.add_scope_feature(sub_scope_mask="batchnorm")]]


def _calls(scope: "Scope", call_anchors: set[int]) -> list[ScopesResult]:
    """One result for the scope, or one per call when a layer called several times put its
    calls in this one scope (a piece lying inside one sub-scope is left to that scope's own
    match: a model scope holding several layers is not a layer called several times).
    ``call_anchors``: the graph's nodes of :data:`CALL_ANCHORS` ops."""
    anchors = [i for i in scope.all_node_indices() if i in call_anchors]
    parts = split_instances(scope, anchors) if len(anchors) > 1 else None
    if parts is None:
        return [ScopesResult([scope])]
    return [ScopesResult([scope], part=part) for part in parts if not _inside_one_child(part, scope)]


def _inside_one_child(part: ScopePart, scope: "Scope") -> bool:
    """Do all of ``part``'s nodes lie under one sub-scope of ``scope``?"""
    sg = scope.graph
    children = set()
    for name in part.node_names():
        home = sg.scope_of(name)
        while home is not scope and home.parent is not scope:
            home = home.parent  # type: ignore[assignment]
        if home is scope:
            return False
        children.add(home.name)
    return len(children) == 1


def _tightest(scope: "Scope", core: set[int]) -> "Scope":
    """The deepest scope holding every Mean, Rsqrt, Sqrt and FusedBatchNormV3 of ``scope``
    (``core``: the graph's nodes of those ops), found by the scopes' numbers: a scope's
    descendants are numbered after it, before its end."""
    tree = scope.graph.tree
    layout = tree.layout
    node_scope = layout.node_scope
    homes = {int(node_scope[i]) for i in core.intersection(scope.all_node_indices())}
    if not homes:
        return scope
    common = min(homes)
    end, parent = layout.end, layout.parent
    for home in homes:
        while not common <= home < end[common]:
            common = int(parent[common])
    return tree.scope_at(common)
