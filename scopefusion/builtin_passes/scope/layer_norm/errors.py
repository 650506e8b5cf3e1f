"""The exception every analysis raises for a candidate it refuses."""
from __future__ import annotations


class NotLayerNorm(Exception):
    """The candidate scope is not a layer normalization we can represent."""
