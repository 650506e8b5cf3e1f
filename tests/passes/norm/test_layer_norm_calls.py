"""A tf_keras ``LayerNormalization`` called several times puts every call in ONE scope
(``ln/moments/``, ``ln/moments_1/``, ... for epsilon < 1.001e-5; several
``FusedBatchNormV3`` side by side in the flat scope otherwise): ``ScopeLayerNormPass``
fuses each call as one ``LayerNorm``, named like the call's output node.

Built with the real library: a shared layer applied three times in a traced function, a
tf_keras layer (a "cell") that normalises six slices of its input with one sub-layer, and two
parallel calls (batch unknown) whose results are added.  (In TF1 graph mode Keras gives each
call a scope of its own, ``ln``, ``ln_1``: nothing to split there.)  Decoys: a shared
``BatchNormalization`` in inference, a shared layer norm without beta (each call refused with
the reason), calls chained directly inside the scope
(not split: refused as one piece, with the reason).
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.models import norm_models as nm
from tests.helpers.pass_checks import REGISTRY, op_count, pass_report
from tests.helpers.verify import assert_verifies

import scopefusion

SCOPE_PASS = "ScopeLayerNormPass"
EPSILONS = {"moments": 1e-6, "fused_batch_norm": 1e-3}  # tf_keras' two paths (1.001e-5 splits them)
H = nm.HIDDEN


def _layer(cls, seed: int, shape=(2, 5, H), **kwargs):
    """A built tf_keras layer with random weights."""
    layer = cls(**kwargs)
    layer.build(shape)
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.uniform(0.5, 1.5, w.shape).astype(np.float32) for w in layer.get_weights()])
    return layer


def shared(path: str, calls: int = 3, **kwargs) -> nm.NormModel:
    """``y = tanh(ln(y))`` ``calls`` times with one tf_keras LayerNormalization."""
    import tensorflow as tf
    import tf_keras

    ln = _layer(tf_keras.layers.LayerNormalization, 1, epsilon=EPSILONS[path], name="ln", **kwargs)

    def fn(x):
        y = x
        for _ in range(calls):
            y = tf.tanh(ln(y))
        return y

    return nm.traced(f"shared[{path}]", fn, {"x": nm.spec([2, 5, H])}, layer_norms=calls)


def parallel(path: str) -> nm.NormModel:
    """Batch unknown: ``ln(relu(x)) * 0.5 + ln(x)``, two calls side by side, the second's
    result the graph output's input."""
    import tensorflow as tf
    import tf_keras

    ln = _layer(tf_keras.layers.LayerNormalization, 4, epsilon=EPSILONS[path], name="ln")
    return nm.traced(f"parallel[{path}]", lambda x: ln(tf.nn.relu(x)) * 0.5 + ln(x),
                     {"x": nm.spec([None, 5, H])}, layer_norms=2, input_shapes=f"x:3,5,{H}")


def six_slice_cell(path: str) -> nm.NormModel:
    """A tf_keras layer that normalises six slices of its input with one sub-layer (six calls in
    ``cell/ln/``) and concatenates them."""
    import tensorflow as tf
    import tf_keras

    class SliceNorm(tf_keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.ln = tf_keras.layers.LayerNormalization(epsilon=EPSILONS[path], name="ln")

        def call(self, x):
            parts = tf.split(x, 6, axis=1)
            return tf.concat([tf.nn.relu(self.ln(p)) for p in parts], axis=1)

    cell = SliceNorm(name="cell")
    cell(tf.zeros((2, 6, H)))  # builds the sub-layer
    cell.ln.set_weights([np.random.default_rng(k).uniform(0.5, 1.5, (H,)).astype(np.float32) for k in (3, 4)])
    return nm.traced(f"six_slices[{path}]", cell, {"x": nm.spec([2, 6, H])}, layer_norms=6)


def chained(path: str) -> nm.NormModel:
    """``ln(ln(x))``: the first call's output feeds the second inside the scope."""
    import tf_keras

    ln = _layer(tf_keras.layers.LayerNormalization, 2, epsilon=EPSILONS[path], name="ln")
    return nm.traced(f"chained[{path}]", lambda x: ln(ln(x)), {"x": nm.spec([2, 5, H])}, layer_norms=2)


FORMS = {
    **{f"shared[{p}]": functools.partial(shared, p) for p in EPSILONS},
    **{f"parallel[{p}]": functools.partial(parallel, p) for p in EPSILONS},
    **{f"six_slices[{p}]": functools.partial(six_slice_cell, p) for p in EPSILONS},
}


@functools.cache
def built(key: str) -> nm.NormModel:
    return {**FORMS, **{f"chained[{p}]": functools.partial(chained, p) for p in EPSILONS}}[key]()


def fuse(m: nm.NormModel):
    return scopefusion.fuse(m.graph_def, registry=REGISTRY)


def layer_norms(graph_def) -> list:
    return [n for n in graph_def.node if n.op == "LayerNorm"]


@pytest.mark.parametrize("key", sorted(FORMS))
def test_each_call_of_a_shared_layer_is_one_layer_norm(key):
    m = built(key)
    anchor = "FusedBatchNormV3" if "fused_batch_norm" in key else "Rsqrt"
    assert op_count(m.graph_def, anchor) == m.layer_norms  # the calls, as the library wrote them
    homes = {n.name.rsplit("/", 2)[0] if "/moments" in n.name or "/batchnorm" in n.name else n.name.rsplit("/", 1)[0]
             for n in m.graph_def.node if n.op == anchor}
    assert len(homes) == 1, homes  # all of them in one layer scope
    result = fuse(m)
    report = pass_report(result, SCOPE_PASS)
    assert len(report.fused) == m.layer_norms, [r.reason for r in report.refused]
    assert report.refused == []
    fused = layer_norms(result.fused_graph_def)
    assert len(fused) == m.layer_norms
    assert op_count(result.fused_graph_def, anchor, "Mean", "SquaredDifference") == 0
    for node in fused:
        assert node.attr["epsilon"].f == pytest.approx(min(EPSILONS.values()) if "moments" in key
                                                       else max(EPSILONS.values()), rel=1e-6)
        assert node.attr["begin_norm_axis"].i == 2 and node.attr["begin_params_axis"].i == -1
    assert_verifies(m, result)


def test_a_fused_call_is_named_like_its_output_node():
    m = built("shared[fused_batch_norm]")
    outputs = sorted(n.name for n in m.graph_def.node if n.op == "AddV2" and n.name.startswith("ln/add"))
    result = fuse(m)
    assert sorted(n.name for n in layer_norms(result.fused_graph_def)) == outputs == ["ln/add", "ln/add_1", "ln/add_2"]
    assert [f.scopes for f in pass_report(result, SCOPE_PASS).fused] == [["ln"]] * 3


def test_a_shared_batch_normalization_is_not_a_layer_norm():
    import tensorflow as tf
    import tf_keras

    bn = _layer(tf_keras.layers.BatchNormalization, 5, shape=(2, 5, 4, H), name="bn")
    m = nm.traced("shared_bn", lambda x: bn(tf.tanh(bn(x, training=False)), training=False),
                  {"x": nm.spec([2, 5, 4, H])})
    assert op_count(m.graph_def, "FusedBatchNormV3") == 2
    result = fuse(m)
    assert layer_norms(result.fused_graph_def) == []
    assert pass_report(result, SCOPE_PASS).fused == []


@pytest.mark.parametrize("calls", [1, 3])
@pytest.mark.parametrize("path", sorted(EPSILONS))
@pytest.mark.parametrize("option,reason", [("center", "no beta (center=False)"), ("scale", "no gamma (scale=False)")])
def test_each_call_without_beta_or_gamma_is_refused_with_the_reason(path, calls, option, reason):
    m = shared(path, calls=calls, **{option: False})
    result = fuse(m)
    report = pass_report(result, SCOPE_PASS)
    assert report.fused == [] and layer_norms(result.fused_graph_def) == []
    assert len(report.refused) == calls
    assert all(reason in r.reason for r in report.refused), [r.reason for r in report.refused]
    assert report.matched_scopes == ["ln"]


@pytest.mark.parametrize("path", sorted(EPSILONS))
def test_calls_chained_inside_the_scope_are_not_split(path):
    m = built(f"chained[{path}]")
    result = fuse(m)
    report = pass_report(result, SCOPE_PASS)
    assert report.fused == []
    assert len(report.refused) == 1 and report.refused[0].scopes == ["ln"]
    # whatever else fuses them, the graph still computes what it did
    assert_verifies(m, result)


@pytest.mark.parametrize("path", sorted(EPSILONS))
def test_a_model_holding_two_layer_norm_layers_is_not_one_layer_called_twice(path):
    import tf_keras

    model = tf_keras.Sequential([tf_keras.layers.LayerNormalization(epsilon=EPSILONS[path], name="ln1"),
                                 tf_keras.layers.ReLU(name="relu"),
                                 tf_keras.layers.LayerNormalization(epsilon=EPSILONS[path], name="ln2")], name="seq")
    model.build((2, 5, H))
    m = nm.traced(f"two_layers[{path}]", lambda x: model(x), {"x": nm.spec([2, 5, H])}, layer_norms=2)
    result = fuse(m)
    report = pass_report(result, SCOPE_PASS)
    assert report.matched_scopes == ["seq/ln1", "seq/ln2"]  # not the model scope holding both
    assert [f.name for f in report.fused] == ["seq/ln1", "seq/ln2"] and report.refused == []
    assert_verifies(m, result)
