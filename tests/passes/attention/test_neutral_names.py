"""The attention pass and the transformer-block passes recognise what a subgraph computes, not
how its scopes are named: on real transformer graphs with every scope renamed to neutral names
(``tests.helpers.neutral_names``: ``a_3/b_17/c_40``), ``AttentionFusionPass``,
``ResidualNormFusionPass``, ``GatedActivationFusionPass`` and ``RotaryEmbeddingFusionPass`` fuse
exactly as many places as with the library's names (the counts each architecture calls for),
and the renamed fused graph verifies against the renamed original.
"""
from __future__ import annotations

import dataclasses
import functools

import pytest

from tests.helpers.neutral_names import neutral_names
from tests.helpers.pass_checks import REGISTRY, pass_report
from tests.helpers.verify import assert_verifies
from tests.models import attention_models as atm
from tests.models import rms_norm_models as rm

import scopefusion

PASSES = ("AttentionFusionPass", "ResidualNormFusionPass", "GatedActivationFusionPass", "RotaryEmbeddingFusionPass")
LAYERS = 2

#: key -> (builder, fused places per pass: attention, residual norm, gated activation, rotary embedding)
CASES = {
    # post-norm: the embeddings' norm and both sub-layers' norms read a residual sum
    "transformers_bert": (atm.transformers_bert, (LAYERS, 2 * LAYERS + 1, 0, 0)),
    "transformers_gpt2": (atm.transformers_gpt2, (LAYERS, 2 * LAYERS, 0, 0)),
    "transformers_t5": (atm.transformers_t5, (LAYERS, 2 * LAYERS, 0, 0)),
    # pre-norm RMS, SwiGLU, rotary q and k, grouped-query attention
    "transformers_mistral": (atm.transformers_mistral, (LAYERS, 2 * LAYERS, LAYERS, 2 * LAYERS)),
    "keras_hub_llama": (lambda: atm.keras_hub_backbone("llama"), (LAYERS, 2 * LAYERS, LAYERS, 2 * LAYERS)),
    "keras_mha_both": (lambda: atm.keras_mha("both"), (LAYERS, 0, 0, 0)),
    # grouped-query attention as Keras' grouped einsum, GeGLU
    "keras_hub_gemma": (lambda: rm.keras_hub_backbone("gemma"), (LAYERS, 2 * LAYERS, LAYERS, 2 * LAYERS)),
}


@functools.cache
def model(key: str):
    return CASES[key][0]()


def fused_counts(result) -> tuple[int, ...]:
    return tuple(len(pass_report(result, name).fused) for name in PASSES)


@pytest.mark.parametrize("key", list(CASES))
def test_neutral_names_fuse_the_same(key):
    m, expected = model(key), CASES[key][1]
    named = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    assert fused_counts(named) == expected
    renamed, names = neutral_names(m.graph_def)
    assert len(names) == len(m.graph_def.node)
    kept = {n.name for n in m.graph_def.node} & {n.name for n in renamed.node}
    assert not kept, sorted(kept)[:5]  # no node keeps its library name
    result = scopefusion.fuse(renamed, registry=REGISTRY)
    assert fused_counts(result) == expected
    for name in PASSES:
        assert len(pass_report(result, name).refused) == len(pass_report(named, name).refused), name
    assert_verifies(dataclasses.replace(m, graph_def=renamed), result)  # fed by its input shapes and int range
