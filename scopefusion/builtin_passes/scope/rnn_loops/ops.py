"""The fused whole-sequence recurrent ops and their reference implementations.

``DynamicRNN(x, w, b, init_h, init_c) -> (y, h, c)`` runs ``BasicLSTMCell`` (gates i, j, f, o
on ``concat(x, h)``, :mod:`..rnn_cells.ops`) over every step of ``x``; ``DynamicGRUV2(x,
gate_kernel, gate_bias, candidate_kernel, candidate_bias, init_h[, candidate_recurrent_bias]) ->
(y, h)`` runs ``GRUCell`` in the convention its ``reset_after`` attribute says, as the cell's does
(gates r, u; false: TensorFlow's, the reset multiplies h before the candidate's matmul; true:
Keras's default, the reset multiplies the recurrent product and ``candidate_recurrent_bias``
after it).
``x`` is time-major, [steps, batch, input], when ``time_major`` is true (what the pass writes:
``dynamic_rnn`` transposes its input to that layout before its loop), else [batch, steps, input];
``y`` has the same layout with ``hidden`` features, each step's output; ``h`` and ``c`` are the
state after the last step.

``DynamicRNN`` takes ``BasicLSTMCell``'s options too (LSTMCell's peepholes ``w_i_diag``,
``w_f_diag``, ``w_o_diag`` and projection ``proj`` as optional inputs, ``cell_clip`` and
``proj_clip`` as attributes, each absent or 0 by default); with ``proj``, ``init_h``, ``h`` and
``y`` have ``num_proj`` features.

Both ops take an optional ``seq_length`` ([batch] int32, always the last input, present when the
node's ``optional_inputs`` lists it), with ``dynamic_rnn``'s ``sequence_length`` semantics: from step
``seq_length[b]`` on, sequence ``b``'s output is zero and its state is carried through unchanged,
so ``h`` / ``c`` are its state after its last valid step (its initial state for a length of 0 or
less; a length past the last step changes nothing).  Without it every step runs for every
sequence.
"""
from __future__ import annotations

from typing import Any, Callable

from ....core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ..rnn_cells.ops import (ACTIVATION_OPS, CANDIDATE_RECURRENT_BIAS, GRU_WEIGHTS, LSTM_CLIP_ATTRS,
                             LSTM_OPTION_INPUTS, RESET_AFTER_ATTR, basic_lstm_cell_reference, gru_cell_reference)


def _run_steps(x: Any, state: tuple[Any, ...], step: Callable[[Any, tuple[Any, ...]], tuple[Any, ...]],
               time_major: bool, seq_length: Any = None) -> tuple[Any, ...]:
    """``step(x_t, state) -> state'`` over the steps of ``x``: (y, final state...), y stacking
    every step's state[0] in ``x``'s layout; past ``seq_length[b]`` (when given) row ``b`` of y is
    zero and its state stays."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    if not time_major:
        x = tf.transpose(x, [1, 0, 2])
    steps = tf.shape(x)[0]
    outputs = tf.TensorArray(x.dtype, size=steps)

    def body(t: Any, ys: Any, *carried: Any) -> tuple[Any, ...]:
        new = tuple(step(x[t], carried))
        out = new[0]
        if seq_length is not None:
            done = tf.expand_dims(t >= seq_length, 1)  # [batch, 1]: this sequence has ended
            out = tf.where(done, tf.zeros_like(out), out)
            new = tuple(tf.where(done, old, value) for old, value in zip(carried, new, strict=True))
        return (t + 1, ys.write(t, out)) + new

    _, ys, *final = tf.while_loop(lambda t, *_: t < steps, body, (tf.constant(0), outputs) + state)
    y = ys.stack()
    return (y if time_major else tf.transpose(y, [1, 0, 2]), *final)


def dynamic_rnn_reference(x: Any, w: Any, b: Any, init_h: Any, init_c: Any, w_i_diag: Any = None,
                          w_f_diag: Any = None, w_o_diag: Any = None, proj: Any = None, seq_length: Any = None, *,
                          forget_bias: float, activation: str, time_major: bool, cell_clip: float = 0.0,
                          proj_clip: float = 0.0, T: Any) -> tuple[Any, Any, Any]:
    """BasicLSTMCell (with the peepholes, clipping and projection given) over the steps of ``x``
    (each sequence's first ``seq_length``): (y, h, c)."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    def step(x_t: Any, state: tuple[Any, ...]) -> tuple[Any, ...]:
        return basic_lstm_cell_reference(x_t, state[0], state[1], w, b, w_i_diag, w_f_diag, w_o_diag, proj,
                                         forget_bias=forget_bias, activation=activation, cell_clip=cell_clip,
                                         proj_clip=proj_clip, T=T)

    with tf.name_scope("dynamic_rnn_reference"):
        y, h, c = _run_steps(x, (init_h, init_c), step, time_major, seq_length)
        return y, h, c


def dynamic_gru_v2_reference(x: Any, gate_kernel: Any, gate_bias: Any, candidate_kernel: Any,
                             candidate_bias: Any, init_h: Any, candidate_recurrent_bias: Any = None,
                             seq_length: Any = None, *, activation: str, reset_after: bool = False,
                             time_major: bool, T: Any) -> tuple[Any, Any]:
    """GRUCell (TensorFlow's convention, or Keras's with ``reset_after``) over the steps of ``x``
    (each sequence's first ``seq_length``): (y, h)."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    def step(x_t: Any, state: tuple[Any, ...]) -> tuple[Any, ...]:
        return gru_cell_reference(x_t, state[0], gate_kernel, gate_bias, candidate_kernel, candidate_bias,
                                  candidate_recurrent_bias, activation=activation, reset_after=reset_after, T=T)

    with tf.name_scope("dynamic_gru_v2_reference"):
        y, h = _run_steps(x, (init_h,), step, time_major, seq_length)
        return y, h


def _common_attrs() -> tuple[AttrDef, ...]:
    return (
        AttrDef("activation", "string", "tanh",
                description=f"applied to the candidate and the new state: {', '.join(ACTIVATION_OPS)}"),
        AttrDef("time_major", "bool", True, description="x and y are [steps, batch, features] (else batch-major)"),
        AttrDef("T", "type"),
    )


_X = TensorArg("x", type_attr="T", description="[steps, batch, input] (time_major) or [batch, steps, input]")
_SEQ_LENGTH = TensorArg("seq_length", dtype="int32", optional=True,
                        description="[batch] each sequence's length: past it, y is zero and the state is carried "
                                    "through (dynamic_rnn's sequence_length)")
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
        *LSTM_OPTION_INPUTS,
        _SEQ_LENGTH,
    ),
    outputs=(
        _Y,
        TensorArg("h", type_attr="T", description="[batch, hidden] the output after the last (valid) step"),
        TensorArg("c", type_attr="T", description="[batch, hidden] the cell state after the last (valid) step"),
    ),
    attrs=(AttrDef("forget_bias", "float", 1.0, description="added to the forget gate before its sigmoid"),
           *LSTM_CLIP_ATTRS) + _common_attrs(),
    reference=dynamic_rnn_reference,
    description="an LSTM over the whole sequence (dynamic_rnn of BasicLSTMCell / LSTMCell): BasicLSTMCell per step, "
                "with its peepholes, projection and clipping when given",
)

DYNAMIC_GRU_V2 = FusedOpDef(
    name="DynamicGRUV2",
    inputs=(
        _X,
        *GRU_WEIGHTS,
        TensorArg("init_h", type_attr="T", description="[batch, hidden] the state before the first step"),
        CANDIDATE_RECURRENT_BIAS,
        _SEQ_LENGTH,
    ),
    outputs=(_Y, TensorArg("h", type_attr="T", description="[batch, hidden] the state after the last (valid) step")),
    attrs=_common_attrs()[:1] + (RESET_AFTER_ATTR,) + _common_attrs()[1:],
    reference=dynamic_gru_v2_reference,
    description="a GRU over the whole sequence (dynamic_rnn of GRUCell, a Keras GRU layer): GRUCell per step, gates "
                "r, u; reset_after=False is TensorFlow's convention (the reset before the candidate matmul), "
                "reset_after=True Keras's default (the reset after the recurrent matmul)",
)
