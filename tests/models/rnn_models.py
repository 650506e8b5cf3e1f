"""Graphs of recurrent layers built by the real libraries at small sizes (batch 2, 3 time steps,
hidden 4), with random weights, frozen to constants.

The tf.compat.v1 cells are ``tf_keras``'s legacy rnn_cell classes (what
``tf.compat.v1.nn.rnn_cell`` names when Keras 2 is in use), unrolled by
``tf.compat.v1.nn.static_rnn`` / ``static_bidirectional_rnn``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from tests.helpers.freeze import freeze_function, freeze_graph, random_variables

BATCH, STEPS, HIDDEN = 2, 3, 4


@dataclass
class RnnModel:
    """A frozen graph, its placeholder shapes and its output names."""

    graph_def: Any
    input_shapes: dict[str, list[int]]
    outputs: list[str]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def verify_options(self) -> dict[str, Any]:
        """How ``scopefusion.verify`` feeds and compares this graph (``tests.helpers.verify``): its
        placeholder shapes, the range of a fed sequence length, and every output within its dtype's
        absolute tolerance alone (``rtol`` 0: float32 within 1e-4, float16 within 1e-2)."""
        return {"input_shapes": self.input_shapes, "int_range": self.info.get("int_range", (0, 10)), "rtol": 0.0}


def rnn_cell_module() -> Any:
    """``tf.compat.v1.nn.rnn_cell`` as Keras 2 (tf_keras) provides it."""
    from tf_keras.api._v1.keras.__internal__.legacy import rnn_cell

    return rnn_cell


def freeze(build: Callable[[Any], list[Any]], *, inputs: int = 5, seed: int = 0, dtype: str = "float32",
           steps: int = STEPS) -> RnnModel:
    """Build ``build(x) -> outputs`` on a [BATCH, steps, inputs] placeholder in a TF1 graph,
    initialise its variables randomly (biases too) and freeze it."""
    import tensorflow as tf

    def on_placeholder() -> tuple[dict, list]:
        x = tf.compat.v1.placeholder(dtype, [BATCH, steps, inputs], name="x")
        return {}, [tf.identity(t, name=f"out_{k}") for k, t in enumerate(build(x))]

    graph_def, _, outputs = freeze_graph(on_placeholder, seed, initialize=random_variables(seed, dtype))
    return RnnModel(graph_def, {"x": [BATCH, steps, inputs]}, outputs)


def static_rnn(make_cell: Callable[[], Any], *, inputs: int = 5, final_state: bool = True,
               dtype: str = "float32", sequence_length: list[int] | None = None,
               control_flow_v1: bool = False) -> RnnModel:
    """``static_rnn(cell)`` over the unstacked input; outputs: the stacked outputs and (with
    ``final_state``) every tensor of the final state.  With ``sequence_length`` each step runs in
    a cond (TF1 ``Switch``/``Merge`` with ``control_flow_v1``, else a functional ``StatelessIf``)."""
    import tensorflow as tf

    from tests.models.detection_models import tf1_graph_mode

    def build(x: Any) -> list[Any]:
        lengths = None if sequence_length is None else tf.constant(sequence_length)
        outs, state = tf.compat.v1.nn.static_rnn(make_cell(), tf.unstack(x, axis=1), dtype=x.dtype,
                                                 sequence_length=lengths)
        return [tf.stack(outs, axis=1)] + (tf.nest.flatten(state) if final_state else [])

    with tf1_graph_mode(control_flow_v1):
        return freeze(build, inputs=inputs, dtype=dtype)


def static_bidirectional_rnn(make_cell: Callable[[], Any], *, inputs: int = 3) -> RnnModel:
    import tensorflow as tf

    def build(x: Any) -> list[Any]:
        outs, fw, bw = tf.compat.v1.nn.static_bidirectional_rnn(
            make_cell(), make_cell(), tf.unstack(x, axis=1), dtype=tf.float32)
        return [tf.stack(outs, axis=1)] + tf.nest.flatten((fw, bw))

    return freeze(build, inputs=inputs)


# --------------------------------------------------------------------------- the cells
def basic_lstm(**options: Any) -> Callable[[], Any]:
    return lambda: rnn_cell_module().BasicLSTMCell(HIDDEN, **options)


def lstm(**options: Any) -> Callable[[], Any]:
    return lambda: rnn_cell_module().LSTMCell(HIDDEN, **options)


def gru(**options: Any) -> Callable[[], Any]:
    return lambda: rnn_cell_module().GRUCell(HIDDEN, **options)


def keras_gru_cell(**options: Any) -> Callable[[], Any]:
    """tf_keras's own ``GRUCell`` (``reset_after=True`` by default), which ``dynamic_rnn`` runs too."""
    def make() -> Any:
        import tf_keras

        return tf_keras.layers.GRUCell(HIDDEN, **options)
    return make


def sigmoid_first_lstm(*, inputs: int = 5) -> RnnModel:
    """An LSTM in Keras's layout (``x @ W + h @ U + b``, gates i, f, g, o) unrolled over the steps
    with TensorFlow ops, each step taking the sigmoid of the whole gates' sum before splitting it
    (i, f, o are parts of ``split(sigmoid(z))``, g is ``tanh(split(z)[2])``), where the libraries'
    cells split first; outputs: the stacked outputs, h and c."""
    import tensorflow as tf

    tf1 = tf.compat.v1

    def build(x: Any) -> list[Any]:
        kernel = tf1.get_variable("kernel", [inputs, 4 * HIDDEN])
        recurrent = tf1.get_variable("recurrent_kernel", [HIDDEN, 4 * HIDDEN])
        bias = tf1.get_variable("bias", [4 * HIDDEN])
        h, c = tf.zeros([BATCH, HIDDEN]), tf.zeros([BATCH, HIDDEN])
        outs = []
        for x_t in tf.unstack(x, axis=1):
            with tf1.name_scope("lstm_step"):
                z = tf.matmul(x_t, kernel) + tf.matmul(h, recurrent) + bias
                i, f, _, o = tf.split(tf.sigmoid(z), 4, axis=1)
                g = tf.tanh(tf.split(z, 4, axis=1)[2])
                c = f * c + i * g
                h = o * tf.tanh(c)
                outs.append(h)
        return [tf.stack(outs, axis=1), h, c]

    return freeze(build, inputs=inputs)


def multi(*makers: Callable[[], Any]) -> Callable[[], Any]:
    return lambda: rnn_cell_module().MultiRNNCell([m() for m in makers])


# --------------------------------------------------------------------------- Keras layers
def keras_rnn(library: str, kind: str, *, inputs: int = 5, seed: int = 0, cell: bool = False,
              **options: Any) -> RnnModel:
    """Keras 3 (``library="keras"``) or tf_keras ``LSTM`` / ``GRU`` with ``unroll=True`` (or, with
    ``cell``, ``RNN(LSTMCell / GRUCell, unroll=True)``), returning the sequence and the final
    state, traced in a ``tf.function`` and frozen; every weight random."""

    def make(lib: Any) -> Any:
        if cell:
            return lib.layers.RNN(getattr(lib.layers, f"{kind}Cell")(HIDDEN, **options), unroll=True,
                                  return_sequences=True, return_state=True)
        return getattr(lib.layers, kind)(HIDDEN, unroll=True, return_sequences=True, return_state=True,
                                         **options)

    return keras_model(library, make, inputs=inputs, seed=seed)


def keras_model(library: str, make: Callable[[Any], Any], *, inputs: int = 5, seed: int = 0,
                policy: str = "float32", call: Callable[[Any, Any], Any] | None = None) -> RnnModel:
    """``make(keras module)`` -> a layer or model, built under the dtype ``policy`` (e.g.
    ``mixed_float16``) with every weight random (kept in ``info["weights"]``, in the layer's
    order), traced on a float32 input (``call(layer, x)``, default ``layer(x)``) and frozen."""
    import numpy as np
    import tensorflow as tf

    lib = __import__(library)
    lib.utils.set_random_seed(seed)
    lib.mixed_precision.set_global_policy(policy)
    try:
        layer = make(lib)
        layer.build((BATCH, STEPS, inputs))
    finally:
        lib.mixed_precision.set_global_policy("float32")
    rng = np.random.default_rng(seed)
    weights = [rng.uniform(-0.8, 0.8, np.shape(w)).astype(np.float32) for w in layer.get_weights()]
    layer.set_weights(weights)
    spec = tf.TensorSpec([BATCH, STEPS, inputs], tf.float32, name="x")
    graph_def, outputs, _ = freeze_function(lambda x: layer(x) if call is None else call(layer, x), {"x": spec})
    return RnnModel(graph_def, {"x": [BATCH, STEPS, inputs]}, outputs, info={"weights": weights})


# --------------------------------------------------------------------------- one tensor for h and c
def static_rnn_shared_state(make_cell: Callable[[], Any], *, inputs: int = 5) -> RnnModel:
    """``static_rnn(cell, initial_state=LSTMStateTuple(z, z))``: the initial h and c are one
    ``tf.zeros`` tensor (what merging identical constants makes of two zero states); outputs:
    the stacked outputs and the final c and h."""
    import tensorflow as tf

    def build(x: Any) -> list[Any]:
        zeros = tf.zeros([BATCH, HIDDEN], dtype=x.dtype)
        state = rnn_cell_module().LSTMStateTuple(zeros, zeros)
        outs, final = tf.compat.v1.nn.static_rnn(make_cell(), tf.unstack(x, axis=1), initial_state=state)
        return [tf.stack(outs, axis=1), *tf.nest.flatten(final)]

    return freeze(build, inputs=inputs)


def keras_lstm_shared_state(library: str, *, inputs: int = 5) -> RnnModel:
    """Keras 3 or tf_keras ``LSTM(unroll=True)`` called with ``initial_state=[z, z]``, one
    ``tf.zeros`` tensor for h and c; returns the sequence and the final state."""
    import tensorflow as tf

    def call(layer: Any, x: Any) -> Any:
        zeros = tf.zeros([BATCH, HIDDEN])
        return layer(x, initial_state=[zeros, zeros])

    return keras_model(library, lambda lib: lib.layers.LSTM(HIDDEN, unroll=True, return_sequences=True,
                                                            return_state=True), inputs=inputs, call=call)


def keras_lstm_gru(library: str = "tf_keras", *, inputs: int = 8, steps: int = 10, seed: int = 0) -> RnnModel:
    """A Keras ``Sequential`` of an ``LSTM`` returning sequences and a ``GRU`` (not unrolled: their
    loops lowered to TF1 control flow when frozen), every weight random."""
    import numpy as np
    import tensorflow as tf

    lib = __import__(library)
    lib.utils.set_random_seed(seed)
    model = lib.Sequential([lib.layers.LSTM(HIDDEN, return_sequences=True), lib.layers.GRU(HIDDEN)])
    model.build((BATCH, steps, inputs))
    rng = np.random.default_rng(seed)
    model.set_weights([rng.uniform(-0.8, 0.8, np.shape(w)).astype(np.float32) for w in model.get_weights()])
    spec = tf.TensorSpec([BATCH, steps, inputs], tf.float32, name="x")
    graph_def, outputs, _ = freeze_function(lambda x: model(x), {"x": spec})
    return RnnModel(graph_def, {"x": [BATCH, steps, inputs]}, outputs)
