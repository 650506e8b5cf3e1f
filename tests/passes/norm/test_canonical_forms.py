"""Spellings that canonical matching makes fuse, on graphs real library code produces, each with
a look-alike that must not fuse, and every fused graph verified numerically against the original:

* a layer norm whose square root reads ``Maximum(variance + epsilon, 0)`` or
  ``Maximum(variance, 1e-12)`` (tf_keras backend ``K.sqrt`` clips first);
* a tanh GELU written ``0.044715 * x * x * x`` and in other groupings (Keras 3 ``ops``);
* a frozen batch norm whose mean is ``Squeeze(Identity(Const))`` (Sonnet 2 ``BatchNorm``);
* a group norm whose scale and offset come after the reshape back (Sonnet 2 ``GroupNorm``);

and, renamed to neutral names (``a/b/c_17``), norm and activation graphs give the graph passes
the same fused counts: no graph pass depends on names.
"""
from __future__ import annotations

import functools
from collections import Counter

import pytest

from tests.models import activation_models as am
from tests.models import activation_models2 as am2
from tests.models import canonical_models as cm
from tests.models import conv_models as cvm
from tests.models import group_norm_models as gnm
from tests.models import layer_norm_models as lnm
from tests.models import model_builders as mb
from tests.models import rms_norm_models as rnm
from tests.helpers.pass_checks import REGISTRY, op_count, pass_report, refusals
from tests.helpers.verify import assert_verifies

import scopefusion

BUILDERS = {
    "ln_epsilon": lambda: cm.keras_backend_layer_norm("epsilon"),
    "ln_tiny": lambda: cm.keras_backend_layer_norm("tiny"),
    "ln_large": lambda: cm.keras_backend_layer_norm("large"),
    **{f"gelu_{g}": functools.partial(cm.keras_ops_tanh_gelu, g)
       for g in ("constant_first", "nested", "middle", "square", "shared_square")},
    "bn_sonnet": cm.sonnet_conv_batch_norm,
    "bn_sonnet_local_stats": lambda: cm.sonnet_conv_batch_norm(local_stats=True),
    "gn_sonnet": cm.sonnet_group_norm,
    "gn_sonnet_no_scale": lambda: cm.sonnet_group_norm(create_scale=False),
}


@functools.cache
def model(key: str):
    return BUILDERS[key]()


@functools.cache
def fused(key: str):
    return scopefusion.fuse(model(key).graph_def, registry=REGISTRY)


def nodes_of(graph_def, op: str) -> list:
    return [n for n in graph_def.node if n.op == op]


@pytest.mark.parametrize("key", sorted(BUILDERS))
def test_the_builder_makes_its_spelling(key):
    m = model(key)
    ops = {n.op for n in m.graph_def.node}
    assert set(m.signature) <= ops, sorted(set(m.signature) - ops)


# ------------------------------------------------------------------ layer norm: K.sqrt clips first

@pytest.mark.parametrize("key, epsilon", [("ln_epsilon", 1e-5), ("ln_tiny", 1e-12)])
def test_layer_norm_whose_square_root_reads_a_clip_is_fused(key, epsilon):
    m, result = model(key), fused(key)
    report = pass_report(result, "LayerNormFusionPass")
    assert len(report.fused) == m.graph_layer_norms == 2, refusals(result, "LayerNormFusionPass")
    norms = nodes_of(result.fused_graph_def, "LayerNorm")
    assert len(norms) == 2
    for node in norms:
        assert node.attr["epsilon"].f == pytest.approx(epsilon, rel=1e-6)
        assert node.attr["begin_norm_axis"].i == -1 and node.attr["begin_params_axis"].i == -1
    assert op_count(result.fused_graph_def, "Maximum", "Sqrt", "RealDiv") == 0
    assert assert_verifies(m, result) < 1e-4


def test_a_clip_that_is_no_epsilon_is_no_layer_norm():
    m, result = model("ln_large"), fused("ln_large")
    report = pass_report(result, "LayerNormFusionPass")
    assert report.fused == [] and report.refused == []
    assert any("is Maximum, expected Add/AddV2" in r.reason for r in report.near_misses), report.near_misses
    assert op_count(result.fused_graph_def, "Maximum") == 4  # K.maximum's and K.sqrt's, twice
    assert_verifies(m, result)


# ------------------------------------------------------------------ GELU: the constant multiplied first

@pytest.mark.parametrize("grouping", ["constant_first", "nested", "middle"])
def test_tanh_gelu_in_any_grouping_is_fused(grouping):
    key = f"gelu_{grouping}"
    m, result = model(key), fused(key)
    report = pass_report(result, "GeluFusionPass")
    assert len(report.fused) == m.gelus == 2, refusals(result, "GeluFusionPass")
    # each Gelu then joins its dense layer's MatMulBiasAdd as the epilogue's activation
    gelus = [n for n in result.fused_graph_def.node
             if n.op == "Gelu" or n.op == "MatMulBiasAddActivation" and n.attr["activation"].s == b"Gelu"]
    assert len(gelus) == 2 and all(g.attr["approximate"].b for g in gelus)
    assert op_count(result.fused_graph_def, "Tanh") == 0
    assert assert_verifies(m, result) < 1e-4


def test_a_product_with_one_factor_fewer_is_no_gelu():
    m, result = model("gelu_square"), fused("gelu_square")
    report = pass_report(result, "GeluFusionPass")
    assert report.fused == [] and report.refused == []
    assert op_count(result.fused_graph_def, "Tanh") == 2
    assert_verifies(m, result)


def test_gelu_whose_square_is_read_elsewhere_is_not_fused():
    """The chain member x * x is read outside the chain: removing it would lose an output."""
    m, result = model("gelu_shared_square"), fused("gelu_shared_square")
    report = pass_report(result, "GeluFusionPass")
    assert report.fused == []
    assert len(report.refused) == 2 and all("mul" in r.reason for r in report.refused), refusals(
        result, "GeluFusionPass")
    assert op_count(result.fused_graph_def, "Tanh") == 2
    assert_verifies(m, result)


# ------------------------------------------------------------------ batch norm: Squeeze(Identity(Const))

def test_batch_norm_with_squeezed_statistics_is_folded():
    m, result = model("bn_sonnet"), fused("bn_sonnet")
    report = pass_report(result, "ConvBatchnormFusionPass")
    assert len(report.fused) == m.folds == 2, refusals(result, "ConvBatchnormFusionPass")
    assert report.refused == []
    assert op_count(result.fused_graph_def, "FusedBatchNormV2", "Squeeze") == 0
    assert assert_verifies(m, result) < 1e-4


def test_batch_norm_on_local_statistics_is_refused_as_training_mode():
    m, result = model("bn_sonnet_local_stats"), fused("bn_sonnet_local_stats")
    report = pass_report(result, "ConvBatchnormFusionPass")
    assert report.fused == [] and len(report.refused) == m.refusals == 2
    assert all(m.reason in r.reason for r in report.refused)
    assert op_count(result.fused_graph_def, "FusedBatchNormV2") == 2
    assert_verifies(m, result)


# ------------------------------------------------------------------ group norm: affine after the reshape

def test_group_norm_scaled_after_the_reshape_back_is_fused():
    m, result = model("gn_sonnet"), fused("gn_sonnet")
    report = pass_report(result, "GroupNormFusionPass")
    assert len(report.fused) == m.group_norms == 2, refusals(result, "GroupNormFusionPass")
    norms = nodes_of(result.fused_graph_def, "GroupNorm")
    assert len(norms) == 2
    for node in norms:
        assert node.attr["num_groups"].i == 2 and node.attr["data_format"].s == b"NHWC"
        assert node.attr["epsilon"].f == pytest.approx(1e-5, rel=1e-6)
    assert assert_verifies(m, result) < 1e-4


def test_group_norm_with_an_offset_and_no_scale_is_refused_with_the_reason():
    m, result = model("gn_sonnet_no_scale"), fused("gn_sonnet_no_scale")
    report = pass_report(result, "GroupNormFusionPass")
    assert report.fused == []
    reasons = refusals(result, "GroupNormFusionPass")
    assert len(reasons) == 2 and all("no gamma (scale=False): the offset is added after the reshape back" in r
                                     for r in reasons), reasons
    assert_verifies(m, result)


# ------------------------------------------------------------------ names decide nothing

NEUTRAL_MODELS = {
    # tf_slim layer norms in their scopes: the scope pass fuses them by name; on neutral names the
    # graph pass must find them
    "layer norm, tf_slim in a BERT encoder": lambda: mb.bert_style_encoder(layers=1, hidden=16, heads=2),
    "layer norm, hand-written rsqrt": lambda: lnm.hand_written_layer_norm("rsqrt"),
    "layer norm, tf.nn.batch_normalization": lambda: lnm.hand_written_layer_norm("batch_normalization"),
    "layer norm, Keras 3 ops": lnm.keras_ops_layer_normalization,
    "layer norm, tf_keras backend": lambda: cm.keras_backend_layer_norm("epsilon"),
    "GELU, BERT erf": am.bert_erf,
    "GELU, GPT-2": am.gpt2_mlp,
    "GELU, transformers gelu_fast": lambda: am.GELU_FORMS["transformers_gelu_fast"](),
    "GELU, Keras ops constant first": lambda: cm.keras_ops_tanh_gelu("constant_first"),
    "RMS norm, Keras 3": lambda: rnm.FORMS["keras_rms_normalization"](),
    "RMS norm, transformers T5": lambda: rnm.FORMS["transformers_t5"](),
    "group norm, Keras 3": lambda: gnm.FORMS["keras_nhwc"](),
    "group norm, tf_keras": lambda: gnm.FORMS["tf_keras"](),
    "group norm, Sonnet": cm.sonnet_group_norm,
    "swish, tf.nn.silu": lambda: am2.SWISH_FORMS["tf_nn_silu"](),
    "conv + batch norm, tf_keras": lambda: cvm.FOLD_FORMS["tf_keras_convnet[channels_last]"](),
    "conv + batch norm, tf_slim ops": lambda: cvm.FOLD_FORMS["tf_slim[ops,NHWC]"](),
    "conv + batch norm, Sonnet": cm.sonnet_conv_batch_norm,
}


def neutral_names(graph_def):
    """A copy of ``graph_def`` with every node but the placeholders renamed ``a/b/c_<k>`` (in an
    order unrelated to the old names) and colocation attributes dropped."""
    from tensorflow.core.framework import graph_pb2

    out = graph_pb2.GraphDef()
    out.CopyFrom(graph_def)
    renamed = {}
    for k, node in enumerate(sorted(out.node, key=lambda n: n.name[::-1])):
        if node.op != "Placeholder":
            renamed[node.name] = f"{'abc'[k % 3]}/{'bcd'[(k // 3) % 3]}/c_{k}"
    for node in out.node:
        node.name = renamed.get(node.name, node.name)
        for i, ref in enumerate(node.input):
            control = ref.startswith("^")
            name, _, port = ref.lstrip("^").partition(":")
            new = renamed.get(name, name)
            node.input[i] = ("^" if control else "") + new + (f":{port}" if port else "")
        if "_class" in node.attr:
            del node.attr["_class"]
    return out, renamed


def fused_counts(graph_def) -> Counter:
    return Counter(n.op for n in graph_def.node if n.op in REGISTRY.fused_ops)


@pytest.mark.parametrize("key", sorted(NEUTRAL_MODELS))
def test_neutral_names_give_the_same_fused_counts(key):
    m = NEUTRAL_MODELS[key]()
    before = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    renamed, names = neutral_names(m.graph_def)
    assert len(names) > 5 and all("/c_" in new for new in names.values())
    after = scopefusion.fuse(renamed, registry=REGISTRY)
    expected = fused_counts(before.fused_graph_def)
    assert expected, f"nothing fused in {key}"
    assert fused_counts(after.fused_graph_def) == expected
    check = scopefusion.verify(renamed, after.fused_graph_def, fused_ops=REGISTRY.fused_ops,
                               input_shapes=getattr(m, "input_shapes", None),
                               int_range=getattr(m, "int_range", (0, 10)), runs=2)
    assert check.passed, check.table()
