"""The failure of a pattern match: what did not match, and how far the attempt got.

Most failures are never shown (a match that fails at one place succeeds at another, a root that
fails is no near miss), so their reasons are written only when read: a reason is a function
writing the text, called at most once."""
from __future__ import annotations

from typing import Callable, Union

Reason = Union[str, Callable[[], str]]


class MatchFailure(Exception):
    """An expression did not match; ``progress`` counts the ops matched before it failed."""

    def __init__(self, message: Reason, progress: int = 0) -> None:
        if callable(message):
            super().__init__()
            self._reason: Callable[[], str] | None = message
        else:
            super().__init__(message)
            self._reason = None
        self.progress = progress

    def __str__(self) -> str:
        if self._reason is not None:
            reason, self._reason = self._reason, None
            self.args = (reason(),)
        return super().__str__()


class FurthestFailure:
    """Where a match attempt failed, kept while the matcher searches for the one that got
    furthest: ``progress`` (ops matched), the consumer and input slot the failing expression
    stood at (None at the root) and the reason (:attr:`message`, written when first read)."""

    __slots__ = ("progress", "where", "_reason", "_message")

    def __init__(self, progress: int, where: tuple[str, int] | None, reason: Reason) -> None:
        self.progress = progress
        self.where = where
        self._reason: Callable[[], str] | None = reason if callable(reason) else None
        self._message = reason if isinstance(reason, str) else ""

    @property
    def message(self) -> str:
        if self._reason is not None:
            reason, self._reason = self._reason, None
            self._message = reason()
        return self._message

    def text(self) -> str:
        if self.where is None:
            return self.message
        return f"input {self.where[1]} of {self.where[0]!r}: {self.message}"
