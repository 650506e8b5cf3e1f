"""Recurrent cells step by step (tf.compat.v1 rnn_cell, Keras LSTM / GRU unrolled, or the step in a
loop's body, tf_keras's ``standard_lstm`` included): ``BasicLSTMCell`` and ``GRUCell``."""
from .ops import BASIC_LSTM_CELL, GRU_CELL
from .passes import ScopeBasicLSTMCellPass, ScopeGRUCellPass

__all__ = ["BASIC_LSTM_CELL", "GRU_CELL", "ScopeBasicLSTMCellPass", "ScopeGRUCellPass"]
