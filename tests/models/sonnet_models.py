"""Recurrent cores of DeepMind's Sonnet 2 (``snt.LSTM``, ``snt.GRU``) unrolled by Sonnet's own
helpers, at the sizes of ``rnn_models`` with random weights, traced in a ``tf.function`` and frozen.

Sonnet writes its cells with its own code and names its scopes after the module (``lstm``,
``gru``): ``snt.LSTM`` adds its bias with an ``AddV2`` (``x @ W_i + h @ W_h + b``, gates i, f, g,
o, the forget bias folded into ``b``); ``snt.GRU`` takes the columns of its gates with slices and
keeps the state where the update gate is low (``(1 - z) * h + z * a``).  ``snt.static_unroll``
calls the core once per step; ``snt.dynamic_unroll`` takes the first step before its
``tf.while_loop`` (which freezing lowers to a TF1 frame: ``while/merge/_16``, ...).
"""
from __future__ import annotations

from typing import Any

from tests.models.rnn_models import BATCH, HIDDEN, STEPS, RnnModel

INPUTS = 5


def sonnet(kind: str, *, unroll: str = "static", steps: int = STEPS, seed: int = 0, layers: int = 1,
           sequence_length: list[int] | None = None, **options: Any) -> RnnModel:
    """``snt.LSTM`` / ``snt.GRU`` (``kind``; ``layers`` of them stacked in an ``snt.DeepRNN``)
    unrolled by ``snt.static_unroll`` or ``snt.dynamic_unroll`` (with ``sequence_length``, a
    constant of one length per sequence, given to it) over a batch-major input; outputs: the
    outputs and the final state."""
    import numpy as np
    import sonnet as snt
    import tensorflow as tf

    from tests.helpers.freeze import freeze_function

    tf.random.set_seed(seed)
    cores = [{"LSTM": snt.LSTM, "GRU": snt.GRU}[kind](HIDDEN, **options) for _ in range(layers)]
    core = cores[0] if layers == 1 else snt.DeepRNN(cores)
    unroller = {"static": snt.static_unroll, "dynamic": snt.dynamic_unroll}[unroll]

    def run(x: Any) -> list[Any]:
        lengths = {} if sequence_length is None else {"sequence_length": tf.constant(sequence_length)}
        outputs, final = unroller(core, tf.transpose(x, [1, 0, 2]), core.initial_state(BATCH), **lengths)
        return [outputs] + tf.nest.flatten(final)

    run(tf.zeros([BATCH, steps, INPUTS]))  # creates the variables
    rng = np.random.default_rng(seed)
    for v in core.variables:
        v.assign(rng.uniform(-0.8, 0.8, v.shape).astype(np.float32))
    spec = tf.TensorSpec([BATCH, steps, INPUTS], tf.float32, name="x")
    graph_def, outputs, _ = freeze_function(run, {"x": spec})
    return RnnModel(graph_def, {"x": [BATCH, steps, INPUTS]}, outputs)
