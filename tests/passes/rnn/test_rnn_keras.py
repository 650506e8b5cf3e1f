"""The cell passes on Keras 3 and tf_keras ``LSTM`` / ``GRU(unroll=True)`` and ``RNN(LSTMCell /
GRUCell, unroll=True)`` (see ``rnn_models.keras_rnn``): each step becomes one ``BasicLSTMCell``
or ``GRUCell`` whose weights an inner graph puts in the op's layout (``[kernel;
recurrent_kernel]``, gates reordered; a GRU's ``reset_after`` kept as the cell's attribute); options
the ops cannot express are refused with the reason."""
from __future__ import annotations

import dataclasses
import functools
import re

import numpy as np
import pytest
import tensorflow as tf

from tests.models import rnn_models as rm
from tests.models.detection_models import tf1_graph_mode
from tests.helpers.pass_checks import op_count
from tests.helpers.pass_checks import REGISTRY
from tests.helpers.verify import assert_verifies
from tests.passes.rnn.test_rnn_cells import GRU, LSTM, S, fuse

import scopefusion
from scopefusion.builtin_passes.scope.rnn_cells.ops import gru_cell_reference
from scopefusion.core.verify.execute import run_graph_def
from scopefusion.core.verify.tf_form import to_tf_runnable
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


def _unrolled(lib, kind: str = "LSTM", **options):
    """An unrolled Keras ``LSTM`` or ``GRU`` layer returning every step."""
    return getattr(lib.layers, kind)(rm.HIDDEN, unroll=True, return_sequences=True, **options)


def _cell_rnn(lib, kind: str = "LSTM"):
    """``RNN(LSTMCell)`` or ``RNN(GRUCell)``, unrolled."""
    return lib.layers.RNN(getattr(lib.layers, f"{kind}Cell")(rm.HIDDEN), unroll=True, return_sequences=True)


#: form -> (builder, BasicLSTMCell count, T)
MORE_FORMS = {
    "Keras 3 two stacked LSTM": (
        lambda: rm.keras_model("keras", lambda k: k.Sequential([_unrolled(k), _unrolled(k)])), 2 * S, tf.float32),
    "Keras 3 two RNN(LSTMCell) (the second cell's steps: lstm_cell_1_1, ...)": (
        lambda: rm.keras_model("keras", lambda k: k.Sequential([_cell_rnn(k), _cell_rnn(k)])), 2 * S, tf.float32),
    "Keras 3 Bidirectional LSTM": (
        lambda: rm.keras_model("keras", lambda k: k.layers.Bidirectional(_unrolled(k))), 2 * S, tf.float32),
    "tf_keras Bidirectional LSTM": (
        lambda: rm.keras_model("tf_keras", lambda k: k.layers.Bidirectional(_unrolled(k))), 2 * S, tf.float32),
    "Keras 3 LSTM mixed_float16": (
        lambda: rm.keras_model("keras", _unrolled, policy="mixed_float16"), S, tf.float16),
    "tf_keras LSTM mixed_float16": (
        lambda: rm.keras_model("tf_keras", _unrolled, policy="mixed_float16"), S, tf.float16),
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
    assert not any(c.attr["reset_after"].b for c in cells if "reset_after" in c.attr)
    assert all(c.name.endswith("/cell") and list(c.input)[4:] == [c.name[:-4] + "kernel_gates:2",
                                                                  c.name[:-4] + "bias_gates:2"] for c in cells)
    # Keras's step is gone: only its weights and the inner graph's reordering are left in the cells
    left = {n.op for n in result.fused_graph_def.node if "gru_cell" in n.name}
    zero_bias = {"StridedSlice", "ZerosLike"} if "use_bias=False" in form else set()  # zeros_like(recurrent_kernel[0])
    assert left == {"Const", "Identity", "ConcatV2", "Split", "GRUCell"} | zero_bias, left
    assert_verifies(m, result)


#: Keras GRUs with reset_after=True, the default: (builder, activation).  Keras 3 splits its
#: [2, 3 * units] bias with Split + Squeeze in each step and cuts the recurrent product with
#: StridedSlice; tf_keras unstacks the bias (Unpack) and cuts the product with SplitV.
RESET_AFTER_FORMS = {
    "Keras 3 GRU": (lambda: rm.keras_rnn("keras", "GRU"), "tanh"),
    "Keras 3 RNN(GRUCell) relu": (lambda: rm.keras_rnn("keras", "GRU", cell=True, activation="relu", inputs=3), "relu"),
    "tf_keras GRU": (lambda: rm.keras_rnn("tf_keras", "GRU"), "tanh"),
    "tf_keras RNN(GRUCell) relu": (lambda: rm.keras_rnn("tf_keras", "GRU", cell=True, activation="relu"), "relu"),
    "Keras 3 GRU use_bias=False": (lambda: rm.keras_rnn("keras", "GRU", use_bias=False), "tanh"),
    "tf_keras GRU use_bias=False": (lambda: rm.keras_rnn("tf_keras", "GRU", use_bias=False), "tanh"),
}


@functools.cache
def reset_after_model(form: str) -> rm.RnnModel:
    return RESET_AFTER_FORMS[form][0]()


def _producer(nodes: dict, tensor: str):
    return nodes[tensor.split(":")[0].lstrip("^")]


@pytest.mark.parametrize("form", list(RESET_AFTER_FORMS))
def test_keras_gru_steps_with_reset_after_are_gru_cells_with_reset_after(form):
    """Each step is one GRUCell(reset_after=True) reading the step's x and the previous step's h;
    its weights come from the inner graph: the gate kernel from the r, z columns of [kernel;
    recurrent_kernel], the candidate kernel from its h columns, the gate bias from the sum of
    Keras's two bias rows, the candidate bias from the input row and the candidate's recurrent
    bias from the recurrent row (none without a bias)."""
    m = reset_after_model(form)
    _, activation = RESET_AFTER_FORMS[form]
    biased = "use_bias=False" not in form
    result = fuse(m)
    assert result.report.refused == []
    cells = assert_fused(result, "GRUCell", S, activation=activation, reset_after=True)
    assert len({c.name for c in cells}) == S and all(c.name.endswith("/cell") for c in cells)
    nodes = {n.name: n for n in result.fused_graph_def.node}
    by_input = {}
    for c in cells:
        step = c.name[:-len("cell")]
        listed = [s.decode() for s in c.attr["optional_inputs"].list.s]
        assert listed == (["candidate_recurrent_bias"] if biased else [])
        weights = [step + t for t in ("gate_kernel", "gate_bias", "kernel_gates:2", "bias_gates:2")]
        weights += [step + "recurrent_bias_gates:2"] if biased else []
        assert list(c.input)[2:] == weights
        gate_kernel = [step + t for t in ("kernel_gates:1", "kernel_gates", "axis_1")]  # r, z columns
        assert list(nodes[step + "gate_kernel"].input) == gate_kernel
        assert _producer(nodes, nodes[step + "kernel_gates"].input[1]).op == "ConcatV2"  # [kernel; recurrent_kernel]
        if biased:  # the gates: r, z of the rows' sum; the candidate: each row's h part
            assert list(nodes[step + "gate_bias_sum"].input) == [step + "bias_rows", step + "bias_rows:1"]
            assert nodes[step + "bias_gates"].input[1] == step + "bias_rows"
            assert nodes[step + "recurrent_bias_gates"].input[1] == step + "bias_rows:1"
        by_input[c.input[0]] = c
    # the steps read x's rows in turn, each the state the step before it gave
    x_rows = sorted(by_input, key=lambda t: int(t.partition(":")[2] or 0))
    assert [_producer(nodes, t).op for t in x_rows] == ["Unpack"] * S
    chain = [by_input[t] for t in x_rows]
    assert all(chain[t].input[1] == chain[t - 1].name for t in range(1, S))
    first = _producer(nodes, chain[0].input[1])  # the layer's zero initial state
    assert first.name.endswith("/zeros") and first.op in ("Fill", "Const"), (first.name, first.op)
    # Keras's step is gone: no product, gate, slice or bias split of it is left
    assert op_count(result.fused_graph_def, "MatMul", "BiasAdd", "Sigmoid", "Tanh", "Relu", "Mul", "SplitV",
                    "Squeeze") == 0
    assert_verifies(m, result)


def test_tf_keras_gru_in_a_tf1_graph_has_one_scope_per_step():
    import tf_keras

    with tf1_graph_mode(control_flow_v1=True):
        m = rm.freeze(lambda x: [tf_keras.layers.GRU(rm.HIDDEN, unroll=True, return_sequences=True)(x)])
    result = fuse(m)
    cells = assert_fused(result, "GRUCell", S, activation="tanh", reset_after=True)
    assert sorted(c.name for c in cells) == [f"gru/gru_cell_{k}/cell" for k in (1, 2, 3)]
    assert_verifies(m, result)


def _keras_gru_in_numpy(x, kernel, recurrent_kernel, bias):
    """Keras's GRU(reset_after=True) over x [batch, steps, input] in numpy, its own formulas:
    the sequence of states."""
    h = np.zeros((x.shape[0], recurrent_kernel.shape[0]), np.float32)
    outs = []
    for t in range(x.shape[1]):
        x_z, x_r, x_h = np.split(x[:, t] @ kernel + bias[0], 3, axis=1)
        h_z, h_r, h_h = np.split(h @ recurrent_kernel + bias[1], 3, axis=1)
        z, r = _sigmoid(x_z + h_z), _sigmoid(x_r + h_r)
        h = z * h + (1 - z) * np.tanh(x_h + r * h_h)
        outs.append(h)
    return np.stack(outs, 1)


def _gru_cell_reset_after_in_numpy(x, kernel, recurrent_kernel, bias):
    """What GRUCell(reset_after=True) declares, in numpy, on the weights the inner graph makes
    of Keras's: gates r, u from concat(x, h); the candidate's reset after the recurrent matmul."""
    units = recurrent_kernel.shape[0]
    stacked = np.concatenate([kernel, recurrent_kernel], 0)
    z_cols, r_cols, h_cols = np.split(stacked, 3, axis=1)
    gate_kernel, candidate_kernel = np.concatenate([r_cols, z_cols], 1), h_cols
    total = bias[0] + bias[1]
    gate_bias = np.concatenate([total[units:2 * units], total[:units]])
    candidate_bias, candidate_recurrent_bias = bias[0][2 * units:], bias[1][2 * units:]
    inputs = x.shape[2]
    h = np.zeros((x.shape[0], units), np.float32)
    outs = []
    for t in range(x.shape[1]):
        r, u = np.split(_sigmoid(np.concatenate([x[:, t], h], 1) @ gate_kernel + gate_bias), 2, axis=1)
        candidate = np.tanh(x[:, t] @ candidate_kernel[:inputs] + candidate_bias
                            + r * (h @ candidate_kernel[inputs:] + candidate_recurrent_bias))
        h = u * h + (1 - u) * candidate
        outs.append(h)
    return np.stack(outs, 1)


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


@pytest.mark.parametrize("form", ["Keras 3 GRU", "tf_keras GRU"])
def test_gru_cell_with_reset_after_is_keras_convention_on_the_real_weights(form):
    """Keras's formulas, GRUCell(reset_after=True)'s declaration on the weights in TensorFlow's
    layout, the real graph and the fused graph (running the reference) agree, in numpy."""
    m = reset_after_model(form)
    kernel, recurrent_kernel, bias = m.info["weights"]
    assert bias.shape == (2, 3 * rm.HIDDEN)
    x = np.random.default_rng(3).normal(size=(rm.BATCH, S, 5)).astype(np.float32)
    want = _keras_gru_in_numpy(x, kernel, recurrent_kernel, bias)
    np.testing.assert_allclose(_gru_cell_reset_after_in_numpy(x, kernel, recurrent_kernel, bias), want, atol=1e-5)
    fused = to_tf_runnable(fuse(m).fused_graph_def, REGISTRY.fused_ops)
    for graph in (m.graph_def, fused):
        got = run_graph_def(graph, {"x:0": x}, m.outputs)
        np.testing.assert_allclose(got[0], want, atol=1e-5)
        np.testing.assert_allclose(got[1], want[:, -1], atol=1e-5)  # the final state


def _reset_before(x, h, gate_kernel, gate_bias, candidate_kernel, candidate_bias, candidate_recurrent_bias=None, *,
                  activation, reset_after, T):
    """A wrong GRUCell reference: TensorFlow's convention whatever reset_after says (the reset
    before the matmul; the recurrent bias joins the candidate's)."""
    if candidate_recurrent_bias is not None:
        candidate_bias = candidate_bias + candidate_recurrent_bias
    return gru_cell_reference(x, h, gate_kernel, gate_bias, candidate_kernel, candidate_bias,
                              activation=activation, reset_after=False, T=T)


@pytest.mark.parametrize("form", ["Keras 3 GRU", "tf_keras GRU use_bias=False"])
def test_a_reference_with_the_reset_before_the_matmul_fails_verification(form):
    """The verification can tell the conventions apart: with a GRUCell reference that resets h
    before the candidate's matmul, the fused reset_after=True model no longer matches."""
    m = reset_after_model(form)
    result = fuse(m)
    wrong = {**REGISTRY.fused_ops, "GRUCell": dataclasses.replace(REGISTRY.fused_ops["GRUCell"],
                                                                   reference=_reset_before)}
    check = scopefusion.verify(m.graph_def, result.fused_graph_def, fused_ops=wrong, input_shapes=m.input_shapes,
                               runs=2)
    assert not check.passed and max(o.max_abs_error for o in check.outputs) > 1e-2, check.table()
    assert_verifies(m, result)  # the right reference does match


def test_the_gru_reference_takes_the_recurrent_bias_with_reset_after_only():
    """An absent candidate_recurrent_bias is a zero one; TensorFlow's convention has none, and a
    node giving it one is named as wrong rather than run."""
    rng = np.random.default_rng(4)
    x, h = (tf.constant(rng.normal(size=(2, n)), tf.float32) for n in (3, 4))
    weights = [tf.constant(rng.normal(size=shape), tf.float32) for shape in ((7, 8), (8,), (7, 4), (4,))]
    without = gru_cell_reference(x, h, *weights, activation="tanh", reset_after=True, T=tf.float32)
    zeros = gru_cell_reference(x, h, *weights, tf.zeros([4]), activation="tanh", reset_after=True, T=tf.float32)
    np.testing.assert_allclose(without[0].numpy(), zeros[0].numpy())
    before = gru_cell_reference(x, h, *weights, activation="tanh", reset_after=False, T=tf.float32)
    assert np.max(np.abs(before[0].numpy() - without[0].numpy())) > 1e-3  # the conventions differ
    with pytest.raises(ValueError, match="candidate_recurrent_bias is an input of GRUCell with reset_after=True only"):
        gru_cell_reference(x, h, *weights, tf.zeros([4]), activation="tanh", reset_after=False, T=tf.float32)


#: GRU(reset_after=True) models of several layers or mixed precision: (builder, GRUCell count, T)
def _gru(lib, **options):
    return _unrolled(lib, "GRU", **options)


MORE_GRU_FORMS = {
    "Keras 3 two stacked GRU": (
        lambda: rm.keras_model("keras", lambda k: k.Sequential([_gru(k), _gru(k)])), 2 * S, tf.float32),
    "Keras 3 two RNN(GRUCell) (the second cell's steps: gru_cell_1_1, ...)": (
        lambda: rm.keras_model("keras", lambda k: k.Sequential([_cell_rnn(k, "GRU"), _cell_rnn(k, "GRU")])), 2 * S,
        tf.float32),
    "tf_keras two stacked GRU": (
        lambda: rm.keras_model("tf_keras", lambda k: k.Sequential([_gru(k), _gru(k)])), 2 * S, tf.float32),
    "Keras 3 Bidirectional GRU": (
        lambda: rm.keras_model("keras", lambda k: k.layers.Bidirectional(_gru(k))), 2 * S, tf.float32),
    "tf_keras Bidirectional GRU": (
        lambda: rm.keras_model("tf_keras", lambda k: k.layers.Bidirectional(_gru(k))), 2 * S, tf.float32),
    "Keras 3 GRU mixed_float16": (lambda: rm.keras_model("keras", _gru, policy="mixed_float16"), S, tf.float16),
    "tf_keras GRU mixed_float16": (lambda: rm.keras_model("tf_keras", _gru, policy="mixed_float16"), S, tf.float16),
}


@pytest.mark.parametrize("form", list(MORE_GRU_FORMS))
def test_stacked_bidirectional_and_mixed_precision_keras_grus(form):
    build, count, dtype = MORE_GRU_FORMS[form]
    m = build()
    result = fuse(m)
    assert result.report.refused == []
    cells = assert_fused(result, "GRUCell", count, reset_after=True, T=dtype.as_datatype_enum)
    assert all([s.decode() for s in c.attr["optional_inputs"].list.s] == ["candidate_recurrent_bias"] for c in cells)
    assert op_count(result.fused_graph_def, "MatMul", "BiasAdd", "Sigmoid", "SplitV", "Squeeze") == 0
    if "two" in form:  # the upper layer's steps read the lower layer's states, the lower one's x
        nodes = {n.name: n for n in result.fused_graph_def.node}
        layers: dict[str, list] = {}
        for c in cells:  # each layer's steps read the rows of one Unpack (of its input, time-major)
            layers.setdefault(_producer(nodes, c.input[0]).name, []).append(c)
        assert sorted(len(v) for v in layers.values()) == [S, S], layers
        sources = {}
        for unpack, steps in layers.items():
            source = _producer(nodes, nodes[unpack].input[0])
            while source.op in ("Transpose", "Identity"):
                source = _producer(nodes, source.input[0])
            sources[source.op] = (source, steps)
        assert set(sources) == {"Placeholder", "Pack"}, sources
        (pack, _), (_, lower) = sources["Pack"], sources["Placeholder"]
        assert sorted(pack.input) == sorted(c.name for c in lower)
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
    "Keras 3 GRU recurrent_activation=hard_sigmoid": (
        dict(library="keras", kind="GRU", recurrent_activation="hard_sigmoid"), GRU, HARD_SIGMOID),
    "tf_keras GRU recurrent_activation=hard_sigmoid": (
        dict(library="tf_keras", kind="GRU", recurrent_activation="hard_sigmoid"), GRU, HARD_SIGMOID),
    "tf_keras LSTM implementation=1": (dict(library="tf_keras", kind="LSTM", implementation=1), LSTM,
                                       "no BasicLSTMCell step in the scope"),
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


def _ending(graph_def, suffix: str):
    (node,) = [n for n in graph_def.node if n.name.endswith(suffix)]
    return node


def _z_resets(graph_def) -> None:  # Keras 3, second step: the candidate's reset reads z, not r
    mul = _ending(graph_def, "/gru_cell_3/mul")
    assert mul.input[0].endswith("/Sigmoid_1")
    mul.input[0] = mul.input[0][:-len("_1")]


def _r_columns_slice(graph_def) -> None:  # Keras 3, second step: the h slice takes r's columns [u:2u]
    piece = _ending(graph_def, "/gru_cell_3/strided_slice_2")
    begin, end = (_ending(graph_def, f"/gru_cell_3/strided_slice_2/{c}") for c in ("stack", "stack_1"))
    assert list(tf.make_ndarray(begin.attr["value"].tensor)) == [0, 2 * rm.HIDDEN] and piece.attr["end_mask"].i == 3
    begin.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.array([0, rm.HIDDEN], np.int32)))
    end.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.array([0, 2 * rm.HIDDEN], np.int32)))
    piece.attr["end_mask"].i = 1


def _r_columns_split(graph_def) -> None:  # tf_keras, first step: the same, SplitV's output 1 for 2
    mul = _ending(graph_def, "/gru_cell/mul")
    assert mul.input[1].endswith("/split_1:2")
    mul.input[1] = mul.input[1][:-1] + "1"


@pytest.mark.parametrize("form, edit, refused, reason", [
    ("Keras 3 GRU", _z_resets, r"gru(_\d+)*/gru_cell_3", "no GRUCell step in the scope"),
    ("Keras 3 GRU", _r_columns_slice, r"gru(_\d+)*/gru_cell_3",
     "the slices of the recurrent product are not its z, r, h columns [:u], [u:2u], [2u:] (columns [(0, 4), (4, 8), "
     "(4, 8)])"),
    ("tf_keras GRU", _r_columns_split, r"gru(_\d+)*/gru_cell", "the scope computes more than GRUCell steps"),
])
def test_a_reset_after_look_alike_is_not_fused(form, edit, refused, reason):
    """The real reset_after=True graph with the candidate's reset changed (z for r, or r's
    columns of the recurrent product for h's) is no GRU step: its scope is refused with the
    reason, the fused graph still computes what the edited graph does, which is not what the
    real one does."""
    m = reset_after_model(form)
    graph_def = type(m.graph_def)()
    graph_def.CopyFrom(m.graph_def)
    edit(graph_def)
    edited = dataclasses.replace(m, graph_def=graph_def)
    result = fuse(edited)
    (refusal,) = result.report.pass_report(GRU).refused
    assert re.fullmatch(refused, refusal.name) and reason in refusal.reason, (refusal.name, refusal.reason)
    fused_steps = S - 1 if form.startswith("Keras 3") else 0  # Keras 3 scopes each step apart
    assert op_count(result.fused_graph_def, "GRUCell") == fused_steps
    assert_verifies(edited, result)
    check = scopefusion.verify(m.graph_def, result.fused_graph_def, fused_ops=REGISTRY.fused_ops,
                               input_shapes=m.input_shapes, runs=2)
    assert not check.passed  # the edit changed what the graph computes


def test_the_cell_pass_left_out_is_named_where_it_would_fuse():
    """An unrolled Keras 3 LSTM keeps MatMul and Split steps the graph passes leave: the cell pass,
    not enabled, is tried for hints and names them."""
    result = scopefusion.fuse(rm.keras_rnn("keras", "LSTM").graph_def, registry=REGISTRY)
    (hint,) = [h for h in result.report.hints if h.startswith("ScopeBasicLSTMCellPass is not enabled")]
    assert re.search(r"it would fuse [1-9]\d* place\(s\) \('lstm", hint)
