"""The fused whole-sequence recurrent ops and their reference implementations.

``DynamicRNN(x, w, b, init_h, init_c) -> (y, h, c)`` runs ``BasicLSTMCell`` (gates i, j, f, o
on ``concat(x, h)``, :mod:`..rnn_cells.ops`) over every step of ``x``; ``DynamicGRUV2(x,
gate_kernel, gate_bias, candidate_kernel, candidate_bias, init_h) -> (y, h)`` runs ``GRUCell``
(TensorFlow's convention: gates r, u; the reset multiplies h before the candidate's matmul).
``x`` is time-major, [steps, batch, input], when ``time_major`` is true (what the pass writes:
``dynamic_rnn`` transposes its input to that layout before its loop), else [batch, steps, input];
``y`` has the same layout with ``hidden`` features, each step's output; ``h`` and ``c`` are the
state after the last step.  Every step runs; there is no sequence length.
"""
from __future__ import annotations

from typing import Any, Callable

from ....core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ..rnn_cells.ops import ACTIVATION_OPS, basic_lstm_cell_reference, gru_cell_reference


def _run_steps(x: Any, state: tuple[Any, ...], step: Callable[[Any, tuple[Any, ...]], tuple[Any, ...]],
               time_major: bool) -> tuple[Any, ...]:
    """``step(x_t, state) -> state'`` over the steps of ``x``: (y, final state...), y stacking
    every step's state[0] in ``x``'s layout."""
    import tensorflow as tf

    if not time_major:
        x = tf.transpose(x, [1, 0, 2])
    steps = tf.shape(x)[0]
    outputs = tf.TensorArray(x.dtype, size=steps)

    def body(t: Any, ys: Any, *carried: Any) -> tuple[Any, ...]:
        new = step(x[t], carried)
        return (t + 1, ys.write(t, new[0])) + tuple(new)

    _, ys, *final = tf.while_loop(lambda t, *_: t < steps, body, (tf.constant(0), outputs) + state)
    y = ys.stack()
    return (y if time_major else tf.transpose(y, [1, 0, 2]), *final)


def dynamic_rnn_reference(x: Any, w: Any, b: Any, init_h: Any, init_c: Any, *, forget_bias: float,
                          activation: str, time_major: bool, T: Any) -> tuple[Any, Any, Any]:
    """BasicLSTMCell over every step of ``x``: (y, h, c)."""
    import tensorflow as tf

    def step(x_t: Any, state: tuple[Any, ...]) -> tuple[Any, ...]:
        return basic_lstm_cell_reference(x_t, state[0], state[1], w, b, forget_bias=forget_bias,
                                         activation=activation, T=T)

    with tf.name_scope("dynamic_rnn_reference"):
        y, h, c = _run_steps(x, (init_h, init_c), step, time_major)
        return y, h, c


def dynamic_gru_v2_reference(x: Any, gate_kernel: Any, gate_bias: Any, candidate_kernel: Any,
                             candidate_bias: Any, init_h: Any, *, activation: str, time_major: bool,
                             T: Any) -> tuple[Any, Any]:
    """GRUCell (TensorFlow's convention) over every step of ``x``: (y, h)."""
    import tensorflow as tf

    def step(x_t: Any, state: tuple[Any, ...]) -> tuple[Any, ...]:
        return gru_cell_reference(x_t, state[0], gate_kernel, gate_bias, candidate_kernel, candidate_bias,
                                  activation=activation, T=T)

    with tf.name_scope("dynamic_gru_v2_reference"):
        y, h = _run_steps(x, (init_h,), step, time_major)
        return y, h


def _common_attrs() -> tuple[AttrDef, ...]:
    return (
        AttrDef("activation", "string", "tanh",
                description=f"applied to the candidate and the new state: {', '.join(ACTIVATION_OPS)}"),
        AttrDef("time_major", "bool", True, description="x and y are [steps, batch, features] (else batch-major)"),
        AttrDef("T", "type"),
    )


_X = TensorArg("x", type_attr="T", description="[steps, batch, input] (time_major) or [batch, steps, input]")
_Y = TensorArg("y", type_attr="T", description="every step's output h, in x's layout with hidden features")

DYNAMIC_RNN = FusedOpDef(
    name="DynamicRNN",
    inputs=(
        _X,
        TensorArg("w", type_attr="T",
                  description="[input + hidden, 4 * hidden] kernel on concat(x, h), gates i, j, f, o"),
        TensorArg("b", type_attr="T", description="[4 * hidden] bias, gates i, j, f, o"),
        TensorArg("init_h", type_attr="T", description="[batch, hidden] the output before the first step"),
        TensorArg("init_c", type_attr="T", description="[batch, hidden] the cell state before the first step"),
    ),
    outputs=(
        _Y,
        TensorArg("h", type_attr="T", description="[batch, hidden] the output after the last step"),
        TensorArg("c", type_attr="T", description="[batch, hidden] the cell state after the last step"),
    ),
    attrs=(AttrDef("forget_bias", "float", 1.0, description="added to the forget gate before its sigmoid"),)
    + _common_attrs(),
    reference=dynamic_rnn_reference,
    description="an LSTM over the whole sequence (dynamic_rnn of BasicLSTMCell / LSTMCell): BasicLSTMCell per step",
)

DYNAMIC_GRU_V2 = FusedOpDef(
    name="DynamicGRUV2",
    inputs=(
        _X,
        TensorArg("gate_kernel", type_attr="T", description="[input + hidden, 2 * hidden] gates r, u on concat(x, h)"),
        TensorArg("gate_bias", type_attr="T", description="[2 * hidden] gate bias, r then u"),
        TensorArg("candidate_kernel", type_attr="T", description="[input + hidden, hidden] on concat(x, r * h)"),
        TensorArg("candidate_bias", type_attr="T", description="[hidden] candidate bias"),
        TensorArg("init_h", type_attr="T", description="[batch, hidden] the state before the first step"),
    ),
    outputs=(_Y, TensorArg("h", type_attr="T", description="[batch, hidden] the state after the last step")),
    attrs=_common_attrs(),
    reference=dynamic_gru_v2_reference,
    description="a GRU over the whole sequence (dynamic_rnn of GRUCell): GRUCell per step, TensorFlow's convention "
                "(gates r, u; the reset before the candidate matmul)",
)
