"""The scope tree as arrays, so that a pattern's features are one test over all scopes.

Scopes are numbered in the pre-order a search walks them (the root first, sub-scopes in order
of first appearance), so a scope's subtree is the range ``[i, end[i])``.  Per op type a
pattern asks about, one integer array holds every scope's count of it (-1 where the subtree
has none, as :func:`..patterns.count_holds` wants), built on first use and kept: counts never
change once the tree is built.  So do not names, sub-scope names and attributes: every feature
but a label count (``ScopeFeature(sub_type=...)``, whose labels change as patterns are applied)
is "static" and answered for all scopes at once, once per tree; a label count is answered for all
scopes at once too, from the numbers of the labelled scopes, each time it is asked.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from .patterns import Feature, NodeAttrFeature, NodeOpTypeFeature, ScopeFeature, count_requires_presence

if TYPE_CHECKING:  # pragma: no cover
    from .scope_graph import Scope, ScopeTree


class ScopeArrays:
    """Pre-order numbering, subtree ends, "may match" flags and op-type count columns."""

    def __init__(self, tree: "ScopeTree") -> None:
        order: list[Scope] = []
        parents: list[int] = []
        stack: list[tuple[Scope, int]] = [(tree.root, -1)]
        while stack:
            scope, parent = stack.pop()
            here = len(order)
            order.append(scope)
            parents.append(parent)
            if scope.children:
                stack.extend([(child, here) for child in reversed(scope.children.values())])
        size = [1] * len(order)
        for i in range(len(order) - 1, 0, -1):  # children come after their parent
            size[parents[i]] += size[i]
        #: every scope, in pre-order
        self.order = order
        #: one past the last scope of each subtree
        self.end = np.arange(len(order), dtype=np.int64) + np.asarray(size, dtype=np.int64)
        #: scopes a pattern may match (not the root, holding no return node)
        self.open = np.ones(len(order), dtype=bool)
        self.open[0] = False  # the root
        if tree.root.contains_return:  # so do the scopes holding one
            self.open[[k for k, s in enumerate(order) if s.contains_return]] = False
        #: the pre-order number of the scope each node lies directly in, by node index
        self._position = position = {id(scope): k for k, scope in enumerate(order)}
        self.node_scope = np.fromiter(map(position.__getitem__, map(id, tree.node_scope)), dtype=np.int64,
                                      count=len(tree.node_scope))
        self._index = tree.index
        self._counts: dict[str, np.ndarray] = {}
        self._static: dict[Feature, np.ndarray] = {}
        self._last_names: np.ndarray | None = None
        self._named_below: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.order)

    def position(self, scope: "Scope") -> int:
        """The pre-order number of ``scope``."""
        return self._position[id(scope)]

    def counts(self, op_type: str) -> np.ndarray:
        """Every scope's count of ``op_type`` over its subtree, -1 where there is none."""
        column = self._counts.get(op_type)
        if column is None:
            n = len(self.order)
            nodes = self._index.nodes_of_type(op_type)
            direct = np.bincount(self.node_scope[nodes], minlength=n) if nodes else np.zeros(n, dtype=np.int64)
            running = np.concatenate(([0], np.cumsum(direct)))  # a subtree is a range of the pre-order
            column = running[self.end] - running[:n]
            column[column == 0] = -1
            self._counts[op_type] = column
        return column

    def holds(self, feature: NodeOpTypeFeature) -> np.ndarray:
        """Where ``feature`` holds (:func:`..patterns.count_holds`, for every scope at once)."""
        return _counts_hold(self.counts(feature.op_type), feature.num, feature.step)

    def rules_out(self, feature: NodeOpTypeFeature) -> np.ndarray:
        """Where no scope of the subtree can have ``feature`` (a required op type is absent)."""
        if not count_requires_presence(feature.num, feature.step):
            return np.zeros(len(self.order), dtype=bool)
        return self.counts(feature.op_type) == -1  # type: ignore[no-any-return]

    @staticmethod
    def is_static(feature: Feature) -> bool:
        """Does ``feature`` hold or not whatever the labels are?"""
        return not (isinstance(feature, ScopeFeature) and feature.sub_type)

    def static_holds(self, feature: Feature) -> np.ndarray:
        """Where a static feature holds, for every scope (kept per feature)."""
        try:
            known = self._static.get(feature)
        except TypeError:  # an attribute feature with a list value: not hashable, not kept
            return self._compute(feature)
        if known is None:
            known = self._static[feature] = self._compute(feature)
        return known

    def label_holds(self, feature: ScopeFeature, labelled: Sequence[int]) -> np.ndarray:
        """Where a label-count feature holds, for every scope, when the scopes carrying its label
        are those numbered ``labelled`` (sorted): its count is a range count of them."""
        n = len(self.order)
        counts = np.searchsorted(labelled, self.end, side="left") - np.searchsorted(
            labelled, np.arange(n), side="right")  # strictly below each scope
        holds = counts >= feature.num if feature.at_least else _counts_hold(counts, feature.num, feature.step)
        if feature.suffix or feature.sub_scope_mask:
            holds &= self.static_holds(ScopeFeature(suffix=feature.suffix, sub_scope_mask=feature.sub_scope_mask))
        return holds  # type: ignore[no-any-return]

    def _compute(self, feature: Feature) -> np.ndarray:
        if isinstance(feature, NodeOpTypeFeature):
            return self.holds(feature)
        if isinstance(feature, NodeAttrFeature):  # tested where the op lies directly in the scope
            out = np.zeros(len(self.order), dtype=bool)
            for i in np.flatnonzero(self.counts(feature.op_type) > 0).tolist():
                out[i] = feature.match(self.order[i])
            return out
        if not isinstance(feature, ScopeFeature) or feature.sub_type:
            raise ValueError(f"{feature!r} depends on labels: see label_holds")
        out = np.ones(len(self.order), dtype=bool)
        if feature.suffix:
            out &= self.last_names() == feature.suffix
        if feature.sub_scope_mask:
            out &= self.named_below(feature.sub_scope_mask)
        return out

    def last_names(self) -> np.ndarray:
        """Every scope's last name (an object array)."""
        if self._last_names is None:
            names = np.empty(len(self.order), dtype=object)
            names[:] = [s.last_name for s in self.order]
            self._last_names = names
        return self._last_names

    def named_below(self, mask: str) -> np.ndarray:
        """Where some scope strictly below has a last name containing ``mask``."""
        known = self._named_below.get(mask)
        if known is None:
            named = np.fromiter((mask in name for name in self.last_names().tolist()), dtype=np.int64,
                                count=len(self.order))
            running = np.concatenate(([0], np.cumsum(named)))  # a subtree is a range of the pre-order
            known = self._named_below[mask] = running[self.end] - running[1:] > 0
        return known


def _counts_hold(counts: np.ndarray, num: int, step: int) -> np.ndarray:
    """:func:`..patterns.count_holds` for every count at once (-1: nothing found)."""
    if step == 0:
        return counts == num  # type: ignore[no-any-return]
    return (counts != -1) & (counts % step == num)  # type: ignore[no-any-return]
