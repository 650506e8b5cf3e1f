"""Shapes for verification and shapes declared in the output graph are two options: ``--verify-shape``
changes only what verification feeds, ``--input_shape`` declares the shapes on the output's placeholders."""
from __future__ import annotations

import pytest

from scopefusion.cli import main
from scopefusion.core.graph.io import load_model, save_graph
from scopefusion.testing import graph_from_function


@pytest.fixture(scope="module")
def dynamic_model(tmp_path_factory):
    import tensorflow as tf

    def model(x):
        return tf.nn.gelu(x * 2.0)

    path = tmp_path_factory.mktemp("m") / "dyn.pb"
    save_graph(graph_from_function(model, tf.TensorSpec([None, 8], tf.float32, "x")), path)
    return path


def _placeholder_shape(path):
    (node,) = [n for n in load_model(path).graph_def.node if n.op == "Placeholder"]
    return [d.size for d in node.attr["shape"].shape.dim]


def test_the_hint_for_unknown_dimensions_names_verify_shape(dynamic_model, tmp_path, capsys):
    assert main(["run", str(dynamic_model), "-o", str(tmp_path / "o.pb"), "--verify", "--no-hints"]) == 0
    err = capsys.readouterr().err
    assert "input x: unknown dimensions set to 2: [2, 8]" in err and "with --verify-shape" in err
    assert "--input_shape" not in err


def test_verify_shape_leaves_the_output_graph_as_it_was(dynamic_model, tmp_path, capsys):
    out = tmp_path / "o.pb"
    assert main(["run", str(dynamic_model), "-o", str(out), "--verify", "--verify-shape", "x:5,8"]) == 0
    assert "verified" in capsys.readouterr().out
    assert _placeholder_shape(out) == [-1, 8]


def test_input_shape_declares_the_shape_on_the_output(dynamic_model, tmp_path, capsys):
    out = tmp_path / "o.pb"
    assert main(["run", str(dynamic_model), "-o", str(out), "--input_shape", "x:3,8", "--verify"]) == 0
    capsys.readouterr()
    assert _placeholder_shape(out) == [3, 8]


def test_verify_takes_verify_shape_and_still_the_older_input_shape(dynamic_model, tmp_path, capsys):
    out = tmp_path / "o.pb"
    assert main(["run", str(dynamic_model), "-o", str(out)]) == 0
    for flag in ("--verify-shape", "--input_shape"):
        assert main(["verify", str(dynamic_model), str(out), flag, "x:4,8"]) == 0
        assert "unknown dimensions" not in capsys.readouterr().err


def test_a_bad_verify_shape_is_named_as_such(dynamic_model, tmp_path, capsys):
    assert main(["run", str(dynamic_model), "-o", str(tmp_path / "o.pb"), "--verify", "--verify-shape", "x"]) != 0
    assert "--verify-shape" in capsys.readouterr().err
