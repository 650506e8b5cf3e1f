"""The labels patterns give scopes, one code per scope.

A pattern that matches labels the scope with its ``sub_type``; a later batch of the pattern set
counts labelled sub-scopes, and labels outside the final matches are undone.  Labels are held
as one integer per scope (by pre-order number, -1 for none) into a table of label names, so that
a batch's matches are labelled, and undone, in one step, and the scopes carrying a label are
one array comparison away.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

#: The labels of some scopes before a change: their numbers, and their label codes then.
Undo = tuple[np.ndarray, np.ndarray]


class ScopeLabels:
    """Every scope's label (by pre-order number) and, per label, the scopes carrying it."""

    def __init__(self, count: int) -> None:
        self.codes = np.full(count, -1, dtype=np.int32)
        self.names: list[str] = []
        self._code: dict[str, int] = {}
        self._positions: dict[str, list[int]] = {}  # label -> numbers of the scopes carrying it, sorted

    def of(self, k: int) -> str | None:
        """The label of scope ``k``, if any."""
        code = int(self.codes[k])
        return None if code < 0 else self.names[code]

    def _code_of(self, label: str | None) -> int:
        if label is None:
            return -1
        code = self._code.get(label)
        if code is None:
            code = self._code[label] = len(self.names)
            self.names.append(label)
        return code

    def set(self, positions: Sequence[int], label: str | None) -> Undo:
        """Label the scopes numbered ``positions`` (``None`` removes their labels); returns what
        undoes it (:meth:`undo`)."""
        at = np.asarray(positions, dtype=np.int64)
        before = self.codes[at]
        self.codes[at] = self._code_of(label)
        self._forget(before, label)
        return at, before

    def undo(self, change: Undo, keep: np.ndarray | None = None) -> None:
        """Put back the labels ``change`` replaced, but where ``keep`` (by scope number) is true."""
        at, before = change
        if keep is not None:
            back = ~keep[at]
            at, before = at[back], before[back]
        if len(at):
            self._forget(self.codes[at], None)
            self.codes[at] = before
            self._forget(before, None)

    def clear(self) -> None:
        """Remove every label."""
        self.codes.fill(-1)
        self._positions = {}

    def positions(self, label: str) -> list[int]:
        """The numbers of the scopes labelled ``label``, sorted (worked out once per change)."""
        known = self._positions.get(label)
        if known is None:
            code = self._code.get(label)
            known = [] if code is None else np.flatnonzero(self.codes == code).tolist()
            self._positions[label] = known
        return known

    def _forget(self, codes: np.ndarray, label: str | None) -> None:
        """Drop the kept positions of ``label`` and of the labels ``codes`` name (they change)."""
        if label is not None:
            self._positions.pop(label, None)
        for code in np.unique(codes).tolist():
            if code >= 0:
                self._positions.pop(self.names[code], None)
