"""Recurrent layers' whole loops (functional While loops and TF1 frames) -> ``DynamicRNN`` / ``DynamicGRUV2``."""
from .ops import DYNAMIC_GRU_V2, DYNAMIC_RNN
from .passes import ScopeDynamicRNNPass

__all__ = ["DYNAMIC_GRU_V2", "DYNAMIC_RNN", "ScopeDynamicRNNPass"]
