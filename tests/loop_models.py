"""``tf.compat.v1.nn.dynamic_rnn`` loops built by the real library at small sizes (batch 2, input
3, hidden 4, 5 steps) with random weights, frozen to constants: under control flow v2 each call
is one functional ``StatelessWhile`` whose body runs the cell (every layer of a ``MultiRNNCell``)
once per step; under control flow v1 it is a TF1 while loop (Enter / Merge / Switch / Exit)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import rnn_models as rm
from rnn_models import RnnModel

STEPS, INPUTS = 5, 3


def dynamic_rnn(*makers: Callable[[], Any], sequence_length: Sequence[int] | None = None,
                time_major: bool = False, control_flow_v1: bool = False) -> RnnModel:
    """One ``dynamic_rnn`` call per cell maker, each reading the previous one's outputs (its own
    loop, variable scope ``layer_k``); outputs: the last call's outputs and every final state."""
    import tensorflow as tf

    from detection_models import tf1_graph_mode

    def build(x: Any) -> list[Any]:
        lengths = None if sequence_length is None else tf.constant(sequence_length)
        states: list[Any] = []
        outs = tf.transpose(x, [1, 0, 2]) if time_major else x
        for k, make in enumerate(makers):
            scope = "rnn" if len(makers) == 1 else f"layer_{k}"
            outs, state = tf.compat.v1.nn.dynamic_rnn(make(), outs, sequence_length=lengths, dtype=tf.float32,
                                                      time_major=time_major, scope=scope)
            states += tf.nest.flatten(state)
        return [outs] + states

    with tf1_graph_mode(control_flow_v1):
        return rm.freeze(build, inputs=INPUTS, steps=STEPS)


def keras(library: str, kind: str, **options: Any) -> RnnModel:
    """Stacked Keras 3 (``library="keras"``) or tf_keras ``LSTM`` / ``GRU`` layers, not unrolled
    (``function_models.keras_loop``), at this module's sizes: each layer's loop is a ``While``."""
    import function_models as fm

    return fm.keras_loop(library, kind, inputs=INPUTS, steps=STEPS, **options)
