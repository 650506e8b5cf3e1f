"""``scopefusion explain``: every pass's verdict on one scope or node of a real model."""
from __future__ import annotations

import json

import pytest
from tests.helpers.freeze import freeze_function

from scopefusion.cli import main
from scopefusion.explain import explain


@pytest.fixture(scope="module")
def keras_norms(tmp_path_factory):
    """Two tf_keras LayerNormalizations (small epsilon: the moments form), the first without beta."""
    import tensorflow as tf
    import tf_keras

    ln = tf_keras.layers.LayerNormalization(center=False, epsilon=1e-6, name="ln")
    ln2 = tf_keras.layers.LayerNormalization(epsilon=1e-6, name="ln2")
    spec = tf.TensorSpec([2, 5, 16], tf.float32, "x")
    graph_def, _, _ = freeze_function(lambda x: ln2(tf.tanh(ln(x))), {"x": spec}, autograph=False)
    path = tmp_path_factory.mktemp("explain") / "norms.pb"
    path.write_bytes(graph_def.SerializeToString())
    return path


def _verdict(result, name):
    (v,) = [v for v in result.verdicts if v.name == name]
    return v


def test_a_fused_layer_norm_feature_by_feature_and_what_it_became(keras_norms):
    result = explain(str(keras_norms), "ln2")
    assert (result.kind, result.scope) == ("scope", "ln2")
    ln = _verdict(result, "ScopeLayerNormPass")
    assert (ln.verdict, ln.default) == ("fused", "general")
    holding = [c for c in ln.patterns if c.holds]
    assert holding and all(f.ok for f in holding[0].features)
    assert any(f.wanted == "exactly 1 Sub node(s)" and f.found == "1" for f in holding[0].features)
    missing = [c for c in ln.patterns if not c.holds]  # the others say what they lack
    assert any(not f.ok and f.wanted.startswith("scope name 'LayerNorm'") and f.found == "name 'ln2'"
               for c in missing for f in c.features)
    (made,) = ln.produced
    assert (made.type, made.name, made.inputs[0]) == ("LayerNorm", "ln2", "Tanh")
    assert made.attrs["T"] == "float32" and made.attrs["epsilon"] == "1e-06"
    assert made.outputs == ["ln2/batchnorm/add_1", "ln2/moments/mean", "ln2/moments/variance"]
    inst = _verdict(result, "ScopeInstanceNormPass")
    assert inst.verdict == "refused" and inst.default == "needs --enable_scope_fusion_passes"
    assert inst.reason.startswith("at 'ln2/moments': rejected by the pass: not an instance normalization")
    matmul = _verdict(result, "MatMulBiasAddFusionPass")
    assert matmul.verdict == "no match" and matmul.attempts[0].failure == "no node here is a root: BiasAdd wanted"


def test_a_refused_layer_norm_and_a_graph_pattern_failing_step(keras_norms, capsys):
    result = explain(str(keras_norms), "ln", pass_name="ScopeLayerNormPass")
    (v,) = result.verdicts
    assert v.verdict == "refused" and "no beta (center=False)" in v.reason and v.produced == []
    gelu = explain(str(keras_norms), "ln/batchnorm/mul_1", pass_name="GeluFusionPass")
    assert gelu.kind == "node" and gelu.scope == "ln/batchnorm"
    (v,) = gelu.verdicts
    assert v.verdict == "no match" and {a.pattern for a in v.attempts} == {"GeluErf", "GeluTanh"}
    assert all(a.node == "ln/batchnorm/mul_1" and "expected 0.5" in a.failure for a in v.attempts)

    assert main(["explain", str(keras_norms), "ln/batchnorm/add_1", "--pass", "LayerNormFusionPass"]) == 0
    text = capsys.readouterr().out
    assert "LayerNormFusionPass (graph pass, on): refused: rejected by the pass: no beta (center=False)" in text
    assert "  pattern LayerNormWithoutOffset at 'ln/batchnorm/add_1' matches" in text


def test_the_command_prints_json_and_fails_in_one_line(keras_norms, capsys):
    assert main(["explain", str(keras_norms), "ln2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["place"] == "ln2" and {v["name"] for v in data["verdicts"]} >= {"ScopeLayerNormPass", "GeluFusionPass"}
    assert main(["explain", str(keras_norms), "ln/batchnrm"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["scopefusion: error: no scope or node named 'ln/batchnrm' in the model; close matches: "
                   "'ln/batchnorm', 'ln2/batchnorm', 'ln/batchnorm/mul', 'ln/batchnorm/add', 'ln/batchnorm/Neg'"]
    assert main(["explain", str(keras_norms), "ln", "--pass", "ScopeLayerNormPas"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("scopefusion: error: unknown pass 'ScopeLayerNormPas' (did you mean 'ScopeLayerNormPass', ")
