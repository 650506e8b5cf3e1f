"""tensorflow-addons layers: ``GroupNormalization`` -> ``GroupNorm``, ``InstanceNormalization``
(a group per channel) -> ``GroupNorm`` with ``num_groups`` = channels, or ``InstanceNorm``
when ``ScopeInstanceNormPass`` is enabled (it runs first, as for tf_slim's instance norm), and
``LayerNormLSTMCell`` unrolled over three steps -> one ``LayerNorm`` per norm and step (its
three tf_keras layer norms each called once per step, in one scope each).

The graphs are built by ``tests/models/tfa_graphs.py`` in a process of its own (tensorflow-addons needs
tf_keras as ``tf.keras``, chosen before TensorFlow is imported).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.pass_checks import REGISTRY, op_count, pass_report

import scopefusion
from scopefusion.core.graph.io import load_model

BUILDER = Path(__file__).resolve().parents[2] / "models" / "tfa_graphs.py"


@pytest.fixture(scope="module")
def tfa_models(tmp_path_factory) -> dict[str, dict]:
    out = tmp_path_factory.mktemp("tfa")
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    run = subprocess.run([sys.executable, str(BUILDER), str(out)], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    models = json.loads((out / "models.json").read_text())
    for name, known in models.items():
        known["graph_def"] = load_model(out / f"{name}.pb").graph_def
    return models


def _verify(model: dict, result) -> None:
    shape = ",".join(map(str, model["shape"]))
    check = scopefusion.verify(model["graph_def"], result.fused_graph_def, fused_ops=REGISTRY.fused_ops,
                               input_shapes=f"x:{shape}", runs=2)
    assert check.passed, check.table()


def _nodes(graph_def, op: str) -> list:
    return [n for n in graph_def.node if n.op == op]


def test_group_normalization_is_one_group_norm(tfa_models):
    m = tfa_models["group_normalization"]
    result = scopefusion.fuse(m["graph_def"], registry=REGISTRY)
    (node,) = _nodes(result.fused_graph_def, "GroupNorm")
    assert node.attr["num_groups"].i == m["groups"] == 4
    assert node.attr["epsilon"].f == pytest.approx(m["epsilon"], rel=1e-6)
    assert op_count(result.fused_graph_def, "Mean", "SquaredDifference", "Rsqrt") == 0
    _verify(m, result)


def test_instance_normalization_is_a_group_norm_or_with_the_scope_pass_an_instance_norm(tfa_models):
    m = tfa_models["instance_normalization"]
    result = scopefusion.fuse(m["graph_def"], registry=REGISTRY)
    (node,) = _nodes(result.fused_graph_def, "GroupNorm")
    assert node.attr["num_groups"].i == m["groups"] == 8  # every channel a group
    assert _nodes(result.fused_graph_def, "InstanceNorm") == []
    _verify(m, result)
    enabled = scopefusion.fuse(m["graph_def"], registry=REGISTRY, enable_scope_fusion_passes="ScopeInstanceNormPass")
    assert len(_nodes(enabled.fused_graph_def, "InstanceNorm")) == 1
    assert _nodes(enabled.fused_graph_def, "GroupNorm") == []
    _verify(m, enabled)


def test_layer_norm_lstm_cell_unrolled_is_one_layer_norm_per_norm_and_step(tfa_models):
    m = tfa_models["layer_norm_lstm_cell"]
    graph = m["graph_def"]
    scopes = {n.name.rsplit("/", 1)[0] for n in graph.node if n.op == "FusedBatchNormV3"}
    assert scopes == {"ln_lstm/kernel_norm", "ln_lstm/recurrent_norm", "ln_lstm/state_norm"}
    assert op_count(graph, "FusedBatchNormV3") == m["layer_norms"] == 9  # three calls in each scope
    result = scopefusion.fuse(graph, registry=REGISTRY)
    report = pass_report(result, "ScopeLayerNormPass")
    assert len(report.fused) == 9 and report.refused == []
    # the state norm of each step normalises f * c + i * g: the UB stage's AddLayerNorm takes it with its add
    fused = _nodes(result.fused_graph_def, "LayerNorm") + _nodes(result.fused_graph_def, "AddLayerNorm")
    added = _nodes(result.fused_graph_def, "AddLayerNorm")
    assert len(fused) == 9 and len(added) == 3 and all("state_norm" in n.name for n in added), [n.name for n in added]
    assert all(n.attr["epsilon"].f == pytest.approx(m["epsilon"], rel=1e-6) for n in fused)
    assert op_count(result.fused_graph_def, "FusedBatchNormV3") == 0
    _verify(m, result)
