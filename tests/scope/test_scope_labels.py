"""Scope labels (``core/scope/labels.py``): labellings of many scopes at once and their undoing,
against a label per scope changed one scope at a time, on a graph built by a real library."""
from __future__ import annotations

import random

from tests.models import rnn_models as rm

from scopefusion import ScopeGraph


def test_labellings_undone_but_where_kept_are_those_undone_one_scope_at_a_time():
    tree = ScopeGraph(rm.static_rnn(rm.gru()).graph_def).tree
    n = len(tree)
    rng = random.Random(7)
    for keep_count in (0, 1, 3):
        tree.clear_labels()
        expected: dict[int, str | None] = {k: None for k in range(n)}
        changes, log = [], []
        for _ in range(12):
            positions = rng.sample(range(n), rng.randint(1, max(1, n // 3)))
            label = rng.choice(["a", "b", None])
            log.append([(k, expected[k]) for k in positions])
            for k in positions:
                expected[k] = label
            changes.append(tree.labels.set(positions, label))
            assert [tree.scope_at(k).sub_type for k in range(n)] == [expected[k] for k in range(n)]
            for lb in "ab":
                assert tree.labelled_positions(lb) == [k for k in range(n) if expected[k] == lb]
        keep = rng.sample([k for k in range(1, n) if expected[k] is not None], keep_count)  # labelled now
        kept = tree.layout.covered(keep) if keep else None
        for change, before in zip(reversed(changes), reversed(log), strict=True):
            tree.labels.undo(change, kept)
            for k, label in before:
                if kept is None or not kept[k]:
                    expected[k] = label
        assert [tree.scope_at(k).sub_type for k in range(n)] == [expected[k] for k in range(n)]
        for lb in "ab":
            assert tree.labelled_positions(lb) == [k for k in range(n) if expected[k] == lb]
            assert [tree.count_labelled_below(tree.scope_at(k), lb) for k in range(n)] == [
                sum(expected[j] == lb for j in range(k + 1, int(tree.layout.end[k]))) for k in range(n)]
        if keep_count == 0:
            assert all(label is None for label in expected.values())
        else:
            assert any(label is not None for label in expected.values())
