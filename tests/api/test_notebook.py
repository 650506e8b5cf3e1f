"""The Python API as a notebook uses it: short reprs, a rich display, models still in the process
(Keras 3 and tf_keras models, tf.function, concrete functions, tf.Module), ``scopefusion.load``, and a
transformers ``save_pretrained(saved_model=True)`` folder found and named after the model."""
from __future__ import annotations

import numpy as np
import pytest

import scopefusion
from scopefusion.cli import EXAMPLE_MODEL, main


def test_the_repr_of_a_result_is_a_short_summary_not_the_graph():
    result = scopefusion.fuse(str(EXAMPLE_MODEL))
    text = repr(result)
    assert text.startswith("<FuseResult ") and str(EXAMPLE_MODEL) in text
    assert "234 nodes -> 129" in text and "29 fused (MatMulBiasAdd 13, LayerNorm 5, AddLayerNorm 4" in text
    assert "ScaledDotProductAttention 2" in text and "1 refused" in text
    assert "graph in the fused form" in text
    assert repr(result.report) == f"<FusionReport {result.report.summary()}>"
    assert len(text) < 400


def test_the_repr_of_a_large_model_stays_short(tmp_path):
    """A 10k-node graph: the repr is a line, whatever the graph's size (the issue's bound: 2,000)."""
    from scopefusion.core.graph.io import load_model

    graph = load_model(EXAMPLE_MODEL).graph_def
    copy = type(graph)()
    copy.CopyFrom(graph)
    for k in range(44):  # 45 renamed copies of the 234-node encoder side by side
        for node in graph.node:
            new = copy.node.add()
            new.CopyFrom(node)
            new.name = f"copy{k}/{node.name}"
            new.input[:] = [(("^" if i.startswith("^") else "") + f"copy{k}/" + i.lstrip("^")) for i in node.input]
    assert len(copy.node) > 10_000
    text = repr(scopefusion.fuse(copy))
    assert "<GraphDef>" in text and "fused (" in text and len(text) < 2000


def test_a_notebook_shows_the_run_as_the_html_page():
    page = scopefusion.fuse(str(EXAMPLE_MODEL))._repr_html_()
    assert page.lstrip().startswith("<!DOCTYPE html>") and "LayerNorm" in page


def test_a_keras_3_model_in_the_process_is_frozen_and_fused():
    keras = pytest.importorskip("keras")
    x = keras.Input((8,), name="x")
    y = keras.layers.LayerNormalization()(keras.layers.Dense(8, activation="gelu")(x))
    model = keras.Model(x, y, name="tiny")
    result = scopefusion.fuse(model, emit="tf")
    assert result.source == "<Keras model tiny>" and result.report.inputs == ["x:0"]
    assert result.report.fused_count("LayerNorm") == 1 and result.report.fused_count("Gelu") == 1
    scopefusion.verify(scopefusion.load(model).graph_def, result.fused_graph_def).assert_ok()


def test_a_keras_model_with_a_dict_of_inputs():
    keras = pytest.importorskip("keras")
    a, b = keras.Input((4,), name="a"), keras.Input((4,), name="b")
    model = keras.Model({"a": a, "b": b}, keras.layers.LayerNormalization()(keras.layers.Add()([a, b])))
    loaded = scopefusion.load(model)
    assert loaded.inputs == ["a:0", "b:0"] and loaded.format == "in_process"
    assert scopefusion.fuse(model).report.fused_count("LayerNorm") == 1


def test_a_tf_keras_model_tf_function_concrete_function_and_module():
    import tensorflow as tf
    import tf_keras

    x = tf_keras.Input((8,), name="a")
    assert scopefusion.fuse(tf_keras.Model(x, tf_keras.layers.LayerNormalization()(x))).report.fused_count(
        "LayerNorm") == 1
    gelu = tf.function(lambda t: tf.nn.gelu(t), input_signature=[tf.TensorSpec([2, 4], tf.float32, "t")])
    assert scopefusion.fuse(gelu).report.fused_count("Gelu") == 1
    assert scopefusion.fuse(gelu.get_concrete_function()).report.fused_count("Gelu") == 1

    class Block(tf.Module):
        def __init__(self):
            super().__init__(name="block")
            self.w = tf.Variable(np.eye(4, dtype=np.float32))

        @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
        def __call__(self, t):
            return tf.nn.gelu(t @ self.w)

    result = scopefusion.fuse(Block())
    assert result.source == "<tf.Module block>" and result.report.fused_count("Gelu") == 1


def test_what_cannot_be_frozen_says_how_to_give_it():
    import tensorflow as tf

    with pytest.raises(scopefusion.ScopeFusionError, match="it has no input_signature; give one"):
        scopefusion.fuse(tf.function(lambda t: t))
    with pytest.raises(scopefusion.ScopeFusionError, match="cannot fuse a object; give a path .* a Keras model"):
        scopefusion.fuse(object())


def test_a_save_pretrained_folder_is_found_and_the_output_named_after_it(tmp_path, monkeypatch, capsys):
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=16)
    model = transformers.TFBertModel(config)
    model(model.dummy_inputs)
    folder = tmp_path / "tiny-bert"
    model.save_pretrained(str(folder), saved_model=True)
    assert (folder / "saved_model" / "1" / "saved_model.pb").is_file()
    assert scopefusion.load(folder).source.endswith("saved_model/1")
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(folder), "--no-hints"]) == 0
    assert (tmp_path / "tiny-bert_fused.pb").is_file()
    assert main(["run", str(folder / "saved_model" / "1"), "-o", "-", "--output-format", "pbtxt"]) == 0
    capsys.readouterr()
    monkeypatch.chdir(tmp_path / "tiny-bert")
    assert main(["run", str(folder / "saved_model" / "1"), "--no-hints"]) == 0
    assert (tmp_path / "tiny-bert" / "tiny-bert_fused.pb").is_file()


def test_a_folder_with_two_saved_models_names_them(tmp_path):
    import tensorflow as tf

    for name in ("a", "b"):
        module = tf.Module()
        module.f = tf.function(lambda t: t + 1.0, input_signature=[tf.TensorSpec([2], tf.float32)])
        tf.saved_model.save(module, str(tmp_path / "both" / name), signatures=module.f)
    with pytest.raises(scopefusion.GraphLoadError, match="holds 2 SavedModels .*both/a, .*both/b.*give the directory"):
        scopefusion.load(tmp_path / "both")
    (tmp_path / "none").mkdir()
    with pytest.raises(scopefusion.GraphLoadError, match="a directory but not a SavedModel"):
        scopefusion.load(tmp_path / "none")
