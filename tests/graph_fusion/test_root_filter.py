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
from scopefusion.core.graph.matching import MatchFailure, find_matches, match_at
from scopefusion.core.graph.root_filter import RootFilter
from scopefusion.core.graph.view import GraphView

EXAMPLE = Path(__file__).resolve().parents[2] / "scopefusion" / "examples" / "bert_tiny.pb"

MODELS = {
    "bert_tiny example (tf_slim layer norms, dense layers, erf GELU)": lambda: load_model(EXAMPLE).graph_def,
    "google-research BERT tanh GELU": lambda: am.bert_tanh().graph_def,
    "GPT-2 MLP": lambda: am.gpt2_mlp().graph_def,
    "tf_keras Dense(gelu)": lambda: am.keras_gelu("tf_keras", "dense").graph_def,
}


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
