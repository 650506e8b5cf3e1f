"""Recurrent layers' whole loops (dynamic_rnn under control flow v2) -> ``DynamicRNN`` / ``DynamicGRUV2``."""
from .ops import DYNAMIC_GRU_V2, DYNAMIC_RNN
from .passes import ScopeDynamicRNNPass

__all__ = ["DYNAMIC_GRU_V2", "DYNAMIC_RNN", "ScopeDynamicRNNPass"]
