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

from .patterns import Feature, PatternSet, ScopeFeature, ScopePattern
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
    _tested: set[int] = field(default_factory=set, repr=False)
    _misses: dict[int, tuple[Scope, str, bool]] = field(default_factory=dict, repr=False)

    def tested(self, scope: Scope) -> None:
        if id(scope) not in self._tested:
            self._tested.add(id(scope))
            self.candidates += 1

    def near_miss(self, scope: Scope, pattern: ScopePattern, feature: Feature) -> None:
        """``scope`` missed ``pattern`` by ``feature`` only.  Of several misses of one scope the
        first is kept, unless it was only the scope's name and a later one is about its ops."""
        known = self._misses.get(id(scope))
        by_name = isinstance(feature, ScopeFeature) and bool(feature.suffix) and scope.last_name != feature.suffix
        if known is None or (known[2] and not by_name):
            self._misses[id(scope)] = (scope, f"pattern {pattern.sub_type}: {feature.explain(scope)}", by_name)

    def finish(self, matches: Sequence[Scope]) -> None:
        """Settle the near misses against the pass's final ``matches``."""
        matched = {id(m) for m in matches}
        related = set(matched)  # the matches and their ancestors
        for m in matches:
            s = m.parent
            while s is not None and id(s) not in related:
                related.add(id(s))
                s = s.parent
        within = _Within(matches)
        kept = [(scope.name, reason) for scope, reason, _ in self._misses.values()
                if id(scope) not in related and not within(scope)]
        self.near_miss_count = len(kept)
        self.near_misses = kept[:MAX_NEAR_MISSES]
        self._misses = {}
        self._tested = set()


class _Within:
    """Is a scope one of ``scopes`` or inside one?  Answers are remembered along
    the path walked up, so asking about many scopes costs about the tree's size."""

    def __init__(self, scopes: Sequence[Scope]) -> None:
        self._ids = {id(s) for s in scopes}
        self._known: dict[int, bool] = {}

    def __call__(self, scope: Scope) -> bool:
        path: list[int] = []
        s: Scope | None = scope
        answer = False
        while s is not None:
            known = self._known.get(id(s))
            if known is not None:
                answer = known
                break
            if id(s) in self._ids:
                answer = True
                break
            path.append(id(s))
            s = s.parent
        for k in path:
            self._known[k] = answer
        return answer


def search(tree: ScopeTree, pattern: ScopePattern, stats: MatchStats | None = None) -> list[Scope]:
    """Outermost scopes matching ``pattern``, in deterministic pre-order."""
    found: list[Scope] = []
    stack = [tree.root]
    # Without stats, a subtree that cannot have one feature is skipped; with
    # stats it is skipped only when it lacks two, so near misses are seen.
    prune_at = 1 if stats is None or len(pattern.features) < 2 else 2
    while stack:
        scope = stack.pop()
        if pattern.subtree_misses(scope, prune_at) >= prune_at:
            continue
        if stats is not None:
            stats.tested(scope)
            if not pattern.can_match(scope):
                failed = None
            else:
                failed = pattern.failures(scope)
                if not failed:
                    found.append(scope)
                    continue
            if failed is not None and len(failed) == 1 and len(pattern.features) > 1:
                stats.near_miss(scope, pattern, failed[0])
        elif pattern.match(scope):
            found.append(scope)
            continue
        children = scope.children
        if children:
            stack.extend(reversed(list(children.values())))
    return found


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
    kept = _Within(keep)
    for scope, previous in reversed(applied):
        if not kept(scope):
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
