"""ScopeLayerNormPass analyses each distinct layer-norm structure once: scopes described alike
share the first one's analysis, with their own names (``layer_norm/structure.py``).

What must hold: every layer norm is fused exactly as when each is analysed on its own (same
fused graph, byte for byte), per-instance values (epsilon, the axes, a missing beta) are never
taken from another instance, and alike scopes are analysed only once.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import norm_models as nm
from pass_checks import REGISTRY, assert_verifies, pass_report

import scopefusion
from scopefusion.builtin_passes.scope import layer_norm as ln_pass
from scopefusion.builtin_passes.scope.layer_norm.structure import AnalysisCache

H = nm.HIDDEN
#: tf_keras' two layer-norm paths: epsilon below 1.001e-5 computes moments, above it uses
#: the reshape + FusedBatchNormV3 trick.
EPSILONS = {
    "moments": [1e-6, 1e-6, 1e-7, 1e-6, 3e-6, 1e-6],
    "fused_batch_norm": [1e-3, 1e-3, 2e-3, 1e-3, 1e-2, 1e-3],
}


def chain(path: str, centered: tuple[bool, ...] = ()) -> nm.NormModel:
    """``y = tanh(ln_k(y))`` through six tf_keras LayerNormalization layers of one structure,
    some with another epsilon, and a rank-2 one at the end (its axis constant differs)."""
    import tensorflow as tf
    import tf_keras

    epsilons = EPSILONS[path]
    centered = centered or (True,) * len(epsilons)
    rng = np.random.default_rng(3)
    layers = []
    for k, (epsilon, center) in enumerate(zip(epsilons, centered)):
        layer = tf_keras.layers.LayerNormalization(epsilon=epsilon, center=center, name=f"ln{k}")
        layer.build((2, 5, H))
        layer.set_weights([rng.uniform(0.5, 1.5, w.shape).astype(np.float32) for w in layer.get_weights()])
        layers.append(layer)
    last = tf_keras.layers.LayerNormalization(epsilon=epsilons[0], name="ln_flat")
    last.build((10, H))

    def fn(x):
        y = x
        for layer in layers:
            y = tf.tanh(layer(y))
        return last(tf.reshape(y, [10, H]))

    return nm.traced(f"chain[{path}]", fn, {"x": nm.spec([2, 5, H])}, layer_norms=len(epsilons) + 1)


@functools.cache
def built(path: str, centered: tuple[bool, ...] = ()) -> nm.NormModel:
    return chain(path, centered)


def fuse(m: nm.NormModel):
    return scopefusion.fuse(m.graph_def, registry=REGISTRY)


def layer_norm_attrs(graph_def) -> dict[str, tuple[float, int]]:
    return {n.name: (round(n.attr["epsilon"].f, 9), n.attr["begin_norm_axis"].i)
            for n in graph_def.node if n.op == "LayerNorm"}


@pytest.fixture
def analyses(monkeypatch):
    """Counts the layer-norm analyses that really run."""
    calls = []
    real = ln_pass.analyse

    def counted(scope):
        calls.append(scope.name)
        return real(scope)

    monkeypatch.setattr(ln_pass, "analyse", counted)
    return calls


@pytest.mark.parametrize("path", sorted(EPSILONS))
def test_alike_scopes_are_analysed_once_and_fused_with_their_own_values(path, analyses):
    m = built(path)
    result = fuse(m)
    attrs = layer_norm_attrs(result.fused_graph_def)
    assert len(attrs) == 7, pass_report(result, "ScopeLayerNormPass").refused
    expected = {f"ln{k}": (round(e, 9), 2) for k, e in enumerate(EPSILONS[path])}
    expected["ln_flat"] = (round(EPSILONS[path][0], 9), 1)  # rank 2: its own axis constant
    assert attrs == expected
    # ln3 and ln5 are ln1 again (the same epsilon, reading a Tanh): recalled, not analysed
    assert "ln3" not in analyses and "ln5" not in analyses and "ln1" in analyses, analyses
    assert_verifies(m, result)


@pytest.mark.parametrize("path", sorted(EPSILONS))
def test_the_remembered_analysis_gives_the_same_graph_as_analysing_each_scope(path, monkeypatch):
    m = built(path)
    remembered = fuse(m).fused_graph_def.SerializeToString(deterministic=True)
    monkeypatch.setattr(AnalysisCache, "analyse", lambda self, scope, analyse: analyse(scope))
    alone = fuse(m).fused_graph_def.SerializeToString(deterministic=True)
    assert remembered == alone


@pytest.mark.parametrize("path", sorted(EPSILONS))
def test_an_alike_scope_without_beta_is_refused_not_recalled(path):
    centered = (True, True, False, True, True, True)
    m = built(path, centered)
    result = fuse(m)
    report = pass_report(result, "ScopeLayerNormPass")
    assert len(report.fused) == 6
    assert len(report.refused) == 1 and "ln2" in report.refused[0].name, report.refused
    assert "no beta (center=False)" in report.refused[0].reason
    assert_verifies(m, result)
