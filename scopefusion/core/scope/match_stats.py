"""What a pass's scope search looked at: the scopes tested and the near misses.

A near miss is a scope that missed a pattern by a single feature.  The search hands them over
in bulk, one batch per pattern searched (scope numbers and the feature each missed); they are
settled once the pass's final matches are known, and only the ones reported are written out.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Sequence

import numpy as np

from .arrays import ScopeArrays
from .patterns import Feature, ScopeFeature, ScopePattern

if TYPE_CHECKING:  # pragma: no cover
    from .scope_graph import Scope, ScopeTree

#: Near misses kept per pass (all are counted).
MAX_NEAR_MISSES = 50


class _Missed(NamedTuple):
    """The near misses of one search: scope numbers (ascending), the index of the feature each
    missed, whether that was only the scope's name, and for a label count the count found then."""

    tree: "ScopeTree"
    pattern: ScopePattern
    positions: np.ndarray
    which: np.ndarray
    by_name: np.ndarray
    found: np.ndarray


@dataclass
class MatchStats:
    """What a pass's search looked at: the scopes tested, and those that missed
    a pattern by a single feature (the "near misses"), with the reason.

    Misses are collected while the pattern sets run and settled by
    :meth:`finish` once the pass's final matches are known: a scope that is a
    match, lies inside one or holds one only looks like a near miss through
    that match and is not reported, and a scope that missed several patterns
    is reported once, with the first reason (unless that was only its name and
    a later one is about its ops).
    """

    candidates: int = 0
    near_miss_count: int = 0
    near_misses: list[tuple[str, str]] = field(default_factory=list)
    _tested_masks: dict[int, tuple[ScopeArrays, np.ndarray]] = field(default_factory=dict, repr=False)
    _missed: list[_Missed] = field(default_factory=list, repr=False)

    def tested_all(self, arrays: ScopeArrays, mask: np.ndarray) -> None:
        """Every scope of ``arrays`` where ``mask`` is true was tested."""
        known = self._tested_masks.get(id(arrays))
        if known is None:
            self.candidates += int(np.count_nonzero(mask))
            self._tested_masks[id(arrays)] = (arrays, mask.copy())
        else:
            self.candidates += int(np.count_nonzero(mask & ~known[1]))
            known[1][...] |= mask

    def missed(self, tree: "ScopeTree", pattern: ScopePattern, positions: np.ndarray, which: np.ndarray) -> None:
        """The scopes numbered ``positions`` (ascending) each missed ``pattern`` by its feature
        ``which`` only.  What depends on the labels of the moment (a label count) is noted now."""
        by_name = np.zeros(len(positions), dtype=bool)
        found = np.full(len(positions), -1, dtype=np.int64)
        for k in np.unique(which).tolist():
            feature = pattern.features[k]
            if not isinstance(feature, ScopeFeature):
                continue
            rows = which == k
            at = positions[rows]
            if feature.suffix:
                by_name[rows] = ~tree.arrays.named(feature.suffix)[at]
            if feature.sub_type:
                labelled = tree.labelled_positions(feature.sub_type)
                found[rows] = np.searchsorted(labelled, tree.layout.end[at]) - np.searchsorted(
                    labelled, at, side="right")
        self._missed.append(_Missed(tree, pattern, positions, which, by_name, found))

    def finish(self, matches: Sequence["Scope"]) -> None:
        """Settle the near misses against the pass's final ``matches``."""
        kept: dict[tuple[int, int], tuple[_Missed, int]] = {}  # (tree, scope number) -> first reason
        related: dict[int, np.ndarray] = {}
        for batch in self._missed:
            tree = batch.tree
            if id(tree) not in related:
                related[id(tree)] = _related(tree, [m._k for m in matches if m.tree is tree])
            for row in np.flatnonzero(~related[id(tree)][batch.positions]).tolist():
                key = (id(tree), int(batch.positions[row]))
                known = kept.get(key)
                if known is None or (known[0].by_name[known[1]] and not batch.by_name[row]):
                    kept[key] = (batch, row)
        self.near_miss_count = len(kept)
        self.near_misses = [_written(batch, row) for batch, row in list(kept.values())[:MAX_NEAR_MISSES]]
        self._missed = []
        self._tested_masks = {}


def _related(tree: "ScopeTree", matches: list[int]) -> np.ndarray:
    """Where a scope is a match, holds one or lies inside one."""
    if not matches:
        return np.zeros(len(tree.layout), dtype=bool)
    at = np.asarray(matches, dtype=np.int64)
    return (tree.layout.range_counts(at) > 0) | tree.layout.covered(at)


def _written(batch: _Missed, row: int) -> tuple[str, str]:
    """A near miss reported: the scope's name and why it missed."""
    scope = batch.tree.scope_at(int(batch.positions[row]))
    feature: Feature = batch.pattern.features[int(batch.which[row])]
    found = int(batch.found[row])
    if isinstance(feature, ScopeFeature) and feature.sub_type:
        text = feature.explain(scope, labelled=found)
    else:
        text = feature.explain(scope)
    return scope.name, f"pattern {batch.pattern.sub_type}: {text}"
