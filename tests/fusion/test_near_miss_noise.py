"""Near misses only where no pass fused: a pattern that came close on a part another pass (of the same
stage or a later one) fused is not reported."""
from __future__ import annotations

import pytest

import scopefusion
from scopefusion.core.fusion import pipeline


@pytest.fixture(scope="module")
def conv_bn_model():
    """Keras 3 Conv2D + BatchNormalization + swish blocks: each batch norm's ``batchnorm`` scope looks a
    little like a layer norm to the scope pass, and the graph stage folds it into the convolution."""
    keras = pytest.importorskip("keras")
    x = keras.Input((16, 16, 3), name="img")
    h = x
    for _ in range(3):
        h = keras.layers.Conv2D(8, 3, padding="same", use_bias=False)(h)
        h = keras.layers.BatchNormalization()(h)
        h = keras.layers.Activation("swish")(h)
    return keras.Model(x, h)


def _near_misses(result) -> dict[str, list[str]]:
    return {p.name: [r.name for r in p.near_misses] for p in result.report.passes if p.near_miss_count}


def test_near_misses_on_what_another_pass_fused_are_left_out(conv_bn_model, monkeypatch):
    result = scopefusion.fuse(conv_bn_model)
    assert result.report.fused_count("Conv2DBiasAddActivation") == 3
    assert _near_misses(result) == {}
    # without the settling, the scope pass's near misses at the three batch norms are reported
    monkeypatch.setattr(pipeline, "settle_scope_near_misses", lambda *args: None)
    unsettled = _near_misses(scopefusion.fuse(conv_bn_model))
    assert len(unsettled["ScopeLayerNormPass"]) == 3
    assert all(name.endswith("/batchnorm") for name in unsettled["ScopeLayerNormPass"])


def test_near_misses_where_nothing_was_fused_stay(conv_bn_model):
    """With the graph passes off, nothing fuses the batch norms: the scope pass's near misses stay."""
    result = scopefusion.fuse(conv_bn_model, fusion_switch_file=scopefusion.FusionSwitch.from_text(
        "ConvBatchnormFusionPass:off"))
    assert len(_near_misses(result).get("ScopeLayerNormPass", [])) == 3


def test_a_name_is_covered_by_a_fused_scope_it_lies_in_not_by_one_it_only_starts_with():
    from scopefusion.core.graph.index import GraphIndex
    from scopefusion.core.graph.protos import message_class

    graph = message_class("GraphDef")()
    graph.node.add(name="other", op="NoOp")
    index = GraphIndex(graph)
    scopes = {"enc/layer_1/norm", "head"}
    covered = {name: pipeline._covered(name, index, set(), scopes, {})
               for name in ("enc/layer_1/norm", "enc/layer_1/norm/mean", "head/a/b", "enc/layer_1/norm_2/mean",
                            "enc/layer_1", "heads/x", "other")}
    assert covered == {"enc/layer_1/norm": True, "enc/layer_1/norm/mean": True, "head/a/b": True,
                       "enc/layer_1/norm_2/mean": False, "enc/layer_1": False, "heads/x": False, "other": False}
