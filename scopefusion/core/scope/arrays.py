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
    """Subtree ends, "may match" flags and op-type count columns, by pre-order number."""

    def __init__(self, tree: "ScopeTree") -> None:
        self._tree = tree
        layout = tree.layout
        #: one past the last scope of each subtree
        self.end = layout.end
        #: scopes a pattern may match (not the root, holding no return node)
        self.open = ~tree.contains_return
        self.open[0] = False
        #: the pre-order number of the scope each node lies directly in, by node index
        self.node_scope = layout.node_scope
        self._index = tree.index
        self._counts: dict[str, np.ndarray] = {}
        self._static: dict[Feature, np.ndarray] = {}
        self._last_names: tuple[np.ndarray, list[str]] | None = None  # codes, and the names they number
        self._code_of: dict[str, int] = {}
        self._named_below: dict[str, np.ndarray] = {}
        self._order: list[Scope] | None = None

    @property
    def order(self) -> list["Scope"]:
        """Every scope, in pre-order (the objects made on first use)."""
        if self._order is None:
            self._order = list(map(self._tree.scope_at, range(len(self.end))))
        return self._order

    def __len__(self) -> int:
        return len(self.end)

    @staticmethod
    def position(scope: "Scope") -> int:
        """The pre-order number of ``scope``."""
        return scope._k

    def counts(self, op_type: str) -> np.ndarray:
        """Every scope's count of ``op_type`` over its subtree, -1 where there is none."""
        column = self._counts.get(op_type)
        if column is None:
            n = len(self.end)
            nodes = self._index.nodes_of_type(op_type)
            column = self._tree.layout.range_counts(self.node_scope[nodes]) if nodes else np.zeros(n, dtype=np.int64)
            column[column == 0] = -1
            self._counts[op_type] = column
        return column

    def holds(self, feature: NodeOpTypeFeature) -> np.ndarray:
        """Where ``feature`` holds (:func:`..patterns.count_holds`, for every scope at once)."""
        return _counts_hold(self.counts(feature.op_type), feature.num, feature.step)

    def rules_out(self, feature: NodeOpTypeFeature) -> np.ndarray:
        """Where no scope of the subtree can have ``feature`` (a required op type is absent)."""
        if not count_requires_presence(feature.num, feature.step):
            return np.zeros(len(self.end), dtype=bool)
        return self.counts(feature.op_type) == -1

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
        n = len(self.end)
        counts = np.searchsorted(labelled, self.end, side="left") - np.searchsorted(
            labelled, np.arange(n), side="right")  # strictly below each scope
        holds = counts >= feature.num if feature.at_least else _counts_hold(counts, feature.num, feature.step)
        if feature.suffix or feature.sub_scope_mask:
            holds &= self.static_holds(ScopeFeature(suffix=feature.suffix, sub_scope_mask=feature.sub_scope_mask))
        return holds

    def _compute(self, feature: Feature) -> np.ndarray:
        if isinstance(feature, NodeOpTypeFeature):
            return self.holds(feature)
        if isinstance(feature, NodeAttrFeature):  # tested where the op lies directly in the scope
            out = np.zeros(len(self.end), dtype=bool)
            nodes = self._index.nodes
            having = [i for i in self._index.nodes_of_type(feature.op_type) if feature.holds_on(nodes[i])]
            out[self.node_scope[having]] = True
            return out
        if not isinstance(feature, ScopeFeature) or feature.sub_type:
            raise ValueError(f"{feature!r} depends on labels: see label_holds")
        out = np.ones(len(self.end), dtype=bool)
        if feature.suffix:
            out &= self.named(feature.suffix)
        if feature.sub_scope_mask:
            out &= self.named_below(feature.sub_scope_mask)
        return out

    def named(self, last_name: str) -> np.ndarray:
        """Where a scope's last name is ``last_name``."""
        codes, table = self._last_name_codes()
        code = self._code_of.get(last_name)
        return np.zeros(len(self.end), dtype=bool) if code is None else codes == code

    def _last_name_codes(self) -> tuple[np.ndarray, list[str]]:
        if self._last_names is None:
            self._last_names = self._tree.layout.last_names()
            self._code_of = dict(zip(self._last_names[1], range(len(self._last_names[1])), strict=True))
        return self._last_names

    def named_below(self, mask: str) -> np.ndarray:
        """Where some scope strictly below has a last name containing ``mask``."""
        known = self._named_below.get(mask)
        if known is None:
            codes, table = self._last_name_codes()
            named = np.asarray([mask in name for name in table], dtype=np.int64)[codes]
            running = np.concatenate(([0], np.cumsum(named)))  # a subtree is a range of the pre-order
            known = self._named_below[mask] = running[self.end] - running[1:] > 0
        return known


def _counts_hold(counts: np.ndarray, num: int, step: int) -> np.ndarray:
    """:func:`..patterns.count_holds` for every count at once (-1: nothing found)."""
    if step == 0:
        return counts == num
    return (counts != -1) & (counts % step == num)
