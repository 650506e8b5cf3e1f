"""Loading and saving models: format detection, SavedModels, atomic writes."""
from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest
from google.protobuf import text_format

import scopefusion
from scopefusion import GraphLoadError, load_model, save_graph
from scopefusion.core.verify.execute import run_graph_def


def test_binary_and_text_are_detected_from_content(tmp_path, bert_encoder):
    pb = tmp_path / "model.bin"
    pb.write_bytes(bert_encoder.graph_def.SerializeToString())
    txt = tmp_path / "model.pb"  # text despite the extension
    txt.write_text(text_format.MessageToString(bert_encoder.graph_def))
    a, b = load_model(pb), load_model(txt)
    assert (a.format, b.format) == ("pb", "pbtxt")
    assert a.graph_def == b.graph_def == bert_encoder.graph_def


@pytest.mark.parametrize("content", [b"\x00\xff garbage \x13\x37" * 10, b"node { name: 'x' op: }", b"hello world"])
def test_malformed_files_give_one_clear_error(tmp_path, content):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(content)
    with pytest.raises(GraphLoadError, match=r"bad\.pb: not a GraphDef"):
        load_model(bad)


def test_missing_path_and_non_savedmodel_directory(tmp_path):
    with pytest.raises(GraphLoadError, match="no such file"):
        load_model(tmp_path / "nope.pb")
    with pytest.raises(GraphLoadError, match="not a SavedModel"):
        load_model(tmp_path)


def test_save_is_atomic_and_keeps_nothing_behind_on_failure(tmp_path, bert_encoder, monkeypatch):
    dest = tmp_path / "out.pb"
    dest.write_bytes(b"previous")
    save_graph(bert_encoder.graph_def, dest)
    assert load_model(dest).graph_def == bert_encoder.graph_def
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.pb"]
    save_graph(bert_encoder.graph_def, tmp_path / "out.pbtxt")
    assert load_model(tmp_path / "out.pbtxt").format == "pbtxt"

    def failing_replace(src, dst):
        raise OSError("disk full")

    before = dest.read_bytes()
    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        save_graph(bert_encoder.graph_def, dest)
    assert dest.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.pb", "out.pbtxt"]


def test_saved_model_signature_is_frozen_and_fused(tmp_path):
    import tensorflow as tf

    class Encoder(tf.Module):
        def __init__(self):
            super().__init__()
            rng = np.random.default_rng(0)
            self.kernel = tf.Variable(rng.normal(size=(8, 8)).astype(np.float32))
            self.gamma = tf.Variable(rng.uniform(0.5, 1.5, size=(8,)).astype(np.float32))
            self.beta = tf.Variable(rng.normal(size=(8,)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32, name="features")])
        def __call__(self, features):
            h = tf.matmul(features, self.kernel)
            # the ops tf_slim.layers.layer_norm emits, written in TF2 style
            with tf.name_scope("LayerNorm"):
                mean, variance = tf.nn.moments(h, [1], keepdims=True)
                y = tf.nn.batch_normalization(h, mean, variance, self.beta, self.gamma, 1e-6)
            return {"normalized": tf.nn.relu(y)}

    path = tmp_path / "saved"
    module = Encoder()
    tf.saved_model.save(module, str(path), signatures=module.__call__.get_concrete_function())
    loaded = load_model(path)
    assert loaded.format == "saved_model"
    assert loaded.inputs == ["features:0"]
    assert len(loaded.outputs) == 1
    result = scopefusion.fuse(path, emit="tf")
    assert result.report.fused_count("LayerNorm") == 1
    node = next(n for n in result.fused_graph_def.node if n.op == "LayerNorm")
    assert node.attr["epsilon"].f == pytest.approx(1e-6)
    feeds = {"features:0": np.random.default_rng(1).normal(size=(3, 8)).astype(np.float32)}
    want = run_graph_def(loaded.graph_def, feeds, loaded.outputs)
    got = run_graph_def(result.graph_def, feeds, loaded.outputs)
    assert np.max(np.abs(want[0] - got[0])) <= 1e-4


def test_fusing_never_modifies_the_input_file(tmp_path, bert_encoder):
    src = tmp_path / "in.pb"
    src.write_bytes(bert_encoder.graph_def.SerializeToString())
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    result = scopefusion.fuse(src)
    assert result.report.fused_count("LayerNorm") == 7
    assert hashlib.sha256(src.read_bytes()).hexdigest() == digest
