"""The built-in passes on the generalization corpus: models built with the layer code of
keras-bert (and its keras-transformer family), deepctr, keras-tcn, keras-cv-attention-models,
params-flow (bert-for-tf2's layers) and tflearn, each writing layer norms, GELUs, swish, RMS,
group norms, convolution + batch norm, LSTM and GRU cells its own way
(``tests/models/library_models.py``), and the attention of keras-bert, deepctr and
keras-cv-attention-models' LLaMA2.

Every model: fusion writes exactly as many fused ops per family as the model's code computes
(counted from the layers built; every other family none), and the fused graph computes what
the original does.  Look-alikes are fused into nothing, with the refusal that says why.  A
known miss is a strict xfail of its family naming what is missed.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.helpers.corpus_counts import RNN_PASSES, fuse, family_counts, format_table, table_rows
from tests.helpers.neutral_names import neutral_names, renamed_tensor
from tests.helpers.pass_checks import REGISTRY, refusals
from tests.helpers.verify import assert_verifies
from tests.models.activation_models import run
from tests.models.library_models import KEYS, MISSES

import scopefusion

#: Look-alikes: key -> {pass: words every refusal of that pass says}.  kecam's ``gelu_linear`` (a
#: piecewise quadratic of ``|x|``) is matched by no pattern at all: no Gelu, no refusal.
LOOK_ALIKES = {
    "deepctr:layer_norm_axis_1": {"LayerNormFusionPass": "the statistics reduce different axes ([1] and [-1])"},
    "keras-cv-attention-models:gelu_linear_evo_norm": {
        "ScopeLayerNormPass": "lies between the statistics and the output"},
}


@pytest.mark.parametrize("key", KEYS)
def test_the_builder_makes_its_library_spelling(library_corpus, key):
    """The graph holds the ops of the library's own spelling, and runs to finite outputs."""
    model = library_corpus[key]
    ops = {n.op for n in model.graph_def.node}
    assert model.signature and set(model.signature) <= ops, sorted(set(model.signature) - ops)
    assert all(np.all(np.isfinite(o)) for o in run(model))


WHY_PASSES = ("ScopeLayerNormPass", "LayerNormFusionPass", "ConvBatchnormFusionPass", "AttentionFusionPass")


@pytest.mark.parametrize("key", [k for k in KEYS if k not in LOOK_ALIKES])
def test_every_family_fused_exactly(library_corpus, key):
    """Every family as often as the model builds it (a known miss's family: its own strict xfail
    below), and the fused graph computes what the original does."""
    model = library_corpus[key]
    assert any(model.expected.values()), "a corpus model builds something to fuse"
    result = fuse(model)
    counts = family_counts(result)
    why = {p: refusals(result, p) for p in WHY_PASSES}
    expected = {family: n for family, n in model.expected_counts().items() if family not in MISSES.get(key, {})}
    assert {family: counts[family] for family in expected} == expected, why
    error = assert_verifies(model, result, every_output=True)
    assert error < 1e-4


#: Known misses the pass refuses: key -> {pass: words every refusal of that pass says}.
MISS_REFUSALS = {
    "deepctr:transformer": {"AttentionFusionPass": "lies between the softmax and the product with v"},
}


@pytest.mark.parametrize("key", list(MISS_REFUSALS))
def test_known_miss_is_refused_with_its_reason(library_corpus, key):
    result = fuse(library_corpus[key])
    for name, words in MISS_REFUSALS[key].items():
        reasons = refusals(result, name)
        assert reasons and all(words in r for r in reasons), reasons


@pytest.mark.parametrize("key,family", [
    pytest.param(key, family, marks=pytest.mark.xfail(strict=True, reason=reason), id=f"{key}-{family}")
    for key, families in MISSES.items() for family, reason in families.items()])
def test_known_miss(library_corpus, key, family):
    model = library_corpus[key]
    assert model.expected[family] > 0, "a known miss is a family the model builds"
    assert family_counts(fuse(model))[family] == model.expected[family]


@pytest.mark.parametrize("key", list(LOOK_ALIKES))
def test_look_alike_is_not_fused(library_corpus, key):
    model = library_corpus[key]
    result = fuse(model)
    assert family_counts(result) == model.expected_counts() == dict.fromkeys(model.expected_counts(), 0)
    for name, words in LOOK_ALIKES[key].items():
        reasons = refusals(result, name)
        assert reasons and all(words in r for r in reasons), reasons
    assert_verifies(model, result, every_output=True)


def test_family_table(library_corpus):
    """The per-family table the corpus reports: at least five libraries, and every family fused as
    often as it is built, but for the known misses (which fuse none)."""
    rows = table_rows(library_corpus)
    text = format_table(rows)
    print(text)
    assert len({row[0] for row in rows}) >= 5, text
    missed: dict[tuple[str, str], int] = {}
    for key, families in MISSES.items():
        for family in families:
            place = (library_corpus[key].library, family)
            missed[place] = missed.get(place, 0) + library_corpus[key].expected[family]
    for library, family, built, fused in rows:
        assert built > 0, text  # look-alikes fuse nothing, so they add no row
        assert fused == built - missed.get((library, family), 0), text
    assert {family for _, family, _, fused in rows if fused} >= {"LayerNorm", "Attention"}, text


@pytest.mark.parametrize("key", KEYS)
def test_every_stage_keeps_the_computation(library_corpus, key):
    """With every stage on (the epilogue and residual-norm passes too) and the RNN cell passes
    named, the fused graph still computes what the original does."""
    model = library_corpus[key]
    result = scopefusion.fuse(model.graph_def, registry=REGISTRY, enable_scope_fusion_passes=RNN_PASSES)
    assert bool(result.report.fused) == (key not in LOOK_ALIKES), result.report.fused
    assert_verifies(model, result, every_output=True)


#: Models whose cells sit in scopes named after them (tflearn: ``GRU/GRU/GRUCell/Gates/...``)
NAMED_CELLS = ("tflearn:lstm_static", "tflearn:gru_static")


@pytest.mark.parametrize("key", NAMED_CELLS)
def test_renamed_scopes_fuse_the_same(library_corpus, key):
    """Every scope renamed to neutral names (``a_1/b_16/c_47``): the same cells are fused, from what
    they compute alone, and the renamed fused graph computes what the renamed original does."""
    model = library_corpus[key]
    graph_def, names = neutral_names(model.graph_def)
    parts = {p for n in graph_def.node for p in n.name.split("/")}
    assert not [p for p in parts if any(w in p.lower() for w in ("lstm", "gru", "cell", "gate", "rnn"))]
    renamed = dataclasses.replace(model, graph_def=graph_def,
                                  inputs={renamed_tensor(k, names): v for k, v in model.inputs.items()},
                                  outputs=[renamed_tensor(t, names) for t in model.outputs])
    result = fuse(renamed)
    assert family_counts(result) == model.expected_counts()
    assert assert_verifies(renamed, result, every_output=True) < 1e-4
