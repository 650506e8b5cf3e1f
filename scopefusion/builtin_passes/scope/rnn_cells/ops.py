"""The fused recurrent-cell ops and their reference implementations.

``BasicLSTMCell(x, h, c, w, b[, w_i_diag, w_f_diag, w_o_diag, proj]) -> (h, c)`` is one step of
TensorFlow's ``rnn_cell.BasicLSTMCell`` and ``LSTMCell``::

    i, j, f, o = split(bias_add(concat([x, h], 1) @ w, b), 4, axis=1)
    c' = c * sigmoid(f + forget_bias) + sigmoid(i) * activation(j)
    h' = activation(c') * sigmoid(o)

with ``w`` [input + hidden, 4 * hidden] and ``b`` [4 * hidden] in the gate order i, j, f, o.
``LSTMCell``'s options are optional inputs and attributes, each absent (or 0) by default, so a
node without them is the step above:

* peepholes ``w_i_diag``, ``w_f_diag``, ``w_o_diag`` ([hidden] each): the input and forget gates
  add ``w_i_diag * c`` and ``w_f_diag * c`` (the old state), the output gate ``w_o_diag * c'``
  (the new state, after clipping);
* ``cell_clip`` > 0: ``c'`` is clipped to [-cell_clip, cell_clip] before the output reads it;
* a projection ``proj`` [hidden, num_proj]: ``h' = (activation(c') * sigmoid(o)) @ proj``, clipped
  to [-proj_clip, proj_clip] when ``proj_clip`` > 0; ``h`` and ``h'`` are then [batch, num_proj]
  and ``w`` [input + num_proj, 4 * hidden].  A Keras
``LSTMCell`` is this op with ``forget_bias`` 0 and ``w`` = ``[kernel; recurrent_kernel]`` with its gate
columns i, f, c, o reordered to i, j (= c), f, o.

``GRUCell(x, h, gate_kernel, gate_bias, candidate_kernel, candidate_bias[, candidate_recurrent_bias])
-> (h)`` is one GRU step.  The gates are the same in both of its conventions::

    r, u = split(sigmoid(bias_add(concat([x, h], 1) @ gate_kernel, gate_bias)), 2, axis=1)
    h' = u * h + (1 - u) * h~

with ``gate_kernel`` [input + hidden, 2 * hidden] (r, then u) and ``candidate_kernel``
[input + hidden, hidden].  The candidate ``h~`` follows the ``reset_after`` attribute:

* ``reset_after=False`` (the default): TensorFlow's ``rnn_cell.GRUCell``, the reset applied to
  ``h`` before the candidate's matmul (Keras's ``reset_after=False``)::

      h~ = activation(bias_add(concat([x, r * h], 1) @ candidate_kernel, candidate_bias))

* ``reset_after=True``: Keras's default (and cuDNN's), the reset applied after the recurrent
  matmul, to the recurrent product and its own bias::

      h~ = activation(x @ candidate_kernel[:input] + candidate_bias
                      + r * (h @ candidate_kernel[input:] + candidate_recurrent_bias))

  ``candidate_recurrent_bias`` [hidden] is optional (absent: zero); only this convention has it.

A Keras ``GRUCell`` is this op with u = z and its weights rearranged: ``gate_kernel`` the r, z
columns of ``[kernel; recurrent_kernel]``, ``candidate_kernel`` its h columns; with
``reset_after=True`` Keras's bias is [2, 3 * hidden] (input, recurrent), and ``gate_bias`` is the
sum of both rows' r, z parts, ``candidate_bias`` the input row's h part and
``candidate_recurrent_bias`` the recurrent row's.
"""
from __future__ import annotations

from typing import Any

from ....core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg

#: The activations a cell may carry: its ``activation`` attribute -> the TensorFlow op type.
ACTIVATION_OPS: dict[str, str] = {
    "tanh": "Tanh", "relu": "Relu", "relu6": "Relu6", "elu": "Elu", "selu": "Selu",
    "sigmoid": "Sigmoid", "softsign": "Softsign", "softplus": "Softplus",
}
#: The other way round: op type -> attribute value.
ACTIVATION_NAMES: dict[str, str] = {v: k for k, v in ACTIVATION_OPS.items()}


def _activation(name: str) -> Any:
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    if name not in ACTIVATION_OPS:
        raise ValueError(f"activation {name!r} is not one of {', '.join(ACTIVATION_OPS)}")
    functions = {"tanh": tf.tanh, "relu": tf.nn.relu, "relu6": tf.nn.relu6, "elu": tf.nn.elu,
                 "selu": tf.nn.selu, "sigmoid": tf.sigmoid, "softsign": tf.nn.softsign,
                 "softplus": tf.nn.softplus}
    return functions[name]


def _gates(x: Any, h: Any, w: Any, b: Any) -> Any:
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    return tf.nn.bias_add(tf.matmul(tf.concat([x, h], 1), w), b)


def basic_lstm_cell_reference(x: Any, h: Any, c: Any, w: Any, b: Any, w_i_diag: Any = None, w_f_diag: Any = None,
                              w_o_diag: Any = None, proj: Any = None, *, forget_bias: float, activation: str,
                              cell_clip: float = 0.0, proj_clip: float = 0.0, T: Any) -> tuple[Any, Any]:
    """One LSTM step: (h', c') from input x [B, I], state h [B, H or P], c [B, H], w [I + H or P, 4H],
    b [4H], with the peepholes, clipping and projection given."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    act = _activation(activation)
    if proj_clip > 0 and proj is None:
        raise ValueError("proj_clip clips the projection: BasicLSTMCell has it only with proj")

    def peephole(gate: Any, weight: Any, state: Any) -> Any:
        return gate if weight is None else gate + weight * state

    def clip(value: Any, bound: float) -> Any:
        return value if bound <= 0 else tf.clip_by_value(value, -bound, bound)

    with tf.name_scope("basic_lstm_cell_reference"):
        i, j, f, o = tf.split(_gates(x, h, w, b), 4, axis=1)
        forget = peephole(f + tf.cast(forget_bias, f.dtype), w_f_diag, c)
        new_c = clip(c * tf.sigmoid(forget) + tf.sigmoid(peephole(i, w_i_diag, c)) * act(j), cell_clip)
        new_h = act(new_c) * tf.sigmoid(peephole(o, w_o_diag, new_c))
        if proj is not None:
            new_h = clip(tf.matmul(new_h, proj), proj_clip)
        return new_h, new_c


def gru_cell_reference(x: Any, h: Any, gate_kernel: Any, gate_bias: Any, candidate_kernel: Any,
                       candidate_bias: Any, candidate_recurrent_bias: Any = None, *, activation: str,
                       reset_after: bool = False, T: Any) -> tuple[Any]:
    """One GRU step: h' from x [B, I] and h [B, H], the reset before the candidate's matmul
    (TensorFlow's convention) or, with ``reset_after``, after its recurrent matmul (Keras's)."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    act = _activation(activation)
    if candidate_recurrent_bias is not None and not reset_after:
        raise ValueError("candidate_recurrent_bias is an input of GRUCell with reset_after=True only")
    with tf.name_scope("gru_cell_reference"):
        r, u = tf.split(tf.sigmoid(_gates(x, h, gate_kernel, gate_bias)), 2, axis=1)
        if reset_after:
            inputs = tf.shape(x)[1]
            from_x = tf.nn.bias_add(tf.matmul(x, candidate_kernel[:inputs]), candidate_bias)
            from_h = tf.matmul(h, candidate_kernel[inputs:])
            if candidate_recurrent_bias is not None:
                from_h = tf.nn.bias_add(from_h, candidate_recurrent_bias)
            candidate = act(from_x + r * from_h)
        else:
            candidate = act(_gates(x, r * h, candidate_kernel, candidate_bias))
        return (u * h + (1 - u) * candidate,)


def _activation_attr() -> AttrDef:
    return AttrDef("activation", "string", "tanh",
                   description=f"applied to the candidate and the new state: {', '.join(ACTIVATION_OPS)}")


#: LSTMCell's peepholes and projection, optional inputs of the LSTM ops (BasicLSTMCell, DynamicRNN)
LSTM_OPTION_INPUTS = (
    *(TensorArg(f"w_{g}_diag", type_attr="T", optional=True,
                description=f"[hidden] peephole: the {gate} gate adds w_{g}_diag * {state} (absent: none)")
      for g, gate, state in (("i", "input", "c"), ("f", "forget", "c"), ("o", "output", "c'"))),
    TensorArg("proj", type_attr="T", optional=True,
              description="[hidden, num_proj] projection of the output: h' = (act(c') * sigmoid(o)) @ proj "
                          "(absent: none)"),
)
#: LSTMCell's clipping, attributes of the LSTM ops (0: none)
LSTM_CLIP_ATTRS = (
    AttrDef("cell_clip", "float", 0.0,
            description="when > 0, the new cell state is clipped to [-cell_clip, cell_clip] (0: no clipping)"),
    AttrDef("proj_clip", "float", 0.0,
            description="when > 0, the projected output is clipped to [-proj_clip, proj_clip] (0: no clipping; "
                        "with proj only)"),
)

BASIC_LSTM_CELL = FusedOpDef(
    name="BasicLSTMCell",
    inputs=(
        TensorArg("x", type_attr="T", description="[batch, input] this step's input"),
        TensorArg("h", type_attr="T", description="[batch, hidden] the previous output"),
        TensorArg("c", type_attr="T", description="[batch, hidden] the previous cell state"),
        TensorArg("w", type_attr="T",
                  description="[input + hidden, 4 * hidden] kernel on concat(x, h), gates i, j, f, o"),
        TensorArg("b", type_attr="T", description="[4 * hidden] bias, gates i, j, f, o"),
        *LSTM_OPTION_INPUTS,
    ),
    outputs=(
        TensorArg("h", type_attr="T", description="[batch, hidden] (with proj: [batch, num_proj]) the new output"),
        TensorArg("c", type_attr="T", description="[batch, hidden] the new cell state"),
    ),
    attrs=(
        AttrDef("forget_bias", "float", 1.0, description="added to the forget gate before its sigmoid"),
        _activation_attr(),
        *LSTM_CLIP_ATTRS,
        AttrDef("T", "type"),
    ),
    reference=basic_lstm_cell_reference,
    description="one LSTM step (tf rnn_cell BasicLSTMCell / LSTMCell): gates i, j, f, o from concat(x, h); "
                "LSTMCell's peepholes, projection and clipping as optional inputs and attributes",
)


#: the GRU ops' ``reset_after`` attribute, which says the convention of their candidate
RESET_AFTER_ATTR = AttrDef(
    "reset_after", "bool", False,
    description="false: TensorFlow's convention, the reset multiplies h before the candidate's matmul on "
                "concat(x, r * h); true: Keras's default, it multiplies h @ candidate_kernel[input:] + "
                "candidate_recurrent_bias after the matmul")
#: the recurrent part of the candidate's bias in Keras's reset_after=True convention
CANDIDATE_RECURRENT_BIAS = TensorArg(
    "candidate_recurrent_bias", type_attr="T", optional=True,
    description="[hidden] added to h @ candidate_kernel[input:] before the reset (reset_after=True only; absent: 0)")

#: a GRU's weights in TensorFlow's layout, as GRUCell and DynamicGRUV2 take them
GRU_WEIGHTS = (
    TensorArg("gate_kernel", type_attr="T", description="[input + hidden, 2 * hidden] gates r, u on concat(x, h)"),
    TensorArg("gate_bias", type_attr="T", description="[2 * hidden] gate bias, r then u"),
    TensorArg("candidate_kernel", type_attr="T",
              description="[input + hidden, hidden] on concat(x, r * h) (reset_after=True: its first input rows "
                          "on x, the others on h)"),
    TensorArg("candidate_bias", type_attr="T",
              description="[hidden] candidate bias (reset_after=True: added to the input's product)"),
)

GRU_CELL = FusedOpDef(
    name="GRUCell",
    inputs=(
        TensorArg("x", type_attr="T", description="[batch, input] this step's input"),
        TensorArg("h", type_attr="T", description="[batch, hidden] the previous state"),
        *GRU_WEIGHTS,
        CANDIDATE_RECURRENT_BIAS,
    ),
    outputs=(TensorArg("h", type_attr="T", description="[batch, hidden] the new state"),),
    attrs=(_activation_attr(), RESET_AFTER_ATTR, AttrDef("T", "type")),
    reference=gru_cell_reference,
    description="one GRU step, h' = u * h + (1 - u) * candidate: reset_after=False is TensorFlow's rnn_cell GRUCell "
                "(the reset before the candidate matmul), reset_after=True Keras's default GRUCell (the reset after "
                "the recurrent matmul)",
)
