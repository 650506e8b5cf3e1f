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

from .patterns import PatternSet, ScopePattern
from .scope_graph import Scope, ScopeTree


def search(tree: ScopeTree, pattern: ScopePattern) -> list[Scope]:
    """Outermost scopes matching ``pattern``, in deterministic pre-order."""
    found: list[Scope] = []
    stack = [tree.root]
    while stack:
        scope = stack.pop()
        if pattern.rules_out_subtree(scope):
            continue
        if pattern.match(scope):
            found.append(scope)
            continue
        children = scope.children
        if children:
            stack.extend(reversed(list(children.values())))
    return found


def match_pattern_set(tree: ScopeTree, pattern_set: PatternSet) -> list[Scope]:
    """Run the batches of one pattern set; returns the final matches."""
    applied: list[tuple[Scope, str | None]] = []
    final: list[Scope] = []
    for batch in pattern_set:
        matched: list[Scope] = []
        seen: set[int] = set()
        for pattern in batch:
            for scope in search(tree, pattern):
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
    keep_ids = {id(s) for s in keep}
    for scope, previous in reversed(applied):
        if id(scope) in keep_ids or any(k.is_ancestor_of(scope) for k in keep):
            continue
        tree.set_label(scope, previous)


def match_pattern_sets(tree: ScopeTree, pattern_sets: Sequence[PatternSet]) -> list[Scope]:
    """Final matches of every pattern set, without duplicates, in order found."""
    out: list[Scope] = []
    seen: set[int] = set()
    for pattern_set in pattern_sets:
        for scope in match_pattern_set(tree, pattern_set):
            if id(scope) not in seen:
                seen.add(id(scope))
                out.append(scope)
    return out
