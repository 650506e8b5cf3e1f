"""The failure of a pattern match: what did not match, and how far the attempt got."""
from __future__ import annotations


class MatchFailure(Exception):
    """An expression did not match; ``progress`` counts the ops matched before it failed."""

    def __init__(self, message: str, progress: int = 0) -> None:
        super().__init__(message)
        self.progress = progress
