"""scopefusion.Session with mixed computation (seed 003): ``mix_compile_mode``, ``in_out_pair`` and
``in_out_pair_flag`` place the graph as ``fuse()`` and ``run`` do, only device nodes are fused, and
the session computes what a plain ``tf.compat.v1.Session`` does."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig

import scopefusion
from scopefusion.core.options import SessionOptionError
from tests.helpers.session_configs import imported, npu_config

tf1 = tf.compat.v1
TOL = 1e-5
EMBEDDINGS_LN = "bert/embeddings/LayerNorm"


def mixed_config(**params) -> tf1.ConfigProto:
    """Seed 003's configuration (``use_off_line``, ``mix_compile_mode``), plus ``params``."""
    return npu_config(mix_compile_mode=True, **params)



def ln_output(graph_def, scope: str) -> str:
    """The node of ``scope`` that nodes outside it read."""
    inside = {n.name for n in graph_def.node if n.name.startswith(scope + "/")}
    (name,) = {i.split(":")[0] for n in graph_def.node if n.name not in inside for i in n.input
               if not i.startswith("^") and i.split(":")[0] in inside}
    return name


def plain_run(graph: tf.Graph, fetches, feeds):
    config = tf1.ConfigProto()
    config.graph_options.rewrite_options.remapping = RewriterConfig.OFF  # as the seeds' configurations
    with tf1.Session(graph=graph, config=config) as sess:
        return sess.run(fetches, feeds)


@pytest.fixture(scope="module")
def host_range(bert_encoder) -> str:
    """The embeddings' layer norm, from its input to its output, as an ``in_out_pair``."""
    return str([[["bert/embeddings/add"], [ln_output(bert_encoder.graph_def, EMBEDDINGS_LN)]]])


def test_a_host_range_stays_unfused_and_the_outputs_match(bert_encoder, registry, host_range):
    graph = imported(bert_encoder.graph_def)
    config = mixed_config(in_out_pair_flag=False, in_out_pair=host_range)
    with scopefusion.Session(graph=graph, config=config, registry=registry) as sess:
        output = sess.run(bert_encoder.outputs[0], bert_encoder.inputs)
        fused = sess.fused_graph_def
    # the range stays on the host: its layer norm is not fused, its nodes are all still there
    assert EMBEDDINGS_LN not in sess.report.fused_ops
    kept = {n.name for n in fused.node}
    host = {h.name for h in sess.report.placement.host}
    assert "bert/embeddings/add" in host and ln_output(bert_encoder.graph_def, EMBEDDINGS_LN) in host
    assert {n for n in host if n.startswith(EMBEDDINGS_LN + "/")} <= kept
    assert not any(name in host for name in sess.report.fused_ops)
    # the other six layer norms are on the device and fused
    assert sorted(sess.report.fused_ops.values()).count("LayerNorm") == bert_encoder.layer_norms - 1 == 6
    assert sess.report.acted_on == ["use_off_line", "mix_compile_mode", "in_out_pair_flag", "in_out_pair"]
    expected = plain_run(graph, bert_encoder.outputs[0], bert_encoder.inputs)
    np.testing.assert_allclose(output, expected, atol=TOL, rtol=TOL)
    # the same placement as fuse() and partition(): one implementation
    placed = scopefusion.partition(bert_encoder.graph_def, registry=registry, in_out_pair=host_range,
                                   in_out_pair_flag=False)
    assert {h.name for h in placed.host} == host
    result = scopefusion.fuse(bert_encoder.graph_def, registry=registry, mix_compile_mode=True,
                              in_out_pair=host_range, in_out_pair_flag=False)
    fused_by_run = {f.name for f in result.report.fused}
    assert fused_by_run >= set(sess.report.fused_ops) and not fused_by_run & host


def test_without_mix_compile_mode_the_whole_graph_is_fused(bert_encoder, registry):
    graph = imported(bert_encoder.graph_def)
    config = mixed_config()
    config.graph_options.rewrite_options.custom_optimizers[0].parameter_map["mix_compile_mode"].b = False
    with scopefusion.Session(graph=graph, config=config, registry=registry) as sess:
        sess.run(bert_encoder.outputs[0], bert_encoder.inputs)
    assert EMBEDDINGS_LN in sess.report.fused_ops and sess.report.placement is None


def test_in_out_pair_without_mix_compile_mode_is_refused(host_range):
    config = mixed_config(in_out_pair=host_range)
    config.graph_options.rewrite_options.custom_optimizers[0].parameter_map["mix_compile_mode"].b = False
    with pytest.raises(SessionOptionError, match="in_out_pair is set but mix_compile_mode = False"):
        scopefusion.Session(graph=tf.Graph(), config=config)


def test_a_device_range_fuses_inside_it_only(bert_encoder, registry, host_range):
    graph = imported(bert_encoder.graph_def)
    config = mixed_config(in_out_pair=host_range)  # in_out_pair_flag True: only the range on the device
    with scopefusion.Session(graph=graph, config=config, registry=registry) as sess:
        output = sess.run(bert_encoder.outputs[0], bert_encoder.inputs)
    ((name, op_type),) = sess.report.fused_ops.items()  # the range's layer norm, and nothing else
    assert op_type == "LayerNorm" and name.startswith(EMBEDDINGS_LN)
    np.testing.assert_allclose(output, plain_run(graph, bert_encoder.outputs[0], bert_encoder.inputs),
                               atol=TOL, rtol=TOL)
