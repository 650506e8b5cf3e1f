"""ScopeBasicLSTMCellPass on Keras 3 and tf_keras ``LSTM(unroll=True)`` and ``RNN(LSTMCell,
unroll=True)`` (see ``rnn_models.keras_rnn``): each step becomes one ``BasicLSTMCell`` whose
kernel and bias an inner graph puts in the op's layout (``[kernel; recurrent_kernel]``, gates
i, f, c, o -> i, j, f, o); Keras GRU cells and LSTM options the op cannot express are refused."""
from __future__ import annotations

import functools

import pytest
import tensorflow as tf

import rnn_models as rm
from detection_models import tf1_graph_mode
from pass_checks import op_count
from test_rnn_cells import GRU, LSTM, S, assert_verifies, fuse

from scopefusion.testing import assert_fused, assert_not_matched

#: form -> (builder, names of the fused cells (Keras 3: one scope per step), activation)
FORMS = {
    "Keras 3 LSTM": (lambda: rm.keras_rnn("keras", "LSTM"),
                     [f"lstm/lstm_cell_{k}/cell" for k in (1, 3, 5)], "tanh"),
    "Keras 3 RNN(LSTMCell) relu": (lambda: rm.keras_rnn("keras", "LSTM", cell=True, activation="relu", inputs=3),
                                   [f"rnn/lstm_cell_{k}/cell" for k in (1, 3, 5)], "relu"),
    "tf_keras LSTM": (lambda: rm.keras_rnn("tf_keras", "LSTM"),
                      [f"lstm/lstm_cell/step_{t}/cell" for t in range(S)], "tanh"),
    "tf_keras RNN(LSTMCell)": (lambda: rm.keras_rnn("tf_keras", "LSTM", cell=True),
                               [f"rnn/lstm_cell/step_{t}/cell" for t in range(S)], "tanh"),
}


@functools.cache
def model(form: str) -> rm.RnnModel:
    return {**FORMS, **MORE_FORMS}[form][0]()


def _lstm(lib, **options):
    return lib.layers.LSTM(rm.HIDDEN, unroll=True, return_sequences=True, **options)


#: form -> (builder, BasicLSTMCell count, T)
MORE_FORMS = {
    "Keras 3 two stacked LSTM": (
        lambda: rm.keras_model("keras", lambda k: k.Sequential([_lstm(k), _lstm(k)])), 2 * S, tf.float32),
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


def _strip_layer_suffix(name: str) -> str:
    """Keras 3 uniquifies layer scopes across a session (``lstm_1``, ``lstm_2_1``): drop that."""
    first, _, rest = name.partition("/")
    return f"{first.split('_')[0]}/{rest}"


@pytest.mark.parametrize("form", list(FORMS))
def test_each_keras_step_is_one_basic_lstm_cell_in_its_layout(form):
    m = model(form)
    _, names, activation = FORMS[form]
    result = fuse(m)
    assert result.report.refused == []
    cells = assert_fused(result, "BasicLSTMCell", S, forget_bias=0.0, activation=activation)
    assert sorted(_strip_layer_suffix(c.name) for c in cells) == sorted(names)
    # Keras's own step is gone; what is left of it are the weights and the inner graph's reordering
    assert op_count(result.fused_graph_def, "MatMul", "BiasAdd", "Sigmoid", "Tanh", "Mul") == 0
    assert op_count(result.fused_graph_def, "Split") == 2 * S and op_count(result.fused_graph_def, "ConcatV2") == 3 * S
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


REFUSED = {
    "Keras 3 LSTM recurrent_activation=hard_sigmoid": (
        dict(library="keras", kind="LSTM", recurrent_activation="hard_sigmoid"), LSTM,
        "no BasicLSTMCell step in the scope: at '{scope}/mul': input 0 of '{scope}/mul': '{scope}/truediv_1' is "
        "RealDiv, expected Sigmoid"),
    "Keras 3 LSTM use_bias=False": (dict(library="keras", kind="LSTM", use_bias=False), LSTM,
                                    "no BasicLSTMCell step in the scope"),
    "tf_keras LSTM implementation=1": (dict(library="tf_keras", kind="LSTM", implementation=1), LSTM,
                                       "no BasicLSTMCell step in the scope"),
    "Keras 3 GRU": (dict(library="keras", kind="GRU"), GRU,
                    "the gates are not one matmul on concat(x, h), as GRUCell (TensorFlow's convention) computes "
                    "them: a Keras GRU cell multiplies x and h by separate kernels and, with reset_after=True (its "
                    "default), applies the reset after the recurrent matmul"),
    "Keras 3 GRU reset_after=False": (dict(library="keras", kind="GRU", reset_after=False), GRU,
                                      "the gates are not one matmul on concat(x, h)"),
    "tf_keras GRU": (dict(library="tf_keras", kind="GRU"), GRU, "the gates are not one matmul on concat(x, h)"),
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
        assert why.startswith(f"{pass_name}: rejected by the pass: {reason.format(scope=r.name)}"), why
    assert_verifies(m, result)
