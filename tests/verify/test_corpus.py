"""A corpus of real models, built with third-party model code and frozen,
fused with all general passes and verified numerically against the original.

* keras-hub ``BertBackbone`` (Keras 3 ``LayerNormalization``),
* Keras applications ``MobileNetV2`` (batch norms: layer-norm look-alikes
  by their ``batchnorm`` scopes),
* tf_slim ``instance_norm`` graphs (look-alikes by their ops),
* the tf_slim BERT-style encoder of ``model_builders`` (tf_slim ``layer_norm``).
"""
from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest
from tests.models.corpus_models import CorpusModel, slim_instance_norm_convnet, slim_instance_norm_sequence
from tests.helpers.pass_checks import NORMS_APART

import scopefusion
from scopefusion.core.graph.index import GraphIndex
from scopefusion.core.verify.verify import VerifyResult, verify


def _fuse(graph_def, registry, emit: str = "fused", switch=None):
    """All general passes (nothing enabled by name): the scope passes (the layer norm's and its
    gradient's, which finds nothing in these inference graphs), then the graph passes (those
    ``switch`` leaves on)."""
    result = scopefusion.fuse(graph_def, registry=registry, emit=emit, fusion_switch_file=switch)
    report = result.report
    assert [p.name for p in _scope_passes(report)] == ["ScopeLayerNormPass", "ScopeLayerNormGradPass"]
    assert report.pass_report("ScopeLayerNormGradPass").matched_scopes == []
    assert all(p.general and p.error is None for p in report.passes)
    GraphIndex(result.graph_def)  # a valid graph
    return result


def _fused_type(node) -> str:
    """A node's fused op type in either form (the TF-runnable form records it in an attribute)."""
    if node.op == "PartitionedCall" and "_scopefusion_op" in node.attr:
        return node.attr["_scopefusion_op"].s.decode()
    return node.op


def _scope_passes(report):
    return [p for p in report.passes if p.engine == "scope"]


def _scope_refusals(report):
    return [r for p in _scope_passes(report) for r in p.refused]


def _assert_nothing_matched(report) -> None:
    """No scope was even a candidate: the scope pass matched, fused and refused nothing
    (graph passes may still fuse, e.g. a classifier's MatMul + BiasAdd)."""
    assert [p.matched_scopes for p in _scope_passes(report)] == [[], []]
    assert report.fused_count("LayerNorm") == 0
    assert _scope_refusals(report) == []


def _verify(model, fused_graph, registry, **kwargs) -> VerifyResult:
    """Random feeds (3 runs) and, separately, the model's own feeds."""
    outputs = model.outputs
    checks = [
        verify(model.graph_def, fused_graph, outputs=outputs, fused_ops=registry.fused_ops, **kwargs),
        verify(model.graph_def, fused_graph, outputs=outputs, fused_ops=registry.fused_ops, feeds=model.inputs),
    ]
    for check in checks:
        check.assert_ok()
        assert [o.name for o in check.outputs] == outputs
        assert all(o.max_abs_error <= 1e-4 and (o.atol, o.rtol) == (1e-4, 1e-4) for o in check.outputs)
    assert checks[0].runs == 3 and checks[1].runs == 1
    return checks[0]


def _default_outputs_are(model, expected: int) -> None:
    from scopefusion.core.verify.verify import default_outputs

    assert len(model.outputs) == expected
    assert sorted(default_outputs(model.graph_def)) == sorted(model.outputs)


# --------------------------------------------------------- keras-hub BERT

#: Per layer norm of a keras-hub BertBackbone (Keras 3 ``LayerNormalization``,
#: i.e. ``keras.ops.layer_normalization``): node name in the layer scope -> op.
KERAS3_LAYER_NORM = {
    "moments/mean": "Mean",
    "moments/StopGradient": "StopGradient",
    "moments/SquaredDifference": "SquaredDifference",
    "moments/variance": "Mean",
    "add": "AddV2",  # variance + epsilon
    "Rsqrt": "Rsqrt",
    "Reshape": "Reshape",  # gamma [hidden] -> [1, 1, hidden]
    "mul": "Mul",  # Rsqrt * gamma
    "mul_2": "Mul",  # x * mul
    "Neg": "Neg",  # -mean
    "mul_1": "Mul",  # Neg * mul
    "Reshape_1": "Reshape",  # beta [hidden] -> [1, 1, hidden]
    "add_1": "AddV2",  # mul_1 + beta
    "add_2": "AddV2",  # mul_2 + add_1: the output
}



def _keras3_layer_norm_scopes(graph_def) -> dict[str, dict[str, object]]:
    """Layer-norm scopes of a frozen Keras 3 model: scope -> {relative name: node}."""
    scopes: dict[str, dict[str, object]] = {}
    for node in graph_def.node:
        m = re.match(r"^(.*/[^/]*layer_norm(?:_\d+)?)/(.+)$", node.name)
        if m:
            scopes.setdefault(m.group(1), {})[m.group(2)] = node
    return scopes


def _const(graph_def, name: str) -> np.ndarray:
    from tensorflow.python.framework import tensor_util

    node = next(n for n in graph_def.node if n.name == name)
    assert node.op == "Const", name
    return tensor_util.MakeNdarray(node.attr["value"].tensor)


def test_keras_hub_bert_inputs_and_outputs(keras_hub_bert: CorpusModel):
    m = keras_hub_bert
    placeholders = {n.name: n for n in m.graph_def.node if n.op == "Placeholder"}
    assert sorted(placeholders) == ["padding_mask", "segment_ids", "token_ids"]
    for name, node in placeholders.items():
        assert [d.size for d in node.attr["shape"].shape.dim] == [2, 16], name
        assert m.inputs[f"{name}:0"].shape == (2, 16)
    assert m.output_keys == ["pooled_output", "sequence_output"]
    _default_outputs_are(m, 2)
    assert m.layer_norms == 5  # embeddings + 2 per transformer layer
    assert not any(n.op in ("VarHandleOp", "ReadVariableOp", "ResourceGather") for n in m.graph_def.node)


def test_keras_hub_bert_layer_norm_structure(keras_hub_bert: CorpusModel):
    """Keras 3 layer norms in keras-hub: scopes named after the layer (``*_layer_norm``), moments,
    then flat ops with no ``batchnorm`` sub-scope (``KERAS3_LAYER_NORM`` above), checked on the graph."""
    g = keras_hub_bert.graph_def
    scopes = _keras3_layer_norm_scopes(g)
    assert len(scopes) == keras_hub_bert.layer_norms == 5
    assert sum(1 for s in scopes if s.endswith("/embeddings_layer_norm_1")) == 1
    assert all(re.search(r"/(embeddings|self_attention|feedforward)_layer_norm_1$", s) for s in scopes)
    for scope, nodes in scopes.items():
        ops = {rel: n.op for rel, n in nodes.items() if n.op not in ("Const", "Identity")}
        assert ops == KERAS3_LAYER_NORM, scope
        assert not any("batchnorm" in rel or n.op == "Sub" for rel, n in nodes.items()), scope
        ins = {rel: [i.replace(scope + "/", "") for i in nodes[rel].input] for rel in ops}
        x = ins["moments/mean"][0]
        assert not x.startswith(scope) and ins["mul_2"] == [x, "mul"]
        assert ins["moments/SquaredDifference"] == [x, "moments/StopGradient"]
        assert ins["add"] == ["moments/variance", "add/y"] and ins["Rsqrt"] == ["add"]
        assert ins["mul"] == ["Rsqrt", "Reshape"] and ins["Neg"] == ["moments/mean"]
        assert ins["mul_1"] == ["Neg", "mul"] and ins["add_1"] == ["mul_1", "Reshape_1"]
        assert ins["add_2"] == ["mul_2", "add_1"]
        for mean in ("moments/mean", "moments/variance"):
            assert nodes[mean].attr["keep_dims"].b
            assert _const(g, f"{scope}/{mean}/reduction_indices").tolist() == [-1]
        assert float(_const(g, f"{scope}/add/y")) == pytest.approx(1e-12, rel=1e-6)
        for reshape in ("Reshape", "Reshape_1"):
            assert _const(g, f"{scope}/{reshape}/shape").tolist() == [1, 1, 64]


def test_keras_hub_bert_verifies_after_fusing_and_nothing_is_wrongly_fused(keras_hub_bert, registry):
    m = keras_hub_bert
    layer_norm_scopes = set(_keras3_layer_norm_scopes(m.graph_def))
    for emit in ("fused", "tf"):
        result = _fuse(m.graph_def, registry, emit=emit)
        report = result.report
        # whatever the scope pass fused must be one of the model's layer norms, as a LayerNorm
        scope_fused = [f for p in _scope_passes(report) for f in p.fused]
        assert all(f.type == "LayerNorm" and set(f.scopes) <= layer_norm_scopes for f in scope_fused)
        assert _scope_refusals(report) == []
        # token ids, segment ids and the padding mask all in [0, 2) for the random runs
        assert m.int_range == (0, 2)
        check = _verify(m, result.graph_def, registry, int_range=m.int_range, runs=3)
        assert [o.shape for o in check.outputs] == [[2, 64], [2, 16, 64]]


def test_keras_hub_bert_layer_norms_are_fused(keras_hub_bert, registry):
    """Keras 3 layer norms (the structure above) are fused: every one, with its attributes."""
    m = keras_hub_bert
    result = _fuse(m.graph_def, registry)
    assert result.report.fused_count("LayerNorm") == m.layer_norms == 5
    fused = result.report.pass_report("ScopeLayerNormPass").fused
    assert sorted(f.name for f in fused) == sorted(_keras3_layer_norm_scopes(m.graph_def))
    assert _scope_refusals(result.report) == []
    for node in (n for n in result.graph_def.node if n.op == "LayerNorm"):
        assert node.attr["begin_norm_axis"].i == -1 and node.attr["begin_params_axis"].i == -1
        assert node.attr["epsilon"].f == pytest.approx(1e-12, rel=1e-6)
    _verify(m, result.graph_def, registry, int_range=m.int_range, runs=3)


# ------------------------------------------------------------ MobileNetV2


def test_mobilenet_v2_batch_norms_are_not_fused(keras_mobilenet_v2, registry):
    m = keras_mobilenet_v2
    _default_outputs_are(m, 1)
    # every BatchNormalization is a tf_slim-like `batchnorm` scope (add, Rsqrt,
    # mul, mul_1, mul_2, sub, add_1) over constant moving statistics: no moments
    scopes = Counter(n.name.rsplit("/", 1)[0] for n in m.graph_def.node if n.op == "Rsqrt")
    assert len(scopes) == m.batch_norms == 52
    assert all(s.endswith("/batchnorm") and count == 1 for s, count in scopes.items())
    ops = Counter(n.op for n in m.graph_def.node)
    assert ops["Rsqrt"] == ops["Sub"] == 52 and ops["SquaredDifference"] == 0
    result = _fuse(m.graph_def, registry)
    _assert_nothing_matched(result.report)
    assert not any(n.op == "LayerNorm" for n in result.graph_def.node)
    check = _verify(m, result.graph_def, registry)
    assert check.outputs[0].shape == [2, 10]


# ------------------------------------------------------ tf_slim instance_norm


def _instance_norm_scopes(graph_def) -> list[str]:
    return sorted(n.name[: -len("/moments/mean")] for n in graph_def.node if n.name.endswith("/moments/mean"))


def test_instance_norm_convnet_is_not_fused(slim_instance_norm_convnet, registry):
    m = slim_instance_norm_convnet
    assert _instance_norm_scopes(m.graph_def) == ["block0/InstanceNorm", "block1/InstanceNorm"]
    assert _const(m.graph_def, "block0/InstanceNorm/moments/mean/reduction_indices").tolist() == [1, 2]
    result = _fuse(m.graph_def, registry)
    _assert_nothing_matched(result.report)
    _verify(m, result.graph_def, registry)


@pytest.fixture(scope="module")
def instance_norm_named_layer_norm() -> CorpusModel:
    """The NHWC conv net with its instance norms in scopes named `LayerNorm`."""
    return slim_instance_norm_convnet(convs=2, channels=16, image_size=16, batch=2, seed=0, norm_scope="LayerNorm")


def test_instance_norm_named_layer_norm_is_refused_for_its_axes(instance_norm_named_layer_norm, registry):
    """Matched by name and ops (Mean x2, SquaredDifference, Rsqrt), but it
    normalises over H and W, not over trailing axes: correctly refused."""
    m = instance_norm_named_layer_norm
    assert _instance_norm_scopes(m.graph_def) == ["block0/LayerNorm", "block1/LayerNorm"]
    result = _fuse(m.graph_def, registry)
    report = result.report
    assert report.pass_report("ScopeLayerNormPass").matched_scopes == ["block0/LayerNorm", "block1/LayerNorm"]
    assert report.fused_count("LayerNorm") == 0
    assert sorted(r.name for r in _scope_refusals(report)) == ["block0/LayerNorm", "block1/LayerNorm"]
    for refusal in _scope_refusals(report):
        assert "reduction axes [1, 2] are not the trailing axes of a rank-4 input" in refusal.reason
    _verify(m, result.graph_def, registry)


@pytest.fixture(scope="module")
def channels_first_instance_norm() -> CorpusModel:
    return slim_instance_norm_sequence(blocks=2, channels=16, length=12, features=8, batch=2, seed=0)


@pytest.fixture(scope="module")
def channels_first_instance_norm_named_layer_norm() -> CorpusModel:
    return slim_instance_norm_sequence(blocks=2, channels=16, length=12, features=8, batch=2, seed=0,
                                       norm_scope="LayerNorm")


def test_channels_first_instance_norm_is_not_fused(channels_first_instance_norm, registry):
    m = channels_first_instance_norm
    assert _instance_norm_scopes(m.graph_def) == ["block0/InstanceNorm", "block1/InstanceNorm"]
    result = _fuse(m.graph_def, registry)
    _assert_nothing_matched(result.report)
    _verify(m, result.graph_def, registry)


def test_channels_first_instance_norm_named_layer_norm_verifies(channels_first_instance_norm_named_layer_norm,
                                                                registry):
    m = channels_first_instance_norm_named_layer_norm
    # [batch, channels, length] normalised over length (the last axis), gamma and beta [1, channels, 1]
    assert _const(m.graph_def, "block0/LayerNorm/moments/mean/reduction_indices").tolist() == [2]
    assert _const(m.graph_def, "block0/LayerNorm/Reshape/shape").tolist() == [1, 16, 1]
    for emit in ("fused", "tf"):
        _verify(m, _fuse(m.graph_def, registry, emit=emit).graph_def, registry)


def test_channels_first_instance_norm_named_layer_norm_is_not_fused(channels_first_instance_norm_named_layer_norm,
                                                                    registry):
    """gamma and beta [1, C, 1] do not span the trailing axes of x: refused, not fused."""
    report = _fuse(channels_first_instance_norm_named_layer_norm.graph_def, registry).report
    assert report.fused_count("LayerNorm") == 0
    assert sorted(r.name for r in _scope_refusals(report)) == ["block0/LayerNorm", "block1/LayerNorm"]
    assert all("does not span the trailing axes" in r.reason for r in _scope_refusals(report))


# ------------------------------------------------- tf_slim BERT-style encoder


def test_bert_encoder_layer_norms_are_all_fused(bert_encoder, registry):
    m = bert_encoder
    scopes = sorted(n.name[: -len("/moments/mean")] for n in m.graph_def.node if n.name.endswith("/moments/mean"))
    assert len(scopes) == m.layer_norms == 7  # one tf_slim layer_norm in the embeddings, two per layer
    for emit in ("fused", "tf"):
        result = _fuse(m.graph_def, registry, emit=emit, switch=NORMS_APART)
        report = result.report
        assert report.pass_report("ScopeLayerNormPass").matched_scopes == scopes
        assert report.fused_count("LayerNorm") == len(report.pass_report("ScopeLayerNormPass").fused) == 7
        assert sorted(s for f in report.pass_report("ScopeLayerNormPass").fused for s in f.scopes) == scopes
        assert report.refused == []
        # every layer norm scope, its sub-scopes and the scopes holding it matched
        # (or missed other patterns of the pass) only through a match: no near misses
        assert report.pass_report("ScopeLayerNormPass").near_miss_count == 0
        assert sum(1 for n in result.graph_def.node if _fused_type(n) == "LayerNorm") == 7
        _verify(m, result.graph_def, registry)
