"""The cell passes on Keras 3 and tf_keras ``LSTM`` / ``GRU(unroll=True)`` and ``RNN(LSTMCell /
GRUCell, unroll=True)`` (see ``rnn_models.keras_rnn``): each step becomes one ``BasicLSTMCell``
or ``GRUCell`` whose weights an inner graph puts in the op's layout (``[kernel;
recurrent_kernel]``, gates reordered); GRUs with ``reset_after=True`` and LSTM options the op
cannot express are refused with the reason."""
from __future__ import annotations

import functools
import re

import pytest
import tensorflow as tf

import rnn_models as rm
from detection_models import tf1_graph_mode
from pass_checks import op_count
from test_rnn_cells import GRU, LSTM, S, assert_verifies, fuse

from scopefusion.testing import assert_fused, assert_not_matched

#: form -> (builder, pattern of the fused cells' names (Keras 3: one scope per step, numbered 1, 3,
#: 5 after the cell's own name, which Keras numbers per session), activation)
FORMS = {
    "Keras 3 LSTM": (lambda: rm.keras_rnn("keras", "LSTM"), r"lstm(_\d+)*/lstm_cell_[135]/cell", "tanh"),
    "Keras 3 RNN(LSTMCell) relu": (lambda: rm.keras_rnn("keras", "LSTM", cell=True, activation="relu", inputs=3),
                                   r"rnn(_\d+)*/lstm_cell(_\d+)?_[135]/cell", "relu"),
    "tf_keras LSTM": (lambda: rm.keras_rnn("tf_keras", "LSTM"), r"lstm(_\d+)?/lstm_cell/step_[012]/cell", "tanh"),
    "tf_keras RNN(LSTMCell)": (lambda: rm.keras_rnn("tf_keras", "LSTM", cell=True),
                               r"rnn(_\d+)?/lstm_cell(_\d+)?/step_[012]/cell", "tanh"),
    # no bias: the products split directly, the fused cell's bias zero (zeros_like a recurrent kernel row)
    "Keras 3 LSTM use_bias=False": (lambda: rm.keras_rnn("keras", "LSTM", use_bias=False),
                                    r"lstm(_\d+)*/lstm_cell(_\d+)?_[135]/cell", "tanh"),
    "tf_keras LSTM use_bias=False": (lambda: rm.keras_rnn("tf_keras", "LSTM", use_bias=False),
                                     r"lstm(_\d+)?/lstm_cell/step_[012]/cell", "tanh"),
}


@functools.cache
def model(form: str) -> rm.RnnModel:
    return {**FORMS, **MORE_FORMS}[form][0]()


def _lstm(lib, **options):
    return lib.layers.LSTM(rm.HIDDEN, unroll=True, return_sequences=True, **options)


def _cell_rnn(lib):
    return lib.layers.RNN(lib.layers.LSTMCell(rm.HIDDEN), unroll=True, return_sequences=True)


#: form -> (builder, BasicLSTMCell count, T)
MORE_FORMS = {
    "Keras 3 two stacked LSTM": (
        lambda: rm.keras_model("keras", lambda k: k.Sequential([_lstm(k), _lstm(k)])), 2 * S, tf.float32),
    "Keras 3 two RNN(LSTMCell) (the second cell's steps: lstm_cell_1_1, ...)": (
        lambda: rm.keras_model("keras", lambda k: k.Sequential([_cell_rnn(k), _cell_rnn(k)])), 2 * S, tf.float32),
    "Keras 3 Bidirectional LSTM": (
        lambda: rm.keras_model("keras", lambda k: k.layers.Bidirectional(_lstm(k))), 2 * S, tf.float32),
    "tf_keras Bidirectional LSTM": (
        lambda: rm.keras_model("tf_keras", lambda k: k.layers.Bidirectional(_lstm(k))), 2 * S, tf.float32),
    "Keras 3 LSTM mixed_float16": (
        lambda: rm.keras_model("keras", _lstm, policy="mixed_float16"), S, tf.float16),
    "tf_keras LSTM mixed_float16": (
        lambda: rm.keras_model("tf_keras", _lstm, policy="mixed_float16"), S, tf.float16),
}


@pytest.mark.parametrize("form", list(MORE_FORMS))
def test_stacked_bidirectional_and_mixed_precision_keras_lstms(form):
    m = model(form)
    _, count, dtype = MORE_FORMS[form]
    result = fuse(m)
    assert result.report.refused == []
    assert_fused(result, "BasicLSTMCell", count, forget_bias=0.0, T=dtype.as_datatype_enum)
    assert op_count(result.fused_graph_def, "MatMul", "BiasAdd", "Sigmoid") == 0
    assert_verifies(m, result)


@pytest.mark.parametrize("form", list(FORMS))
def test_each_keras_step_is_one_basic_lstm_cell_in_its_layout(form):
    m = model(form)
    _, names, activation = FORMS[form]
    result = fuse(m)
    assert result.report.refused == []
    cells = assert_fused(result, "BasicLSTMCell", S, forget_bias=0.0, activation=activation)
    assert all(re.fullmatch(names, c.name) for c in cells), [c.name for c in cells]
    assert len({c.name.rsplit("/", 1)[0][-1] for c in cells}) == S  # one per step
    # Keras's own step is gone; what is left of it are the weights and the inner graph's reordering
    assert op_count(result.fused_graph_def, "MatMul", "BiasAdd", "Sigmoid", "Tanh", "Mul") == 0
    assert op_count(result.fused_graph_def, "Split") == 2 * S and op_count(result.fused_graph_def, "ConcatV2") == 3 * S
    nodes = {n.name: n for n in result.fused_graph_def.node}
    biases = [nodes[nodes[c.name[:-len("cell")] + "bias_gates"].input[1]].op for c in cells]  # reordered into b
    assert all((op == "ZerosLike") == ("use_bias=False" in form) for op in biases), biases
    assert_verifies(m, result)


def test_the_inner_graph_stacks_the_kernels_and_reorders_the_gates():
    result = fuse(model("tf_keras LSTM"))
    nodes = {n.name: n for n in result.fused_graph_def.node}
    (cell,) = [n for n in nodes.values() if n.name.endswith("/lstm_cell/step_1/cell")]
    layer = cell.name.split("/")[0]  # tf_keras numbers layers per session: lstm, lstm_1, ...
    step = f"{layer}/lstm_cell/step_1"
    assert list(cell.input)[1:] == [f"{layer}/lstm_cell/step_0/cell", f"{layer}/lstm_cell/step_0/cell:1",
                                    f"{step}/w", f"{step}/b"]
    assert list(nodes[f"{step}/w"].input) == [f"{step}/kernel_gates", f"{step}/kernel_gates:2",
                                              f"{step}/kernel_gates:1", f"{step}/kernel_gates:3", f"{step}/axis_1"]
    assert nodes[f"{step}/stacked_kernel"].op == "ConcatV2"


def test_tf_keras_lstm_in_a_tf1_graph_has_one_scope_per_step():
    import tf_keras

    with tf1_graph_mode(control_flow_v1=True):
        m = rm.freeze(lambda x: [tf_keras.layers.LSTM(rm.HIDDEN, unroll=True, return_sequences=True)(x)])
    result = fuse(m)
    cells = assert_fused(result, "BasicLSTMCell", S, forget_bias=0.0, activation="tanh")
    assert sorted(c.name for c in cells) == [f"lstm/lstm_cell_{k}/cell" for k in (1, 2, 3)]
    assert_verifies(m, result)


RESET_AFTER = ("a Keras GRU cell with reset_after=True (its default) applies the reset after the recurrent matmul, "
               "r * (h @ recurrent_kernel_h + recurrent_bias), which GRUCell (TensorFlow's convention, the reset "
               "before the matmul) cannot express")

#: Keras GRUs with reset_after=False: (builder, activation)
GRU_FORMS = {
    "Keras 3 GRU reset_after=False": (lambda: rm.keras_rnn("keras", "GRU", reset_after=False), "tanh"),
    "Keras 3 RNN(GRUCell) reset_after=False relu": (
        lambda: rm.keras_rnn("keras", "GRU", cell=True, reset_after=False, activation="relu", inputs=3), "relu"),
    "tf_keras GRU reset_after=False": (lambda: rm.keras_rnn("tf_keras", "GRU", reset_after=False), "tanh"),
    "Keras 3 GRU reset_after=False use_bias=False": (
        lambda: rm.keras_rnn("keras", "GRU", reset_after=False, use_bias=False), "tanh"),
    "tf_keras GRU reset_after=False use_bias=False": (
        lambda: rm.keras_rnn("tf_keras", "GRU", reset_after=False, use_bias=False), "tanh"),
}


@pytest.mark.parametrize("form", list(GRU_FORMS))
def test_keras_gru_steps_without_reset_after_are_gru_cells_in_tensorflows_layout(form):
    build, activation = GRU_FORMS[form]
    m = build()
    result = fuse(m)
    assert result.report.refused == []
    cells = assert_fused(result, "GRUCell", S, activation=activation)
    assert all(c.name.endswith("/cell") and list(c.input)[4:] == [c.name[:-4] + "kernel_gates:2",
                                                                  c.name[:-4] + "bias_gates:2"] for c in cells)
    # Keras's step is gone: only its weights and the inner graph's reordering are left in the cells
    left = {n.op for n in result.fused_graph_def.node if "gru_cell" in n.name}
    zero_bias = {"StridedSlice", "ZerosLike"} if "use_bias=False" in form else set()  # zeros_like(recurrent_kernel[0])
    assert left == {"Const", "Identity", "ConcatV2", "Split", "GRUCell"} | zero_bias, left
    assert_verifies(m, result)


HARD_SIGMOID = ("the Keras {cell} cell's recurrent_activation is not sigmoid (e.g. hard_sigmoid), and the fused cell's "
                "gates are sigmoids")

REFUSED = {
    "Keras 3 LSTM recurrent_activation=hard_sigmoid": (
        dict(library="keras", kind="LSTM", recurrent_activation="hard_sigmoid"), LSTM, HARD_SIGMOID),
    "tf_keras LSTM recurrent_activation=hard_sigmoid": (
        dict(library="tf_keras", kind="LSTM", recurrent_activation="hard_sigmoid"), LSTM, HARD_SIGMOID),
    "Keras 3 GRU reset_after=False recurrent_activation=hard_sigmoid": (
        dict(library="keras", kind="GRU", reset_after=False, recurrent_activation="hard_sigmoid"), GRU, HARD_SIGMOID),
    "tf_keras LSTM implementation=1": (dict(library="tf_keras", kind="LSTM", implementation=1), LSTM,
                                       "no BasicLSTMCell step in the scope"),
    "Keras 3 GRU (reset_after=True)": (dict(library="keras", kind="GRU"), GRU, RESET_AFTER),
    "tf_keras GRU (reset_after=True)": (dict(library="tf_keras", kind="GRU"), GRU, RESET_AFTER),
    "Keras 3 RNN(GRUCell) (reset_after=True)": (dict(library="keras", kind="GRU", cell=True), GRU, RESET_AFTER),
}


@pytest.mark.parametrize("form", list(REFUSED))
def test_keras_cells_the_ops_cannot_express_are_refused(form):
    options, pass_name, reason = REFUSED[form]
    m = rm.keras_rnn(**options)
    result = fuse(m)
    assert op_count(result.fused_graph_def, "BasicLSTMCell", "GRUCell") == 0
    refused = [r for r in result.report.pass_report(pass_name).refused]
    assert len(refused) == (S if options["library"] == "keras" else 1), [r.name for r in refused]
    for r in refused:
        why = assert_not_matched(result, r.name)
        cell = "LSTM" if pass_name == LSTM else "GRU"
        assert why.startswith(f"{pass_name}: rejected by the pass: {reason.format(scope=r.name, cell=cell)}"), why
    assert_verifies(m, result)
