"""Pattern search over the scope tree (reference semantics, section 3).

Searching one pattern tests a scope; a match is labelled and not descended
into, otherwise the search goes depth first into the sub-scopes.  The
outermost match wins and any number of parallel matches is kept.  Batches of a
pattern set run in order; the first batch that matches nothing ends the set
with no result, and the last batch's matches are the results.  Labels given by
earlier batches survive only inside a final match.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .labels import Undo
from .match_stats import MAX_NEAR_MISSES, MatchStats
from .patterns import NodeAttrFeature, NodeOpTypeFeature, PatternSet, ScopeFeature, ScopePattern
from .scope_graph import Scope, ScopeTree

__all__ = ["MAX_NEAR_MISSES", "MatchStats", "match_pattern_set", "match_pattern_sets", "search"]


def search(tree: ScopeTree, pattern: ScopePattern, stats: MatchStats | None = None) -> list[Scope]:
    """Outermost scopes matching ``pattern``, in deterministic pre-order.

    The walk goes depth first from the root and does not descend into a match.  Without
    stats, a subtree that cannot have one feature is skipped; with stats it is skipped only
    when it lacks two, so near misses are seen.  Every feature is tested on all scopes at once
    (:class:`.arrays.ScopeArrays`): those that do not read labels once per tree, label counts,
    which change as patterns are applied, under the labels of the moment.
    """
    arrays = tree.arrays
    n = len(arrays)
    features = pattern.features
    near_misses = stats is not None and len(features) > 1
    prune_at = 2 if near_misses else 1
    ruled_out = np.zeros(n, dtype=np.int8)
    failing = np.zeros(n, dtype=np.int8)
    tests: list[np.ndarray] = []
    for feature in features:
        if isinstance(feature, NodeOpTypeFeature):
            ruled_out += arrays.rules_out(feature)
        elif isinstance(feature, NodeAttrFeature):
            ruled_out += arrays.counts(feature.op_type) == -1
        if arrays.is_static(feature):
            holds = arrays.static_holds(feature)
        else:  # a label count, under the labels of this moment
            assert isinstance(feature, ScopeFeature)  # only a scope feature counts labels
            holds = arrays.label_holds(feature, tree.labelled_positions(feature.sub_type))
        failing += ~holds
        tests.append(holds)
    reached = ruled_out < prune_at  # counts only shrink downwards: a skipped subtree is skipped whole
    to_test = np.flatnonzero(reached & arrays.open & (failing < prune_at))
    fails = failing[to_test]
    found = _outermost(to_test[fails == 0].tolist(), arrays.end)
    inside = _inside(found, arrays.end, n)
    if stats is not None:
        if near_misses:
            missing_one = to_test[fails == 1]
            missing_one = missing_one[~inside[missing_one]]  # inside a match: not reached
            if len(missing_one):
                stats.missed(tree, pattern, missing_one, _first_failures(tests, missing_one))
        stats.tested_all(arrays, reached & ~inside)
    return list(map(tree.scope_at, found))


def _outermost(passing: list[int], end: np.ndarray) -> list[int]:
    """The scopes of ``passing`` (in pre-order) that lie inside none of the others."""
    found: list[int] = []
    covered_until = -1
    for i in passing:
        if i >= covered_until:
            found.append(i)
            covered_until = int(end[i])
    return found


def _first_failures(tests: Sequence[np.ndarray], missing_one: np.ndarray) -> np.ndarray:
    """The index of the one feature each scope of ``missing_one`` fails."""
    return np.argmin(np.stack([holds[missing_one] for holds in tests]), axis=0)  # the False one


def _inside(starts: Sequence[int], end: np.ndarray, n: int) -> np.ndarray:
    """Scopes strictly inside the subtrees rooted at ``starts`` (disjoint, as outermost matches are)."""
    first = np.asarray(starts, dtype=np.int64)
    marks = np.bincount(first + 1, minlength=n + 1) - np.bincount(end[first], minlength=n + 1)
    return np.cumsum(marks[:n]) > 0


def match_pattern_set(tree: ScopeTree, pattern_set: PatternSet, stats: MatchStats | None = None) -> list[Scope]:
    """Run the batches of one pattern set; returns the final matches."""
    applied: list[Undo] = []  # every labelling, in order
    final: list[Scope] = []
    for batch in pattern_set:
        matched: list[Scope] = []
        seen: set[int] = set()
        for pattern in batch:
            found = [scope for scope in search(tree, pattern, stats) if scope._k not in seen]
            if found:
                seen.update(scope._k for scope in found)
                applied.append(tree.labels.set([scope._k for scope in found], pattern.sub_type))
                matched.extend(found)
        if not matched:
            _rollback(tree, applied, keep=())
            return []
        final = matched
    _rollback(tree, applied, keep=final)
    return final


def _rollback(tree: ScopeTree, applied: list[Undo], keep: Sequence[Scope]) -> None:
    """Undo the labellings of ``applied`` except on ``keep`` and the scopes inside them."""
    kept = tree.layout.covered([s._k for s in keep]) if keep else None
    for change in reversed(applied):
        tree.labels.undo(change, kept)


def match_pattern_sets(
    tree: ScopeTree, pattern_sets: Sequence[PatternSet], stats: MatchStats | None = None
) -> list[Scope]:
    """Final matches of every pattern set, without duplicates, in order found."""
    out: list[Scope] = []
    seen: set[int] = set()
    for pattern_set in pattern_sets:
        for scope in match_pattern_set(tree, pattern_set, stats):
            if id(scope) not in seen:
                seen.add(id(scope))
                out.append(scope)
    return out
