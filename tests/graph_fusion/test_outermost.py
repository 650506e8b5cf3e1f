"""A graph pass's matches: one whose nodes all lie inside one bigger match of the pass is no match
of its own; every other match is kept, in the order found."""
from __future__ import annotations

from types import SimpleNamespace

from scopefusion.core.graph_fusion.engine import _outermost


def _kept(*member_sets):
    matches = [SimpleNamespace(members=frozenset(m), k=k) for k, m in enumerate(member_sets)]
    return [m.k for m in _outermost(matches)]


def test_a_match_inside_a_bigger_one_is_dropped():
    assert _kept({2, 3}, {1, 2, 3, 4}) == [1]
    assert _kept({1, 2, 3, 4}, {2, 3}, {4}) == [0]


def test_matches_reaching_outside_every_bigger_one_are_kept():
    assert _kept({1, 2, 3}, {3, 4}) == [0, 1]  # overlaps in part
    assert _kept({1, 2, 3}, {4, 5, 6}, {3, 4}) == [0, 1, 2]  # inside two, but not inside one
    assert _kept({1, 2}, {3, 4}, {5}) == [0, 1, 2]  # apart


def test_alike_matches_keep_the_first_and_an_empty_one_is_kept():
    assert _kept({7, 8}, {7, 8}, {1, 7, 8}) == [2]
    assert _kept({7, 8}, {8, 7}) == [0]
    assert _kept(set(), {1}) == [0, 1]
