"""scopefusion.Session: the seeds' session snippets (seed 000's ``enable_scope_fusion_passes``,
seed 002's ``fusion_switch_file``) run through it on a tf_slim BERT-style encoder and on an
Object Detection API post-processor; fused ops present, outputs equal to a plain
``tf.compat.v1.Session``'s, fused ops fetched by name; dump, overflow and profiling output;
``use_off_line``, ``graph_run_mode``; bad options; variables and ``Saver`` on an unfrozen graph."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
import tensorflow as tf
import tf_slim
from tests.models.detection_models import ssd_postprocess_graph
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig
from tests.passes.detection.test_detection import od  # noqa: F401 - the OD API install fixture, shared

import scopefusion
from scopefusion import AttrDef, FusedOp, FusedOpDef, OpPattern, PatternFusionBasePass, TensorArg, op
from scopefusion.core.options import SessionOptionError
from scopefusion.testing import registry_with
from tests.helpers.session_configs import npu_config as seed_config

tf1 = tf.compat.v1
TOL = 1e-5
EMBEDDINGS_LN = "bert/embeddings/LayerNorm"


# ------------------------------------------------------------------------------ helpers
def plain_config() -> tf1.ConfigProto:
    config = tf1.ConfigProto()
    config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
    return config


def imported(graph_def) -> tf.Graph:
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(graph_def, name="")
    return graph


def plain_run(graph: tf.Graph, fetches, feeds):
    with tf1.Session(graph=graph, config=plain_config()) as sess:
        return sess.run(fetches, feeds)


def scope_output(graph_def, scope: str) -> str:
    """The one tensor of ``scope`` that nodes outside it read."""
    inside = {n.name for n in graph_def.node if n.name.startswith(scope + "/")}
    read = {i.lstrip("^") for n in graph_def.node if n.name not in inside for i in n.input
            if not i.startswith("^") and i.split(":")[0] in inside}
    (tensor,) = read
    return tensor if ":" in tensor else tensor + ":0"


def fused_types(sess) -> list[str]:
    return sorted(sess.report.fused_ops.values())


def bert_feeds(bert_encoder, scale: float = 1.0) -> dict:
    return {k: v * scale for k, v in bert_encoder.inputs.items()}


@pytest.fixture(scope="module")
def bert_graph(bert_encoder) -> tf.Graph:
    return imported(bert_encoder.graph_def)


# ----------------------------------------------------------------------- seed 000 snippet
def test_seed_000_snippet_on_the_bert_encoder(bert_encoder, bert_graph, registry):
    config = tf1.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["use_off_line"].b = True
    custom_op.parameter_map["enable_scope_fusion_passes"].s = tf.compat.as_bytes("ScopeDecodeBboxV2Pass")
    config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
    feeds = bert_encoder.inputs
    with bert_graph.as_default(), scopefusion.Session(config=config, registry=registry) as sess:  # the default graph
        layer_norm = sess.run(EMBEDDINGS_LN, feeds)  # sess.run(xx_name_scope)
        output = sess.run(bert_encoder.outputs[0], feeds)
        assert sess.graph is bert_graph
        fused = sess.fused_graph_def
    assert fused_types(sess).count("LayerNorm") == bert_encoder.layer_norms == 7
    assert sum(n.op == "LayerNorm" for n in fused.node) == 7
    assert sess.report.acted_on == ["use_off_line", "enable_scope_fusion_passes"]
    expected_ln, expected = plain_run(bert_graph, [scope_output(bert_encoder.graph_def, EMBEDDINGS_LN),
                                                   bert_encoder.outputs[0]], feeds)
    assert layer_norm.shape == expected_ln.shape == (16, 64)
    np.testing.assert_allclose(layer_norm, expected_ln, atol=TOL, rtol=TOL)
    np.testing.assert_allclose(output, expected, atol=TOL, rtol=TOL)


def test_seed_000_snippet_on_a_detection_graph(od, registry):  # noqa: F811 - the fixture
    model = ssd_postprocess_graph(od)
    graph = imported(model.graph_def)
    config = seed_config(enable_scope_fusion_passes="ScopeDecodeBboxV2Pass,ScopeBatchMultiClassNMSPass")
    with scopefusion.Session(graph=graph, config=config, registry=registry) as sess:
        decoded = sess.run("Postprocessor/Decode", model.feeds)
        boxes = sess.run("Postprocessor/BatchMultiClassNonMaxSuppression", model.feeds)  # output 0: the boxes
        outputs = sess.run(model.outputs, model.feeds)
    assert sess.report.fused_ops.items() >= {"Postprocessor/Decode": "DecodeBboxV2",
                                             "Postprocessor/BatchMultiClassNonMaxSuppression":
                                                 "BatchMultiClassNonMaxSuppression"}.items()
    expected_decoded = plain_run(graph, scope_output(model.graph_def, "Postprocessor/Decode"), model.feeds)
    expected = plain_run(graph, model.outputs, model.feeds)
    np.testing.assert_allclose(decoded, expected_decoded, atol=TOL, rtol=TOL)
    np.testing.assert_allclose(boxes, expected[0], atol=TOL, rtol=TOL)
    for got, want in zip(outputs, expected, strict=True):
        np.testing.assert_allclose(got, want, atol=TOL, rtol=TOL)
    assert expected[3].min() > 0  # real detections


# ----------------------------------------------------------------------- seed 002 snippet
def test_seed_002_fusion_switch_file(bert_encoder, bert_graph, registry, tmp_path):
    switch = tmp_path / "fusion_switch.cfg"
    switch.write_text(json.dumps({"Switch": {"GraphFusion": {"ALL": "off", "GeluFusionPass": "on"},
                                             "UBFusion": {"ALL": "off"}}}))
    config = seed_config()
    custom_op = config.graph_options.rewrite_options.custom_optimizers[0]
    custom_op.parameter_map["fusion_switch_file"].s = tf.compat.as_bytes(str(switch))
    with scopefusion.Session(graph=bert_graph, config=config, registry=registry) as sess:
        output = sess.run(bert_encoder.outputs[0], bert_encoder.inputs)
    assert set(fused_types(sess)) == {"LayerNorm", "Gelu"}
    assert fused_types(sess).count("Gelu") == 3
    np.testing.assert_allclose(output, plain_run(bert_graph, bert_encoder.outputs[0], bert_encoder.inputs),
                               atol=TOL, rtol=TOL)
    with scopefusion.Session(graph=bert_graph, config=seed_config(), registry=registry) as sess:
        sess.run(bert_encoder.outputs[0], bert_encoder.inputs)
    assert "MatMulBiasAdd" in fused_types(sess)  # without the switch file


# -------------------------------------------------------------------------------- dump
@pytest.mark.parametrize("mode", ["input", "output", "all"])
def test_dump_writes_the_fused_ops_tensors_at_exactly_the_chosen_steps(bert_encoder, bert_graph, registry,
                                                                       tmp_path, mode):
    config = seed_config(enable_dump=True, dump_path=str(tmp_path), dump_step="0|2", dump_mode=mode)
    scales = [1.0, 2.0, 3.0, 4.0]
    with scopefusion.Session(graph=bert_graph, config=config, registry=registry) as sess:
        sess.run("bert/embeddings/mul/y:0")  # runs no fused op: no step
        for scale in scales:  # steps 0 to 3
            sess.run(bert_encoder.outputs[0], bert_feeds(bert_encoder, scale))
        fused = dict(sess.report.fused_ops)
    files = sorted(p.name for p in tmp_path.iterdir())
    pattern = re.compile(r"(?P<type>\w+)\.(?P<name>[\w.-]+)\.(?P<step>\d+)\.npz")
    found = {(m["type"], m["name"], int(m["step"])) for m in map(pattern.fullmatch, files)}
    expected = {(t, name.replace("/", "_"), step) for name, t in fused.items() for step in (0, 2)}
    assert len(files) == len(found) == len(expected) == 2 * len(fused) and found == expected
    ln_in = scope_output(bert_encoder.graph_def, EMBEDDINGS_LN)
    for step in (0, 2):
        feeds = bert_feeds(bert_encoder, scales[step])
        x, y = plain_run(bert_graph, ["bert/embeddings/add:0", ln_in], feeds)
        with np.load(tmp_path / f"LayerNorm.bert_embeddings_LayerNorm.{step}.npz") as dump:
            wants_in, wants_out = mode in ("input", "all"), mode in ("output", "all")
            assert set(dump.files) == ({"input_0", "input_1", "input_2"} if wants_in else set()) | (
                {"output_0", "output_1", "output_2"} if wants_out else set())
            if wants_in:
                assert dump["input_1"].shape == dump["input_2"].shape == (64,)  # gamma, beta
                np.testing.assert_allclose(dump["input_0"], x, atol=TOL, rtol=TOL)
            if wants_out:
                assert dump["output_1"].shape == dump["output_2"].shape == (16, 1)  # mean, variance
                np.testing.assert_allclose(dump["output_0"], y, atol=TOL, rtol=TOL)
    assert sorted(sess.report.dumps) == sorted(str(tmp_path / f) for f in files)


# ---------------------------------------------------------------------------- overflow
def test_an_injected_inf_is_reported_with_op_step_and_count(bert_encoder, bert_graph, registry, tmp_path):
    config = seed_config(enable_dump_debug=True, dump_path=str(tmp_path), dump_debug_mode="aicore_overflow")
    feeds = bert_feeds(bert_encoder)
    x = next(iter(feeds.values())).copy()
    x[3, 5] = np.inf  # one token's embedding: its whole row of the layer norm becomes NaN
    with scopefusion.Session(graph=bert_graph, config=config, registry=registry) as sess:
        sess.run(bert_encoder.outputs[0], feeds)
        assert sess.report.overflows == []
        sess.run(bert_encoder.outputs[0], {"input_embeddings:0": x})
    first = sess.report.overflows[0]
    assert (first.op, first.type, first.step, first.output) == (EMBEDDINGS_LN, "LayerNorm", 1, 0)
    assert (first.count, first.nan, first.inf, first.size) == (64, 64, 0, 16 * 64)
    assert str(first) == ("bert/embeddings/LayerNorm (LayerNorm) step 1 output 0: 64 of 1024 values not finite "
                          "(0 inf, 64 NaN)")
    mean = next(r for r in sess.report.overflows if r.op == EMBEDDINGS_LN and r.output == 1)
    assert (mean.count, mean.inf) == (1, 1)  # the mean of that row is inf
    assert {r.step for r in sess.report.overflows} == {1}
    assert all(r.type in sess.report.fused_ops.values() for r in sess.report.overflows)
    dumped = tmp_path / "overflow" / "LayerNorm.bert_embeddings_LayerNorm.1.npz"
    assert str(dumped) in sess.report.overflow_dumps
    with np.load(dumped) as arrays:
        assert np.isinf(arrays["input_0"]).sum() == 1 and np.isnan(arrays["output_0"]).sum() == 64


# --------------------------------------------------------------------------- profiling
def test_profiling_writes_per_op_times_and_a_chrome_trace(bert_encoder, bert_graph, registry, tmp_path):
    options = json.dumps({"output": str(tmp_path), "task_trace": "on", "aicpu": "on"})
    config = seed_config(profiling_mode=True, profiling_options=options)
    with scopefusion.Session(graph=bert_graph, config=config, registry=registry) as sess:
        output = sess.run(bert_encoder.outputs[0], bert_encoder.inputs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run_0.op_times.json", "run_0.trace.json"]
    times = json.loads((tmp_path / "run_0.op_times.json").read_text())
    by_name = {f["name"]: f for f in times["fused_ops"]}
    layer_norms = {name for name, kind in sess.report.fused_ops.items() if kind == "LayerNorm"}
    # Grappler merges computations that are the same (the fixture's query, key and value layers share
    # their weights), so not every fused op need run; every layer norm does
    assert layer_norms <= set(by_name) <= set(sess.report.fused_ops) and len(layer_norms) == 7
    assert all(f["nodes"] > 0 and f["duration_us"] >= 0 for f in by_name.values())
    assert by_name[EMBEDDINGS_LN]["type"] == "LayerNorm" and "LayerNorm" in times["op_types"]
    assert times["total_us"] > 0 and times["step"] == 0
    ops = {n["node"]: n["op"] for n in times["nodes"]}
    unfused = set(ops.values()) - set(sess.report.fused_ops.values())  # ops no pass fuses are timed too
    assert {"Reshape", "Transpose"} <= unfused, sorted(unfused)
    trace = json.loads((tmp_path / "run_0.trace.json").read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == len(times["nodes"])
    assert {e["args"].get("fused_op") for e in spans if e["cat"] == "fused"} == set(by_name)
    np.testing.assert_allclose(output, plain_run(bert_graph, bert_encoder.outputs[0], bert_encoder.inputs),
                               atol=TOL, rtol=TOL)


# ---------------------------------------------------------------- use_off_line, graph_run_mode
def test_use_off_line_false_fuses_nothing(bert_encoder, bert_graph, registry):
    with scopefusion.Session(graph=bert_graph, config=seed_config(use_off_line=False), registry=registry) as sess:
        output = sess.run(bert_encoder.outputs[0], bert_encoder.inputs)
        with pytest.raises((KeyError, ValueError)):
            sess.run(EMBEDDINGS_LN)  # no fused op of that name: TensorFlow's own error
    assert sess.fused_graph_def is None and sess.report.fusion is None and sess.report.fused_ops == {}
    assert sess.report.notes == ["use_off_line = False: the graph runs unfused"]
    np.testing.assert_allclose(output, plain_run(bert_graph, bert_encoder.outputs[0], bert_encoder.inputs),
                               atol=1e-6, rtol=1e-6)


class FoldedTanhPass(PatternFusionBasePass):
    """Tanh -> FoldedTanh; marked unsafe for training, as batch-norm folding is."""

    training_safe = False

    def define_patterns(self):
        return [OpPattern("FoldedTanh", op("Tanh", "$x", label="tanh"))]

    def fusion(self, match):
        return FusedOp("FoldedTanh", inputs=["x"], attrs={"T": match.node("tanh").attr["T"].type})


FOLDED_TANH = FusedOpDef("FoldedTanh", inputs=(TensorArg("x", type_attr="T"),),
                         outputs=(TensorArg("y", type_attr="T"),), attrs=(AttrDef("T", "type"),),
                         reference=lambda x, *, T: (tf.tanh(x),))


@pytest.mark.parametrize("mode", [0, 1])
def test_graph_run_mode_1_skips_and_reports_passes_unsafe_for_training(bert_encoder, bert_graph, mode):
    registry = registry_with([FoldedTanhPass], [FOLDED_TANH], autoload=False)
    with scopefusion.Session(graph=bert_graph, config=seed_config(graph_run_mode=mode), registry=registry) as sess:
        output = sess.run(bert_encoder.outputs[0], bert_encoder.inputs)
    pass_report = sess.report.fusion.pass_report("FoldedTanhPass")
    if mode == 1:
        assert "FoldedTanhPass" in sess.report.training_skipped
        assert pass_report.switch == "off (training: the pass is not safe for training)" and not pass_report.ran
        assert "FoldedTanh" not in fused_types(sess)
    else:
        assert sess.report.training_skipped == []
        assert sess.report.fused_ops["bert/pooler/dense/Tanh"] == "FoldedTanh"
    assert fused_types(sess).count("LayerNorm") == 7
    np.testing.assert_allclose(output, plain_run(bert_graph, bert_encoder.outputs[0], bert_encoder.inputs),
                               atol=TOL, rtol=TOL)


# -------------------------------------------------------------------------- bad options
BAD_OPTIONS = {
    "dump_mode": (dict(enable_dump=True, dump_path="<tmp>", dump_mode="everything"), "'everything'"),
    "enable_scope_fusion_passes": (dict(enable_scope_fusion_passes="ScopeLayerNormPas"), "ScopeLayerNormPas"),
    "fusion_switch_file": (dict(fusion_switch_file="<tmp>/missing.cfg"), "missing.cfg"),
    "profiling_options": (dict(profiling_mode=True, profiling_options='{"task_trace": "on"}'), "task_trace"),
    "dump_path": (dict(enable_dump=True, dump_path="<tmp>/absent"), "absent"),
}


@pytest.mark.parametrize("option", list(BAD_OPTIONS))
def test_a_bad_option_is_one_line_at_construction(bert_graph, registry, tmp_path, option):
    params, given = BAD_OPTIONS[option]
    params = {k: v.replace("<tmp>", str(tmp_path)) if isinstance(v, str) else v for k, v in params.items()}
    version = bert_graph.version
    with pytest.raises(SessionOptionError) as caught:
        scopefusion.Session(graph=bert_graph, config=seed_config(**params), registry=registry)
    message = str(caught.value)
    assert "\n" not in message and caught.value.option == option
    assert message.startswith(f"NpuOptimizer option {option}: ") and given in message and "allowed" in message
    assert bert_graph.version == version


def test_options_only_a_device_uses_are_accepted_and_listed_as_not_acted_on(bert_encoder, bert_graph, registry):
    config = seed_config(precision_mode="force_fp32", op_debug_level=2, enable_scope_fusion_passes="ScopeClipBoxesPass",
                         input_shape="input_embeddings:-1,64", dynamic_dims="16;32", dynamic_node_type=1)
    with scopefusion.Session(graph=bert_graph, config=config, registry=registry) as sess:
        assert sess.report.acted_on == ["use_off_line", "enable_scope_fusion_passes"]
        assert sess.report.not_acted_on == ["precision_mode", "op_debug_level", "input_shape", "dynamic_dims",
                                            "dynamic_node_type"]
        assert sess.options.precision_mode == "force_fp32" and sess.options.dynamic_dims == ((16,), (32,))
        sess.run(bert_encoder.outputs[0], bert_encoder.inputs)
    report = json.loads(json.dumps(sess.report.to_dict()))
    assert report["given"]["op_debug_level"] == 2 and report["fusions"] == 1
    assert len(report["fusion"]["passes"]) == len(sess.report.fusion.passes)


def test_a_fetch_that_is_neither_in_the_graph_nor_a_fused_op_is_named(bert_graph, registry):
    with scopefusion.Session(graph=bert_graph, config=seed_config(), registry=registry) as sess, \
            pytest.raises(scopefusion.ScopeFusionError, match=r"fetch 'bert/embeddings/LayerNom': the graph has "
                                                             r"no op or tensor of that name.*LayerNorm"):
        sess.run("bert/embeddings/LayerNom")


# --------------------------------------------------------------- variables and Saver
def unfrozen_encoder_block(use_resource: bool):
    """A dense layer and a tf_slim layer norm whose variables live in the graph (and in its scopes)."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [4, 8], name="x")
        with tf1.variable_scope("block", use_resource=use_resource):
            w = tf1.get_variable("kernel", [8, 8])
            b = tf1.get_variable("bias", [8], initializer=tf1.random_normal_initializer(seed=1))
            h = tf.nn.bias_add(tf.matmul(x, w), b)
            y = tf_slim.layers.layer_norm(h, begin_norm_axis=-1, begin_params_axis=-1)
        out = tf.identity(y, name="out")
        init = tf1.global_variables_initializer()
        saver = tf1.train.Saver()
    return graph, x, out, init, saver


@pytest.mark.parametrize("use_resource", [True, False], ids=["resource variables", "reference variables"])
def test_variables_initializers_and_saver_work_on_the_fused_graph(registry, tmp_path, use_resource):
    graph, x, out, init, saver = unfrozen_encoder_block(use_resource)
    feed = np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32)
    config = seed_config(graph_run_mode=0)
    with scopefusion.Session(graph=graph, config=config, registry=registry) as sess:
        sess.run(init)
        first = sess.run({"out": out, "same": [out, "out:0"], "op": out.op}, {x: feed})
        path = saver.save(sess, str(tmp_path / "model"))
        assert out.eval({x: feed}).shape == (4, 8)  # the default session
        assert sess.report.fusions == 1
        with graph.as_default():
            doubled = tf.identity(out * 2.0, name="doubled")  # the graph changed: fused again
        np.testing.assert_array_equal(sess.run(doubled, {x: feed}), 2.0 * first["out"])  # variables carried over
        assert sess.report.fusions == 2
        mean = sess.run("block/LayerNorm/moments/mean:0", {x: feed})  # a new fetch: fused again, keeping it
        assert sess.report.fusions == 3 and mean.shape == (4, 1)
    assert sess.report.fused_ops == {"block/LayerNorm": "LayerNorm", "block/BiasAdd": "MatMulBiasAdd"}
    assert first["op"] is None and first["same"][1] is not None
    np.testing.assert_array_equal(first["same"][0], first["out"])
    with scopefusion.Session(graph=graph, config=config, registry=registry) as restored:
        saver.restore(restored, path)
        again = restored.run(out, {x: feed})
    np.testing.assert_array_equal(again, first["out"])
    with tf1.Session(graph=graph, config=plain_config()) as plain:
        saver.restore(plain, path)
        expected, expected_mean = plain.run([out, "block/LayerNorm/moments/mean:0"], {x: feed})
    np.testing.assert_allclose(first["out"], expected, atol=TOL, rtol=TOL)
    np.testing.assert_allclose(mean, expected_mean, atol=TOL, rtol=TOL)
    with pytest.raises(RuntimeError, match="closed Session"):
        sess.run(out, {x: feed})
