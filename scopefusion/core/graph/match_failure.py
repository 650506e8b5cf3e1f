"""The failure of a pattern match: what did not match, and how far the attempt got."""
from __future__ import annotations

from dataclasses import dataclass


class MatchFailure(Exception):
    """An expression did not match; ``progress`` counts the ops matched before it failed."""

    def __init__(self, message: str, progress: int = 0) -> None:
        super().__init__(message)
        self.progress = progress


@dataclass(frozen=True)
class FurthestFailure:
    """Where a match attempt failed, kept while the matcher searches for the one that got
    furthest: ``progress`` (ops matched), the consumer and input slot the failing expression
    stood at (None at the root) and the reason."""

    progress: int
    where: tuple[str, int] | None
    message: str

    def text(self) -> str:
        if self.where is None:
            return self.message
        return f"input {self.where[1]} of {self.where[0]!r}: {self.message}"
