"""Recurrent layers unrolled step by step (tf.compat.v1 rnn_cell, Keras LSTM): ``BasicLSTMCell`` and ``GRUCell``."""
from .ops import BASIC_LSTM_CELL, GRU_CELL
from .passes import ScopeBasicLSTMCellPass, ScopeGRUCellPass

__all__ = ["BASIC_LSTM_CELL", "GRU_CELL", "ScopeBasicLSTMCellPass", "ScopeGRUCellPass"]
