"""Pattern search over the scope tree (reference semantics, section 3).

Searching one pattern tests a scope; a match is labelled and not descended
into, otherwise the search goes depth first into the sub-scopes.  The
outermost match wins and any number of parallel matches is kept.  Batches of a
pattern set run in order; the first batch that matches nothing ends the set
with no result, and the last batch's matches are the results.  Labels given by
earlier batches survive only inside a final match.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .arrays import ScopeArrays
from .patterns import Feature, NodeAttrFeature, NodeOpTypeFeature, PatternSet, ScopeFeature, ScopePattern
from .scope_graph import Scope, ScopeTree

#: Near misses kept per pass (all are counted).
MAX_NEAR_MISSES = 50


@dataclass
class MatchStats:
    """What a pass's search looked at: the scopes tested, and those that missed
    a pattern by a single feature (the "near misses"), with the reason.

    Misses are collected while the pattern sets run and settled by
    :meth:`finish` once the pass's final matches are known: a scope that is a
    match, lies inside one or holds one only looks like a near miss through
    that match and is not reported, and a scope that missed several patterns
    is reported once, with the first reason.
    """

    candidates: int = 0
    near_miss_count: int = 0
    near_misses: list[tuple[str, str]] = field(default_factory=list)
    _tested_masks: dict[int, tuple[ScopeArrays, np.ndarray]] = field(default_factory=dict, repr=False)
    #: per scope: the scope, its reason (text, or pattern and feature to write it from), by name only
    _misses: dict[int, tuple[Scope, "str | tuple[ScopePattern, Feature]", bool]] = field(default_factory=dict,
                                                                                         repr=False)

    def tested_all(self, arrays: ScopeArrays, mask: np.ndarray) -> None:
        """Every scope of ``arrays`` where ``mask`` is true was tested."""
        known = self._tested_masks.get(id(arrays))
        if known is None:
            self.candidates += int(np.count_nonzero(mask))
            self._tested_masks[id(arrays)] = (arrays, mask.copy())
        else:
            self.candidates += int(np.count_nonzero(mask & ~known[1]))
            known[1][...] |= mask

    def near_miss(self, scope: Scope, pattern: ScopePattern, feature: Feature) -> None:
        """``scope`` missed ``pattern`` by ``feature`` only.  Of several misses of one scope the
        first is kept, unless it was only the scope's name and a later one is about its ops."""
        known = self._misses.get(id(scope))
        by_name = isinstance(feature, ScopeFeature) and bool(feature.suffix) and scope.last_name != feature.suffix
        if known is None or (known[2] and not by_name):
            # the text is written when kept (finish), but a label count's now: labels change
            text = None if ScopeArrays.is_static(feature) else _reason(pattern, feature, scope)
            self._misses[id(scope)] = (scope, (pattern, feature) if text is None else text, by_name)

    def finish(self, matches: Sequence[Scope]) -> None:
        """Settle the near misses against the pass's final ``matches``."""
        misses = list(self._misses.values())
        if misses and matches:
            layout = misses[0][0].tree.layout
            at = np.asarray([m._k for m in matches], dtype=np.int64)
            # a match, an ancestor of one (one lies in its range) or inside one
            related = (layout.range_counts(at) > 0) | layout.covered(at)
            misses = [miss for miss in misses if not related[miss[0]._k]]
        kept = [(scope, reason) for scope, reason, _ in misses]
        self.near_miss_count = len(kept)
        self.near_misses = [(scope.name, reason if isinstance(reason, str) else _reason(*reason, scope))
                            for scope, reason in kept[:MAX_NEAR_MISSES]]
        self._misses = {}
        self._tested_masks = {}


def _reason(pattern: ScopePattern, feature: Feature, scope: Scope) -> str:
    """Why ``scope`` missed ``pattern``, written out only for the near misses reported."""
    return f"pattern {pattern.sub_type}: {feature.explain(scope)}"


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
            holds = arrays.label_holds(feature, tree.labelled_positions(feature.sub_type))  # type: ignore[union-attr]
        failing += ~holds
        tests.append(holds)
    reached = ruled_out < prune_at  # counts only shrink downwards: a skipped subtree is skipped whole
    to_test = np.flatnonzero(reached & arrays.open & (failing < prune_at))
    fails = failing[to_test]
    found = _outermost(to_test[fails == 0].tolist(), arrays.end)
    inside = _inside(found, arrays.end, n)
    missed = _first_failures(features, tests, to_test[fails == 1], inside) if near_misses else []
    if stats is not None:
        if near_misses:
            for i, feature in missed:
                stats.near_miss(tree.scope_at(i), pattern, feature)
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


def _first_failures(features: Sequence[Feature], tests: Sequence[np.ndarray], missing_one: np.ndarray,
                    inside: np.ndarray) -> list[tuple[int, Feature]]:
    """``(scope, feature)``: the one feature each scope of ``missing_one`` fails, but for the
    scopes inside a match, which the search does not reach."""
    missing_one = missing_one[~inside[missing_one]]
    if not len(missing_one):
        return []
    first = np.argmin(np.stack([holds[missing_one] for holds in tests]), axis=0)  # the False one
    return [(i, features[k]) for i, k in zip(missing_one.tolist(), first.tolist())]


def _inside(starts: Sequence[int], end: np.ndarray, n: int) -> np.ndarray:
    """Scopes strictly inside the subtrees rooted at ``starts`` (disjoint, as outermost matches are)."""
    first = np.asarray(starts, dtype=np.int64)
    marks = np.bincount(first + 1, minlength=n + 1) - np.bincount(end[first], minlength=n + 1)
    return np.cumsum(marks[:n]) > 0  # type: ignore[no-any-return]


def match_pattern_set(tree: ScopeTree, pattern_set: PatternSet, stats: MatchStats | None = None) -> list[Scope]:
    """Run the batches of one pattern set; returns the final matches."""
    applied: list[tuple[Scope, str | None]] = []
    final: list[Scope] = []
    for batch in pattern_set:
        matched: list[Scope] = []
        seen: set[int] = set()
        for pattern in batch:
            for scope in search(tree, pattern, stats):
                if id(scope) in seen:
                    continue
                seen.add(id(scope))
                applied.append((scope, scope.sub_type))
                tree.set_label(scope, pattern.sub_type)
                matched.append(scope)
        if not matched:
            _rollback(tree, applied, keep=())
            return []
        final = matched
    _rollback(tree, applied, keep=final)
    return final


def _rollback(tree: ScopeTree, applied: list[tuple[Scope, str | None]], keep: Sequence[Scope]) -> None:
    """Undo the labels of ``applied`` except on ``keep`` and the scopes inside them."""
    kept = tree.layout.covered([s._k for s in keep]).tolist() if keep else None
    for scope, previous in reversed(applied):
        if kept is None or not kept[scope._k]:
            tree.set_label(scope, previous)


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
