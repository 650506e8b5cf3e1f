"""``scopefusion.Session``: a TensorFlow session that fuses its graph as the reference's sessions do
(:mod:`.session`), with what only it uses: the fused session graph and its set-up, dumps, overflow
checks, probes, step statistics and variables."""
from __future__ import annotations

from .session import Session

__all__ = ["Session"]
