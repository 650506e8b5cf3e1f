"""The first look at a candidate root (``core/graph/root_filter.py``) only rules out roots the
matcher itself fails at having matched the root alone: on real graphs, for every pattern of every
built-in graph pass, a root it rules out is no match and fails with progress at most 1 (so it was
never a near miss), with the matcher's own reason; and it does rule out most of GELU's ``Mul``s."""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.models import activation_models as am
from tests.helpers.pass_checks import REGISTRY

from scopefusion.core.graph.io import load_model
from scopefusion.core.graph.canonical import rewrites
from scopefusion.core.graph.matching import MatchFailure, PatternMatcher, find_matches, match_at
from scopefusion.core.graph.root_filter import RootFilter
from scopefusion.core.graph.view import GraphView

EXAMPLE = Path(__file__).resolve().parents[2] / "scopefusion" / "examples" / "bert_tiny.pb"

MODELS = {
    "bert_tiny example (tf_slim layer norms, dense layers, erf GELU)": lambda: load_model(EXAMPLE).graph_def,
    "google-research BERT tanh GELU": lambda: am.bert_tanh().graph_def,
    "GPT-2 MLP": lambda: am.gpt2_mlp().graph_def,
    "tf_keras Dense(gelu)": lambda: am.keras_gelu("tf_keras", "dense").graph_def,
    "params-flow's gelu_exact (a product divided by 2)": lambda: _gelu_over_two(),
}


def _gelu_over_two():
    """params-flow's exact GELU, ``x * erfc(-x / sqrt(2)) / 2``: its root, a RealDiv, is a GELU
    product of three factors when seen as ``x * erfc(...) * (1 / 2)``."""
    import tensorflow as tf

    from scopefusion.testing import graph_from_function

    def fn(x):
        return x * tf.math.erfc(-x / tf.sqrt(2.0)) / 2.0
    return graph_from_function(fn, tf.TensorSpec([2, 3], tf.float32, "x"))


@functools.cache
def view(name: str) -> GraphView:
    return GraphView(MODELS[name]())


def patterns():
    return [(spec.name, p) for spec in REGISTRY.graph_passes for p in spec.cls().define_patterns()]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_ruled_out_root_fails_at_its_first_level_with_the_matchers_reason(name):
    v = view(name)
    ruled_out = 0
    for pass_name, pattern in patterns():
        first_look = RootFilter(pattern)
        for t in pattern.root_types:
            for root in v.index.nodes_of_type(t):
                if first_look.may_match(v.index, root):
                    continue
                ruled_out += 1
                with pytest.raises(MatchFailure) as failed:
                    match_at(v, pattern, root)
                assert failed.value.progress <= 1, (pass_name, pattern.name, v.index.names[root], failed.value)
    assert ruled_out > 0


@pytest.mark.parametrize("name", sorted(MODELS))
def test_find_matches_reports_the_same_failures_with_and_without_the_first_look(name, monkeypatch):
    v = view(name)
    for _, pattern in patterns():
        fast: list = []
        found = find_matches(v, pattern, lambda root, why, fast=fast: fast.append((root, why.progress, str(why))))
        monkeypatch.setattr(RootFilter, "may_match", lambda self, index, root: True)
        monkeypatch.setattr(RootFilter, "may_match_view", lambda self, index, seen: True)
        slow: list = []
        assert [m.root for m in find_matches(v, pattern, lambda root, why, slow=slow: slow.append(
            (root, why.progress, str(why))))] == [m.root for m in found]
        monkeypatch.undo()
        assert fast == slow, pattern.name


def test_most_muls_are_ruled_out_for_gelu():
    v = view("tf_keras Dense(gelu)")
    gelu = next(s for s in REGISTRY.graph_passes if s.name == "GeluFusionPass").cls().define_patterns()[0]
    muls = v.index.nodes_of_type("Mul")
    kept = {m for m in muls if RootFilter(gelu).may_match(v.index, m)}
    roots = [m.root for m in find_matches(v, gelu)]
    assert len(roots) == 2 and set(roots) <= kept  # the two GELUs, each at a Mul the first look keeps
    assert len(kept) < len(muls) / 2, (len(kept), len(muls))


def test_a_node_seen_as_a_chain_of_too_few_operands_is_ruled_out():
    """BERT's ``x / sqrt(2)`` can be seen as a product, ``x * (1 / sqrt(2))``, of two factors; GELU's
    products have three: the first look rules it out, and the matcher fails there at the node's
    own type (progress 0)."""
    v = view("bert_tiny example (tf_slim layer norms, dense layers, erf GELU)")
    gelu = next(s for s in REGISTRY.graph_passes if s.name == "GeluFusionPass").cls().define_patterns()[0]
    first_look, matcher = RootFilter(gelu), PatternMatcher(v)
    divs = v.index.nodes_of_type("RealDiv")
    assert divs
    for div in divs:
        seen = list(rewrites(matcher, div, frozenset(gelu.root_types)))
        assert seen and not any(first_look.may_match_view(v.index, w) for w in seen)
        with pytest.raises(MatchFailure) as failed:
            match_at(v, gelu, div)
        assert failed.value.progress == 0


def test_a_node_seen_as_a_chain_of_enough_operands_is_kept():
    v = view("params-flow's gelu_exact (a product divided by 2)")
    gelu = next(s for s in REGISTRY.graph_passes if s.name == "GeluFusionPass").cls().define_patterns()[0]
    (div,) = v.index.nodes_of_type("RealDiv")[-1:]
    seen = list(rewrites(PatternMatcher(v), div, frozenset(gelu.root_types)))
    assert any(RootFilter(gelu).may_match_view(v.index, w) for w in seen)
    assert [m.root for m in find_matches(v, gelu)] == [div]
