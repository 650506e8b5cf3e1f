"""The graph fusion engine: graph passes run after scope fusion on the scope-fused graph,
go through the same safety checks, are ordered and switched by the fusion switch file, and
are reported with the reference's counters; a misbehaving pass is named and skipped."""
from __future__ import annotations

import pytest
import tensorflow as tf
import tf_slim
from tests.helpers.freeze import freeze_graph

import scopefusion
from scopefusion import (
    AttrDef, FusedOp, FusedOpDef, FusionSwitch, FusionSwitchError, OpPattern, PassError, PatternFusionBasePass,
    TensorArg, op,
)
from scopefusion.core.graph.index import GraphIndex
from scopefusion.core.fusion import pipeline as pipeline_module
from scopefusion.core.graph.matching import find_matches
from scopefusion.core.graph.view import GraphView
from scopefusion.core.graph_fusion.engine import _shared_attrs, to_candidate
from scopefusion.testing import PassTester, graph_from_function

T = (AttrDef("T", "type"),)


def _unary(name: str, reference) -> FusedOpDef:
    return FusedOpDef(name, inputs=(TensorArg("x", type_attr="T"),), outputs=(TensorArg("y", type_attr="T"),),
                      attrs=T, reference=reference)


RELU_SQUARE = _unary("ReluSquare", lambda x, *, T: (tf.square(tf.nn.relu(x)),))
SQUARE_RELU_TWICE = _unary("SquareOfRelu", lambda x, *, T: (tf.square(tf.nn.relu(x)),))


class ReluSquarePass(PatternFusionBasePass):
    """Square(Relu(x)) -> ReluSquare."""

    def define_patterns(self):
        return [OpPattern("ReluSquare", op("Square", op("Relu", "$x", label="relu"), label="square"))]

    def fusion(self, match):
        return FusedOp("ReluSquare", inputs=["x"], attrs={"T": match.node("square").attr["T"].type})


class SquareOfReluPass(ReluSquarePass):
    """The same matches, a different op: it competes with ReluSquarePass."""

    def fusion(self, match):
        return FusedOp("SquareOfRelu", inputs=["x"], attrs={"T": match.node("square").attr["T"].type})


def _two_blocks(x):
    a = tf.square(tf.nn.relu(x))
    b = tf.square(tf.nn.relu(x * 3.0))
    return a + b


SPEC = tf.TensorSpec([2, 4], tf.float32, "x")


@pytest.fixture(scope="module")
def two_blocks():
    return graph_from_function(_two_blocks, SPEC)


def _tester(*passes, ops=(RELU_SQUARE, SQUARE_RELU_TWICE)) -> PassTester:
    return PassTester().with_passes(list(passes), list(ops))


def _ops(result) -> list[str]:
    return [n.op for n in result.fused_graph_def.node]


# --------------------------------------------------------------------- counters
def test_match_and_effect_times_count_matches_and_fusions(two_blocks):
    tester = _tester(ReluSquarePass)
    result = tester.run(two_blocks)
    pr = result.report.pass_report("ReluSquarePass")
    assert (pr.engine, pr.fusion_type, pr.switch) == ("graph", "GraphFusion", "on")
    assert pr.match_times == pr.effect_times == 2 and _ops(result).count("ReluSquare") == 2
    assert pr.candidates == 2  # only the two Square nodes were tried: candidates come by op type
    tester.assert_verified(two_blocks, result)


def test_a_refusal_of_the_pass_is_reported_and_counted(two_blocks):
    class OnlyTheFirst(ReluSquarePass):
        def fusion(self, match):
            if match.name("square") != "Square":
                return self.refuse("only the first block")
            return super().fusion(match)

    result = _tester(OnlyTheFirst).run(two_blocks)
    pr = result.report.pass_report("OnlyTheFirst")
    assert (pr.match_times, pr.effect_times) == (2, 1)
    assert [r.reason for r in pr.refused] == ["rejected by the pass: only the first block"]


# --------------------------------------------------------------------- safety
def test_an_inner_tensor_read_outside_is_refused_and_the_graph_stays_valid():
    def shared(x):
        r = tf.nn.relu(x)
        return tf.square(r) + r  # the Relu is read outside the match

    graph = graph_from_function(shared, SPEC)
    tester = _tester(ReluSquarePass)
    result = tester.run(graph)
    (refusal,) = result.report.pass_report("ReluSquarePass").refused
    assert "feeds outside node" in refusal.reason and "Relu" in refusal.reason
    assert "ReluSquare" not in _ops(result)
    GraphIndex(result.fused_graph_def)
    tester.assert_verified(graph, result)


def test_a_match_that_is_not_convex_is_refused():
    class TwoOutputs(PatternFusionBasePass):
        """Add(Mul(x, y), Relu(Mul(x, y))): the Relu between the two lies outside the match."""

        def define_patterns(self):
            mul = op("Mul", "$x", "$y", label="mul")
            return [OpPattern("MulAdd", op("AddV2", mul, "$z", label="add"))]

        def fusion(self, match):
            return FusedOp("MulAdd", inputs=["x", "y", "z"], outputs=["add", "mul"], attrs={"T": 1})

    mul_add = FusedOpDef("MulAdd", inputs=tuple(TensorArg(n, type_attr="T") for n in "xyz"),
                         outputs=(TensorArg("sum", type_attr="T"), TensorArg("product", type_attr="T")), attrs=T,
                         reference=lambda x, y, z, *, T: (x * y + z, x * y))

    def graph_fn(x):
        m = x * 2.0
        return m + tf.nn.relu(m)

    graph = graph_from_function(graph_fn, SPEC)
    tester = _tester(TwoOutputs, ops=(mul_add,))
    result = tester.run(graph)
    (refusal,) = result.report.pass_report("TwoOutputs").refused
    assert "not convex" in refusal.reason and "'Relu'" in refusal.reason
    assert "MulAdd" not in _ops(result)
    tester.assert_verified(graph, result)


def test_a_fused_name_that_stays_in_the_graph_is_refused(two_blocks):
    class Clashing(ReluSquarePass):
        def fusion(self, match):
            answer = super().fusion(match)
            answer.name = "x"  # the input placeholder's name
            return answer

    result = _tester(Clashing).run(two_blocks)
    refused = result.report.pass_report("Clashing").refused
    assert len(refused) == 2 and all("already used by a node that stays" in r.reason for r in refused)


def test_two_results_giving_their_fused_nodes_one_name_keep_the_first(two_blocks):
    class Twins(ReluSquarePass):
        def fusion(self, match):
            answer = super().fusion(match)
            answer.name = "twin"
            return answer

    result = _tester(Twins).run(two_blocks)
    report = result.report.pass_report("Twins")
    assert len(report.fused) == 1 and report.fused[0].name == "twin" and not report.refused
    (dropped,) = report.dropped
    assert dropped.reason == "new node name 'twin' is also produced by 'twin'" and dropped.winner == "twin (Twins)"
    assert _ops(result).count("ReluSquare") == 1 and _ops(result).count("Square") == 1


def test_a_graph_output_inside_a_match_stays_fetchable():
    def graph_fn(x):
        return tf.square(tf.nn.relu(x), name="out")

    graph = graph_from_function(graph_fn, SPEC)
    tester = _tester(ReluSquarePass)
    result = tester.run(graph, outputs=["out"])
    (node,) = [n for n in result.fused_graph_def.node if n.op == "ReluSquare"]
    assert node.name == "out"  # the fused node takes over the output's name
    tester.assert_verified(graph, result)


# --------------------------------------------------------------------- stages
def test_graph_passes_see_the_scope_fused_graph():
    """A graph pass may take a LayerNorm fused by the scope pass as its input."""
    class LayerNormRelu(PatternFusionBasePass):
        def define_patterns(self):
            return [OpPattern("LayerNormRelu", op("Relu", op("LayerNorm", any_inputs=True, port=0), label="relu"))]

        def fusion(self, match):
            return self.refuse(f"found {match.name('relu')} after a fused LayerNorm")

    def graph_fn(x):
        return tf.nn.relu(tf_slim.layers.layer_norm(x, begin_norm_axis=-1, begin_params_axis=-1))

    def build():
        x = tf.compat.v1.placeholder(tf.float32, [2, 4], name="x")
        return {}, [tf.identity(graph_fn(x), name="out")]

    graph, _, _ = freeze_graph(build)
    result = _tester(LayerNormRelu).run(graph)
    assert result.report.fused_count("LayerNorm") == 1
    (refusal,) = result.report.pass_report("LayerNormRelu").refused
    assert refusal.reason == "rejected by the pass: found Relu after a fused LayerNorm"


def test_ub_fusion_runs_after_graph_fusion_and_has_its_own_section(two_blocks):
    class ReluSquarePlusOne(PatternFusionBasePass):
        """UBFusion: reads the ReluSquare ops the GraphFusion stage made."""

        fusion_type = "UBFusion"

        def define_patterns(self):
            return [OpPattern("Epilogue", op("AddV2", op("ReluSquare", any_inputs=True), "$b", label="add"))]

        def fusion(self, match):
            return self.refuse("seen")

    tester = _tester(ReluSquarePass, ReluSquarePlusOne)
    result = tester.run(two_blocks)
    ub = result.report.pass_report("ReluSquarePlusOne")
    assert ub.fusion_type == "UBFusion" and ub.match_times == 1
    assert list(result.report.stage_seconds).index("graph.match") < list(result.report.stage_seconds).index("ub.match")
    off = FusionSwitch.from_text('{"Switch": {"UBFusion": {"ALL": "off"}}}')
    result = tester.run(two_blocks, fusion_switch_file=off)
    assert result.report.pass_report("ReluSquarePlusOne").switch == "off (ALL)"
    assert result.report.pass_report("ReluSquarePass").effect_times == 2


# --------------------------------------------------------------------- switch file and order
def test_registration_order_settles_overlaps_and_priority_reorders(two_blocks):
    tester = _tester(ReluSquarePass, SquareOfReluPass)
    result = tester.run(two_blocks)
    assert _ops(result).count("ReluSquare") == 2 and "SquareOfRelu" not in _ops(result)
    dropped = result.report.pass_report("SquareOfReluPass").dropped
    assert len(dropped) == 2 and all("comes first in the run order" in r.reason for r in dropped)
    assert all(r.winner.endswith("(ReluSquarePass)") for r in dropped)

    switch = FusionSwitch.from_text('{"Priority": {"GraphFusion": {"Top": {"SquareOfReluPass": "10"}}}}')
    result = tester.run(two_blocks, fusion_switch_file=switch)
    assert _ops(result).count("SquareOfRelu") == 2 and "ReluSquare" not in _ops(result)
    names = [p.name for p in result.report.passes if p.engine == "graph"]
    assert names.index("SquareOfReluPass") < names.index("ReluSquarePass")


def test_all_off_with_one_pass_on_and_an_exact_off_beating_all_on(two_blocks):
    tester = _tester(ReluSquarePass, SquareOfReluPass)
    only = FusionSwitch.from_text('{"Switch": {"GraphFusion": {"ALL": "off", "SquareOfReluPass": "on"}}}')
    result = tester.run(two_blocks, fusion_switch_file=only)
    assert _ops(result).count("SquareOfRelu") == 2
    assert result.report.pass_report("GeluFusionPass").switch == "off (ALL)"
    exact = FusionSwitch.from_text("ALL:on\nReluSquarePass:off\n")
    result = tester.run(two_blocks, fusion_switch_file=exact)
    assert result.report.pass_report("ReluSquarePass").switch == "off (exact)"
    assert _ops(result).count("SquareOfRelu") == 2


def test_a_forbidden_close_pass_stays_on_and_the_report_says_so(two_blocks, tmp_path):
    class Essential(ReluSquarePass):
        forbidden_close = True

    switch = tmp_path / "switch.json"
    switch.write_text('{"Switch": {"GraphFusion": {"ALL": "off"}}}')
    result = _tester(Essential).run(two_blocks, fusion_switch_file=str(switch))
    pr = result.report.pass_report("Essential")
    assert pr.switch.startswith("on (forbidden_close") and pr.effect_times == 2


def test_a_missing_switch_file_is_an_error_before_any_work(tmp_path):
    with pytest.raises(FusionSwitchError, match="no such file"):
        scopefusion.fuse(tmp_path / "no-model.pb", fusion_switch_file=tmp_path / "missing.json")


def test_unknown_names_in_the_switch_file_are_warned_about(two_blocks):
    switch = FusionSwitch.from_text('{"Switch": {"GraphFusion": {"ReluSqarePass": "off"}}}')
    result = _tester(ReluSquarePass).run(two_blocks, fusion_switch_file=switch)
    (warning,) = result.report.warnings
    assert "ReluSqarePass" in warning and "did you mean 'ReluSquarePass'" in warning
    assert result.report.pass_report("ReluSquarePass").effect_times == 2  # unknown names change nothing


# --------------------------------------------------------------------- misbehaving passes
class Exploding(ReluSquarePass):
    def fusion(self, match):
        raise RuntimeError("boom")


class BadAnswer(ReluSquarePass):
    def fusion(self, match):
        return "ReluSquare"


class BadPatterns(ReluSquarePass):
    def define_patterns(self):
        return [[op("Square", "$x")]]


@pytest.mark.parametrize("cls,needle", [
    (Exploding, "raised RuntimeError: boom"),
    (BadAnswer, "fusion() must return a FusedOp or NotFused, not str"),
    (BadPatterns, "define_patterns() item 0 is a list"),
])
def test_a_misbehaving_pass_is_named_and_skipped(two_blocks, cls, needle):
    tester = _tester(cls)
    result = tester.run(two_blocks, strict=False)
    pr = result.report.pass_report(cls.__name__)
    assert pr.error is not None and needle in pr.error and cls.__name__ in pr.error
    assert "ReluSquare" not in _ops(result)
    GraphIndex(result.fused_graph_def)
    with pytest.raises(PassError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        tester.run(two_blocks)


# --------------------------------------------------------------------- near misses
def test_a_gelu_with_one_constant_changed_is_a_near_miss_naming_it():
    def almost_gelu(x):
        return 0.5 * x * (1.0 + tf.math.erf(x / 1.5))  # 1.5 instead of sqrt(2)

    graph = graph_from_function(almost_gelu, SPEC)
    result = PassTester().run(graph)
    pr = result.report.pass_report("GeluFusionPass")
    assert pr.fused == [] and pr.match_times == 0
    (near,) = pr.near_misses
    assert "pattern GeluErf" in near.reason and "1.5" in near.reason and "sqrt(2)" in near.reason


def test_a_real_gelu_constant_written_in_float16_still_fuses():
    def half_gelu(x):
        return tf.nn.gelu(tf.cast(x, tf.float16), approximate=True)

    graph = graph_from_function(half_gelu, SPEC)
    tester = PassTester()
    result = tester.run(graph)
    (node,) = [n for n in result.fused_graph_def.node if n.op == "Gelu"]
    assert node.attr["approximate"].b and node.attr["T"].type == tf.float16.as_datatype_enum
    tester.assert_verified(graph, result)



# --------------------------------------------------------------------- stock ops
class ReluOfRelu(PatternFusionBasePass):
    """Relu(Relu(x)) is Relu(x): the result is a stock TensorFlow op, no fused op needed."""

    op_type = "Relu"

    def define_patterns(self):
        return [OpPattern("ReluOfRelu", op("Relu", op("Relu", "$x"), label="outer"))]

    def fusion(self, match):
        return FusedOp(self.op_type, inputs=["x"], attrs={"T": match.node("outer").attr["T"].type})


def test_a_graph_pass_may_produce_a_stock_tensorflow_op():
    graph = graph_from_function(lambda x: tf.nn.relu(tf.nn.relu(x)) * 2.0, SPEC)
    tester = _tester(ReluOfRelu)
    result = tester.run(graph)
    assert _ops(result).count("Relu") == 1 and result.report.pass_report("ReluOfRelu").effect_times == 1
    tester.assert_verified(graph, result)


def test_an_op_type_neither_declared_nor_in_tensorflow_is_refused():
    class Unknown(ReluOfRelu):
        op_type = "NoSuchFusedOp"

    graph = graph_from_function(lambda x: tf.nn.relu(tf.nn.relu(x)) * 2.0, SPEC)
    result = _tester(Unknown).run(graph)
    (refusal,) = result.report.pass_report("Unknown").refused
    assert "'NoSuchFusedOp' is not declared" in refusal.reason and _ops(result).count("Relu") == 2


def test_fusion_stays_inside_the_nodes_a_back_end_runs(two_blocks):
    """With fusible_nodes (a partition's device nodes), a match reaching past them is refused."""
    from scopefusion.core.fusion.options import FusionOptions
    from scopefusion.core.fusion.pipeline import FusionPipeline
    from scopefusion.api import build_pipeline

    tester = _tester(ReluSquarePass)
    # the second block (Relu_1, Square_1) is half on the host: its Relu_1 is not fusible
    options = FusionOptions(fusible_nodes=frozenset({n.name for n in two_blocks.node} - {"Relu_1"}))
    pipeline: FusionPipeline = build_pipeline(tester.registry, options, FusionSwitch.default())
    graph = type(two_blocks)()
    graph.CopyFrom(two_blocks)
    report = pipeline.run(graph).report
    pr = report.pass_report("ReluSquarePass")
    assert [f.name for f in pr.fused] == ["Square"]
    (refusal,) = pr.refused
    assert refusal.name == "Square_1" and "'Relu_1' lie outside the nodes the back end runs" in refusal.reason


# --------------------------------------------------------------------- indexing between stages
class RefusingReluSquarePass(ReluSquarePass):
    """Matches Square(Relu(x)) and fuses nothing."""

    def fusion(self, match):
        return self.refuse("not here")


class UBReluSquarePass(ReluSquarePass):
    """Square(Relu(x)) -> ReluSquare in the UB fusion stage."""

    fusion_type = "UBFusion"


def _counting_builds(monkeypatch, rebuild_always: bool) -> list[int]:
    """Count the indexes the pipeline builds (runs without hints: trying the passes left out builds its own)."""
    built: list[int] = []
    build = pipeline_module.GraphIndex
    monkeypatch.setattr(pipeline_module, "GraphIndex", lambda graph, **kw: built.append(1) or build(graph, **kw))
    if rebuild_always:
        monkeypatch.setattr(pipeline_module, "_indexes", lambda index, graph: False)
    return built


def _fingerprint(result) -> tuple:
    passes = [(p.name, p.match_times, p.effect_times, [r.reason for r in p.refused]) for p in result.report.passes]
    return result.graph_def.SerializeToString(deterministic=True), passes, sorted(result.report.stage_seconds)


@pytest.mark.parametrize("rebuild_always", [False, True])
def test_a_stage_after_one_that_rewrote_nothing_reads_the_index_it_read(two_blocks, monkeypatch, rebuild_always):
    tester = _tester(RefusingReluSquarePass, UBReluSquarePass)
    built = _counting_builds(monkeypatch, rebuild_always)
    result = tester.run(two_blocks, hints=False)
    assert result.report.pass_report("RefusingReluSquarePass").match_times == 2
    assert result.report.fused_count("ReluSquare") == 2  # the UB stage fused on the index it was lent
    stages = [s.split(".")[0] for s in result.report.stage_seconds if s.endswith(".match")]
    assert stages == ["scope", "graph", "ub"] and {"graph.index", "ub.index"} <= set(result.report.stage_seconds)
    assert len(built) == (3 if rebuild_always else 1)  # no stage before UB rewrote the graph


def test_reading_the_last_index_again_changes_nothing_in_the_result(two_blocks, monkeypatch):
    tester = _tester(RefusingReluSquarePass, UBReluSquarePass)
    reused = _fingerprint(tester.run(two_blocks, hints=False))
    with monkeypatch.context() as patch:
        built = _counting_builds(patch, rebuild_always=True)
        rebuilt = _fingerprint(tester.run(two_blocks, hints=False))
    assert reused == rebuilt and len(built) == 3


def test_a_stage_after_one_that_rewrote_the_graph_indexes_what_the_rewrite_changed(two_blocks, monkeypatch):
    built = _counting_builds(monkeypatch, rebuild_always=False)
    updated: list[int] = []
    update = pipeline_module.reindex
    monkeypatch.setattr(pipeline_module, "reindex", lambda *args, **kw: updated.append(1) or update(*args, **kw))
    result = _tester(ReluSquarePass, UBReluSquarePass).run(two_blocks, hints=False)
    assert result.report.fused_count("ReluSquare") == 2
    assert result.report.pass_report("UBReluSquarePass").match_times == 0
    # the scope stage fused nothing (its index serves the graph stage); the graph stage did: the UB
    # stage's index is the graph stage's, updated
    assert len(built) == 1 and len(updated) == 1


def test_candidates_share_an_attribute_dict_only_for_the_same_values_of_the_same_types():
    sets: dict = {}
    first = _shared_attrs({"T": 1, "epsilon": 0.5}, sets)
    assert _shared_attrs({"T": 1, "epsilon": 0.5}, sets) is first and first == {"T": 1, "epsilon": 0.5}
    as_bool = _shared_attrs({"T": True, "epsilon": 0.5}, sets)  # True == 1, but it is written as a bool
    assert as_bool is not first and type(as_bool["T"]) is bool
    negative_zero = _shared_attrs({"epsilon": -0.0}, sets)
    assert _shared_attrs({"epsilon": 0.0}, sets) is not negative_zero
    axes = _shared_attrs({"axes": [1]}, sets)  # a list may change: never shared
    assert _shared_attrs({"axes": [1]}, sets) is not axes
    assert _shared_attrs({"T": 1}, None) is not _shared_attrs({"T": 1}, None)


def test_the_candidates_of_one_pass_with_equal_attributes_share_their_dict(two_blocks):
    view = GraphView(GraphIndex(two_blocks))
    pattern = ReluSquarePass().define_patterns()[0]
    matches = find_matches(view, pattern, lambda root, why: None)
    assert len(matches) == 2
    sets: dict = {}
    a, b = (to_candidate(m, ReluSquarePass().fusion(m), pass_name="p", order=0, attr_sets=sets) for m in matches)
    assert a.attrs is b.attrs and a.attrs == {"T": tf.float32.as_datatype_enum}
