"""Scaled dot-product attention -> ``ScaledDotProductAttention`` (see :mod:`.attention_pass`)."""
from .attention_pass import AttentionFusionPass
from .op_def import ATTENTION

__all__ = ["ATTENTION", "AttentionFusionPass"]
