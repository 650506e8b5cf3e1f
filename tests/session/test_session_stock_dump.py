"""``enable_dump`` in ``scopefusion.Session`` dumps every fused op, those whose type is a stock
TensorFlow op too: GPT-2's hand-written softmax becomes the stock ``Softmax``, and its tensors are
dumped like any fused op's."""
from __future__ import annotations

import numpy as np
import tensorflow as tf
from tests.models.softmax_models import gpt2_attention
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig

import scopefusion

tf1 = tf.compat.v1


def test_stock_op_results_are_dumped(registry, tmp_path):
    model = gpt2_attention()
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(model.graph_def, name="")
    config = tf1.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["enable_dump"].b = True
    custom_op.parameter_map["dump_path"].s = str(tmp_path).encode()
    custom_op.parameter_map["dump_mode"].s = b"all"
    switch = tmp_path / "switch.cfg"  # the softmax pass alone: the attention pass would take the softmaxes in
    switch.write_text("AttentionFusionPass:off\n")
    custom_op.parameter_map["fusion_switch_file"].s = str(switch).encode()
    config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
    with scopefusion.Session(graph=graph, config=config, registry=registry) as sess:
        outputs = sess.run(model.outputs, model.inputs)
    softmaxes = sorted(name for name, op_type in sess.report.fused_ops.items() if op_type == "Softmax")
    assert len(softmaxes) == model.expected == 2
    files = {p.name for p in tmp_path.iterdir()}
    for name in softmaxes:
        stem = f"Softmax.{name.replace('/', '_')}.0.npz"
        assert stem in files
        with np.load(tmp_path / stem) as dump:
            assert set(dump.files) == {"input_0", "output_0"}
            logits, probabilities = dump["input_0"], dump["output_0"]
        expected = np.exp(logits - logits.max(-1, keepdims=True))
        np.testing.assert_allclose(probabilities, expected / expected.sum(-1, keepdims=True), atol=1e-6)
    with tf1.Session(graph=graph) as plain:
        for got, want in zip(outputs, plain.run(model.outputs, model.inputs), strict=True):
            np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
