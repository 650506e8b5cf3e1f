"""``tf.compat.v1.nn.dynamic_rnn`` loops built by the real library at small sizes (batch 2, input
3, hidden 4, 5 steps) with random weights, frozen to constants: under control flow v2 each call
is one functional ``StatelessWhile`` whose body runs the cell (every layer of a ``MultiRNNCell``)
once per step; under control flow v1 it is a TF1 while loop (Enter / Merge / Switch / Exit)."""
from __future__ import annotations

from typing import Any, Callable, Literal, Sequence

from tests.models import rnn_models as rm
from tests.models.rnn_models import RnnModel

STEPS, INPUTS = 5, 3
#: ``sequence_length=FED``: the lengths are an int32 placeholder ``lengths`` [batch], which
#: verification feeds from :data:`FED_LENGTHS` (all shorter than the steps)
FED = "fed"
FED_LENGTHS = (0, STEPS - 1)
Lengths = Sequence[int] | Literal["fed"] | None


def _lengths(sequence_length: Lengths) -> Any:
    import tensorflow as tf

    if sequence_length is None:
        return None
    if sequence_length == FED:
        return tf.compat.v1.placeholder(tf.int32, [rm.BATCH], name="lengths")
    return tf.constant(sequence_length)


def _frozen(build: Callable[[Any], list[Any]], sequence_length: Lengths, control_flow_v1: bool) -> RnnModel:
    from tests.models.detection_models import tf1_graph_mode

    with tf1_graph_mode(control_flow_v1):
        model = rm.freeze(build, inputs=INPUTS, steps=STEPS)
    if sequence_length == FED:
        model.info["int_range"] = FED_LENGTHS
    return model


def dynamic_rnn(*makers: Callable[[], Any], sequence_length: Lengths = None, time_major: bool = False,
                control_flow_v1: bool = False) -> RnnModel:
    """One ``dynamic_rnn`` call per cell maker, each reading the previous one's outputs (its own
    loop, variable scope ``layer_k``); outputs: the last call's outputs and every final state."""
    import tensorflow as tf

    def build(x: Any) -> list[Any]:
        lengths = _lengths(sequence_length)
        states: list[Any] = []
        outs = tf.transpose(x, [1, 0, 2]) if time_major else x
        for k, make in enumerate(makers):
            scope = "rnn" if len(makers) == 1 else f"layer_{k}"
            outs, state = tf.compat.v1.nn.dynamic_rnn(make(), outs, sequence_length=lengths, dtype=tf.float32,
                                                      time_major=time_major, scope=scope)
            states += tf.nest.flatten(state)
        return [outs] + states

    return _frozen(build, sequence_length, control_flow_v1)


def bidirectional(make: Callable[[], Any], *, sequence_length: Lengths = None, time_major: bool = False,
                  control_flow_v1: bool = False) -> RnnModel:
    """``bidirectional_dynamic_rnn`` (scope ``bidirectional_rnn``): a loop per direction, the
    backward one over the input reversed (``ReverseSequence`` by the lengths, else ``ReverseV2``);
    outputs: both directions' outputs and final states."""
    import tensorflow as tf

    def build(x: Any) -> list[Any]:
        inputs = tf.transpose(x, [1, 0, 2]) if time_major else x
        outs, states = tf.compat.v1.nn.bidirectional_dynamic_rnn(
            make(), make(), inputs, sequence_length=_lengths(sequence_length), dtype=tf.float32,
            time_major=time_major)
        return list(outs) + tf.nest.flatten(states)

    return _frozen(build, sequence_length, control_flow_v1)


def keras(library: str, kind: str, **options: Any) -> RnnModel:
    """Stacked Keras 3 (``library="keras"``) or tf_keras ``LSTM`` / ``GRU`` layers, not unrolled
    (``function_models.keras_loop``), at this module's sizes: each layer's loop is a ``While``."""
    from tests.models import function_models as fm

    return fm.keras_loop(library, kind, inputs=INPUTS, steps=STEPS, **options)


def keras_tf1(kind: str, *, layers: int = 1, **options: Any) -> RnnModel:
    """tf_keras ``LSTM`` / ``GRU`` layers (``options``) built in a TF1 graph under control flow v1:
    Keras's ``backend.rnn`` writes each layer's time loop as a TF1 while loop (``lstm/while``) over
    TensorArrays, its cell scoped in the body (``lstm/while/lstm_cell``), the condition ``time < n``
    alone; outputs: the top layer's sequence and every layer's final state."""
    import tf_keras

    def build(x: Any) -> list[Any]:
        states: list[Any] = []
        outs = x
        for _ in range(layers):
            outs, *state = getattr(tf_keras.layers, kind)(rm.HIDDEN, return_sequences=True, return_state=True,
                                                          **options)(outs)
            states += state
        return [outs] + states

    return _frozen(build, None, True)


def layer_norm_in_cond() -> Any:
    """A frozen TF1 graph: a tf_slim layer norm feeding a v1 ``cond`` whose true branch is a dense
    layer.  TensorFlow colocates the ``Switch`` nodes with the tensors they switch (``_class:
    loc:@LayerNorm/batchnorm/add_1`` among them)."""
    import numpy as np
    import tensorflow as tf
    import tf_slim
    from tests.helpers.freeze import freeze_graph
    from tests.models.detection_models import tf1_graph_mode

    def build():
        x = tf.compat.v1.placeholder(tf.float32, [2, 8], name="x")
        pred = tf.compat.v1.placeholder(tf.bool, [], name="pred")
        ln = tf_slim.layers.layer_norm(x, begin_norm_axis=-1, begin_params_axis=-1)
        kernel = tf.constant(np.random.default_rng(0).normal(size=(8, 8)).astype(np.float32))
        bias = tf.constant([0.5] * 8)
        out = tf.compat.v1.cond(pred, lambda: tf.nn.bias_add(tf.matmul(ln, kernel), bias), lambda: ln - 1.0)
        return {}, [tf.identity(tf.tanh(out), name="y")]

    with tf1_graph_mode(control_flow_v1=True):
        frozen, _, _ = freeze_graph(build)
    return frozen
