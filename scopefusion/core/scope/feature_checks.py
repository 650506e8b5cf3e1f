"""A scope pattern checked feature by feature at one scope: what each feature wants and what
the scope has, in the graph's terms (``scopefusion explain``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from .matcher import match_pattern_sets
from .patterns import (
    Feature, NodeAttrFeature, NodeOpTypeFeature, PatternSet, ScopeFeature, ScopePattern, _count_rule,
)

if TYPE_CHECKING:  # pragma: no cover
    from .scope_graph import Scope, ScopeTree


@dataclass
class FeatureCheck:
    """One feature at one scope: what it wants, what was found, and whether it holds."""

    wanted: str
    found: str
    ok: bool


@dataclass
class PatternCheck:
    """One pattern at one scope (``label``: the sub-type it gives; ``where``: its pattern set and batch)."""

    label: str
    where: str
    features: list[FeatureCheck] = field(default_factory=list)
    can_match: bool = True  # False for the root scope or a scope holding a return node

    @property
    def holds(self) -> bool:
        return self.can_match and all(f.ok for f in self.features)


def check_feature(feature: Feature, scope: "Scope") -> FeatureCheck:
    ok = feature.match(scope)
    if isinstance(feature, NodeOpTypeFeature):
        return FeatureCheck(f"{_count_rule(feature.num, feature.step)} {feature.op_type} node(s)",
                            f"{scope.count(feature.op_type)}", ok)
    if isinstance(feature, NodeAttrFeature):
        return _attr_check(feature, scope, ok)
    return _scope_check(feature, scope, ok)


def _attr_check(feature: NodeAttrFeature, scope: "Scope", ok: bool) -> FeatureCheck:
    wanted, found = feature.wanted_and_found(scope)
    return FeatureCheck(wanted, found, ok)


def _scope_check(feature: ScopeFeature, scope: "Scope", ok: bool) -> FeatureCheck:
    wanted, found = [], []
    if feature.suffix:
        wanted.append(f"scope name {feature.suffix!r}")
        found.append(f"name {scope.last_name!r}")
    if feature.sub_type:
        count = scope.tree.count_labelled_below(scope, feature.sub_type)
        rule = _count_rule(feature.num, feature.step, feature.at_least)
        wanted.append(f"{rule} sub-scope(s) labelled {feature.sub_type!r}")
        found.append(f"{max(count, 0)} labelled")
    if feature.sub_scope_mask:
        names = [s.last_name for s in scope.all_sub_scopes() if feature.sub_scope_mask in s.last_name]
        wanted.append(f"a sub-scope whose name contains {feature.sub_scope_mask!r}")
        found.append(f"{names[0]!r}" + (f" and {len(names) - 1} more" if len(names) > 1 else "") if names
                     else "none")
    return FeatureCheck("; ".join(wanted) or "anything", "; ".join(found) or "-", ok)


def check_patterns(tree: "ScopeTree", pattern_sets: Sequence[PatternSet], scope: "Scope") -> list[PatternCheck]:
    """Every pattern of a pass at ``scope``, after the pass's own batches have labelled the tree
    (so features about labelled sub-scopes see what the pass's earlier batches found)."""
    tree.clear_labels()
    match_pattern_sets(tree, pattern_sets)
    checks = []
    for i, pattern_set in enumerate(pattern_sets, start=1):
        for j, batch in enumerate(pattern_set, start=1):
            for pattern in batch:
                checks.append(_check(pattern, scope, f"set {i}, batch {j}"))
    tree.clear_labels()
    return checks


def _check(pattern: ScopePattern, scope: "Scope", where: str) -> PatternCheck:
    check = PatternCheck(pattern.sub_type, where, can_match=pattern.can_match(scope))
    check.features = [check_feature(f, scope) for f in pattern.features]
    return check


__all__ = ["FeatureCheck", "PatternCheck", "check_feature", "check_patterns"]
