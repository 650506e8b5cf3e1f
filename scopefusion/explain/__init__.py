"""Why a place of a graph was or was not fused (:mod:`.explanation`), and the hints a run gives by
trying the passes it left out (:mod:`.hints`)."""
from __future__ import annotations

from .explanation import Explanation, PassVerdict, explain

__all__ = ["Explanation", "PassVerdict", "explain"]
