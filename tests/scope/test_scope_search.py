"""The scope search (``core/scope/matcher.py``) tests static features on every scope at once and
prunes subtrees; it must find what a plain walk finds that tests each scope feature by feature.

On graphs built by real libraries, every pattern set of every built-in scope pass is matched
with each search compared, in the very label state it runs in, to a walk of the tree in
pre-order that calls each feature's own ``match``, does not descend into a match and notes
each scope failing exactly one feature (the near misses, with that feature).
"""
from __future__ import annotations

import functools

import pytest

from tests.models import layer_norm_models as lm
from tests.models import rnn_models as rm
from tests.helpers.pass_checks import REGISTRY

from scopefusion import ScopeFeature, ScopeGraph
from scopefusion.core.scope import matcher
from scopefusion.core.scope.patterns import check_pattern_sets


class _Recorded(matcher.MatchStats):
    """Match stats that also keep every near miss reported to them, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, object]] = []

    def missed(self, tree, pattern, positions, which) -> None:
        self.calls.extend((tree.scope_at(k).name, pattern.features[f])
                          for k, f in zip(positions.tolist(), which.tolist(), strict=True))
        super().missed(tree, pattern, positions, which)


def _walk(tree, pattern, near_misses: bool) -> tuple[list[str], list[tuple[str, object]]]:
    """Outermost matches and single-feature misses, scope by scope in pre-order."""
    found, missed = [], []
    stack = [tree.root]
    while stack:
        scope = stack.pop()
        if scope.parent is not None and not scope.contains_return:
            failed = [f for f in pattern.features if not f.match(scope)]
            if not failed:
                found.append(scope.name)
                continue  # a match is not descended into
            if near_misses and len(failed) == 1:
                missed.append((scope.name, failed[0]))
        stack.extend(reversed(scope.sub_scopes()))
    return found, missed


#: Graphs, and whether some scope of them misses a pattern by one feature.
GRAPHS = {
    "tf.nn.batch_normalization": (lambda: lm.hand_written_layer_norm("batch_normalization"), True),
    "keras.ops.layer_normalization": (lm.keras_ops_layer_normalization, False),
    "static BasicLSTMCell": (lambda: rm.static_rnn(rm.basic_lstm()), True),
    "static GRUCell": (lambda: rm.static_rnn(rm.gru()), True),
}


@functools.cache
def _graph(name: str) -> object:
    return GRAPHS[name][0]().graph_def


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_the_search_finds_what_a_plain_walk_finds(graph, monkeypatch):
    sg = ScopeGraph(_graph(graph))
    real = matcher.search
    searched = []

    def compared(tree, pattern, stats=None):
        before = len(stats.calls)
        found = real(tree, pattern, stats)
        expected_found, expected_missed = _walk(tree, pattern, len(pattern.features) > 1)
        assert [s.name for s in found] == expected_found, pattern
        assert stats.calls[before:] == expected_missed, pattern
        searched.append((pattern.sub_type, len(found), len(expected_missed)))
        return found

    monkeypatch.setattr(matcher, "search", compared)
    for spec in REGISTRY.passes:
        if spec.engine == "scope":
            sg.tree.clear_labels()
            matcher.match_pattern_sets(sg.tree, check_pattern_sets(spec.cls().define_patterns()), _Recorded())
    assert any(found for _, found, _ in searched), searched  # the graph has something to find
    assert any(missed for _, _, missed in searched) == GRAPHS[graph][1], searched  # and near misses


class _Written(_Recorded):
    """Recorded near misses with their reason written out at once, as the labels then are."""

    def missed(self, tree, pattern, positions, which) -> None:
        for k, f in zip(positions.tolist(), which.tolist(), strict=True):
            scope, feature = tree.scope_at(k), pattern.features[f]
            by_name = isinstance(feature, ScopeFeature) and bool(feature.suffix) and scope.last_name != feature.suffix
            self.written.append((scope, f"pattern {pattern.sub_type}: {feature.explain(scope)}", by_name))
        super().missed(tree, pattern, positions, which)


def _settled(written, matches):
    """The near misses kept: per scope the first reason (a later one replaces it when it was the
    name only and the later is not), leaving out matches, their ancestors and what lies inside them."""
    kept = {}
    for scope, reason, by_name in written:
        known = kept.get(scope.name)
        if known is None or (known[2] and not by_name):
            kept[scope.name] = (scope, reason, by_name)

    def related(scope):
        return any(m is scope or m.is_ancestor_of(scope) or scope.is_ancestor_of(m) for m in matches)

    return [(name, reason) for name, (scope, reason, _) in kept.items() if not related(scope)]


@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("matched", ["final matches", "none"])
def test_near_misses_are_settled_scope_by_scope(graph, matched):
    sg = ScopeGraph(_graph(graph))
    seen = 0
    for spec in REGISTRY.passes:
        if spec.engine != "scope":
            continue
        sg.tree.clear_labels()
        stats = _Written()
        stats.written = []
        found = matcher.match_pattern_sets(sg.tree, check_pattern_sets(spec.cls().define_patterns()), stats)
        matches = found if matched == "final matches" else []
        expected = _settled(stats.written, matches)
        stats.finish(matches)
        assert stats.near_miss_count == len(expected)
        assert stats.near_misses == expected[:matcher.MAX_NEAR_MISSES]
        seen += len(stats.written)
    assert seen or not GRAPHS[graph][1]
