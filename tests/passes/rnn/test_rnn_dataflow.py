"""Recurrent cells and loops recognised by what they compute, not by their scope names.

Every scope of a graph built by the real library code is renamed to neutral names
(``neutral_names``: ``a_1/b_16/c_47``): the cell passes and the loop pass fuse exactly the
cells and loops they fuse in the original (counted by construction: one cell per step and
layer, one loop op per layer), and the renamed fused graph agrees with the renamed original.
Sonnet 2 (``sonnet_models``), a library with its own LSTM code and scope names (``lstm``),
its bias added with ``AddV2`` rather than ``BiasAdd``, is fused the same way, and so are its
``dynamic_unroll`` loop (a functional While lowered to a TF1 frame, its first step taken before
it) and tf_keras layers built in a TF1 graph (Keras's own TF1 loop).  LSTMCell's options
(peepholes, a projection, clipping) and Sonnet's projection are the fused ops' optional inputs
and attributes; look-alikes of them are refused with a reason read off the dataflow, whatever the
names.
"""
from __future__ import annotations

import functools

import pytest

from tests.helpers.neutral_names import neutral_names, renamed_tensor
from tests.helpers import verify
from tests.helpers.pass_checks import REGISTRY
from tests.models import loop_models as lm
from tests.models import rnn_models as rm
from tests.models import sonnet_models as sm

import scopefusion

PASSES = ["ScopeBasicLSTMCellPass", "ScopeGRUCellPass", "ScopeDynamicRNNPass"]
RNN_OPS = ("BasicLSTMCell", "GRUCell", "DynamicRNN", "DynamicGRUV2")
S, LS = rm.STEPS, lm.STEPS

#: form -> (builder, {fused op: count} by construction)
FORMS = {
    "static_rnn BasicLSTMCell": (lambda: rm.static_rnn(rm.basic_lstm()), {"BasicLSTMCell": S}),
    "static_rnn MultiRNNCell LSTMCell + GRUCell": (lambda: rm.static_rnn(rm.multi(rm.lstm(), rm.gru())),
                                                   {"BasicLSTMCell": S, "GRUCell": S}),
    # LSTMCell's options, carried by the fused op's optional inputs and attributes
    "static_rnn LSTMCell use_peepholes": (lambda: rm.static_rnn(rm.lstm(use_peepholes=True)), {"BasicLSTMCell": S}),
    "static_rnn LSTMCell num_proj": (lambda: rm.static_rnn(rm.lstm(num_proj=3)), {"BasicLSTMCell": S}),
    "static_rnn LSTMCell cell_clip": (lambda: rm.static_rnn(rm.lstm(cell_clip=1.0)), {"BasicLSTMCell": S}),
    "static_rnn LSTMCell every option": (
        lambda: rm.static_rnn(rm.lstm(use_peepholes=True, num_proj=3, cell_clip=1.0, proj_clip=0.5)),
        {"BasicLSTMCell": S}),
    # the sigmoid of the whole gates' sum taken before the split (an elementwise op and a split commute)
    "LSTM by hand, sigmoid before the split": (rm.sigmoid_first_lstm, {"BasicLSTMCell": S}),
    "Keras 3 LSTM(unroll=True)": (lambda: rm.keras_rnn("keras", "LSTM"), {"BasicLSTMCell": S}),
    "Keras 3 GRU(unroll=True)": (lambda: rm.keras_rnn("keras", "GRU"), {"GRUCell": S}),
    "tf_keras LSTM(unroll=True)": (lambda: rm.keras_rnn("tf_keras", "LSTM"), {"BasicLSTMCell": S}),
    "tf_keras GRU(unroll=True, reset_after=False)": (lambda: rm.keras_rnn("tf_keras", "GRU", reset_after=False),
                                                     {"GRUCell": S}),
    "dynamic_rnn BasicLSTMCell, TF1 loop": (lambda: lm.dynamic_rnn(rm.basic_lstm(), control_flow_v1=True),
                                            {"DynamicRNN": 1}),
    "dynamic_rnn GRUCell, functional While": (lambda: lm.dynamic_rnn(rm.gru()), {"DynamicGRUV2": 1}),
    "dynamic_rnn LSTMCell every option, sequence_length fed, functional While": (
        lambda: lm.dynamic_rnn(rm.lstm(use_peepholes=True, num_proj=3, cell_clip=1.0, proj_clip=0.5),
                               sequence_length=lm.FED), {"DynamicRNN": 1}),
    "dynamic_rnn LSTMCell(num_proj, cell_clip), LSTMCell(use_peepholes), TF1 loops": (
        lambda: lm.dynamic_rnn(rm.lstm(num_proj=3, cell_clip=1.0), rm.lstm(use_peepholes=True),
                               control_flow_v1=True), {"DynamicRNN": 2}),
    "tf_keras LSTM, two layers not unrolled": (lambda: lm.keras("tf_keras", "LSTM"), {"DynamicRNN": 2}),
    "Keras 3 GRU, two layers not unrolled": (lambda: lm.keras("keras", "GRU"), {"DynamicGRUV2": 2}),
    "Sonnet LSTM, static_unroll": (lambda: sm.sonnet("LSTM"), {"BasicLSTMCell": S}),
    "Sonnet GRU, static_unroll": (lambda: sm.sonnet("GRU"), {"GRUCell": S}),
    "Sonnet LSTM projection_size, static_unroll": (lambda: sm.sonnet("LSTM", projection_size=3),
                                                   {"BasicLSTMCell": S}),
    # a functional While lowered to a TF1 frame, its first step taken before it
    "Sonnet LSTM, dynamic_unroll": (lambda: sm.sonnet("LSTM", unroll="dynamic"), {"DynamicRNN": 1}),
    "Sonnet GRU, dynamic_unroll": (lambda: sm.sonnet("GRU", unroll="dynamic"), {"DynamicGRUV2": 1}),
    # two layers' steps before the loop, the lower one's output read by the upper one's input product
    # (no projection of the lower one's)
    "Sonnet DeepRNN of two LSTMs, dynamic_unroll": (lambda: sm.sonnet("LSTM", unroll="dynamic", layers=2),
                                                     {"DynamicRNN": 2}),
    "Sonnet LSTM projection_size, dynamic_unroll": (lambda: sm.sonnet("LSTM", unroll="dynamic", projection_size=3),
                                                    {"DynamicRNN": 1}),
    # Keras's own TF1 while loop over TensorArrays, its condition time < n alone
    "tf_keras LSTM, TF1 graph": (lambda: lm.keras_tf1("LSTM"), {"DynamicRNN": 1}),
    "tf_keras GRU, two layers, TF1 graph": (lambda: lm.keras_tf1("GRU", layers=2), {"DynamicGRUV2": 2}),
}


@functools.cache
def model(form: str) -> rm.RnnModel:
    return FORMS[form][0]()


@functools.cache
def renamed(form: str) -> rm.RnnModel:
    m = model(form)
    graph_def, names = neutral_names(m.graph_def)
    return rm.RnnModel(graph_def, {names[k]: v for k, v in m.input_shapes.items()},
                       [renamed_tensor(t, names) for t in m.outputs], m.info)


def fuse(m: rm.RnnModel):
    return scopefusion.fuse(m.graph_def, registry=REGISTRY, enable_scope_fusion_passes=PASSES, hints=False)


def counts(graph_def) -> dict[str, int]:
    found = {op: sum(n.op == op for n in graph_def.node) for op in RNN_OPS}
    return {op: k for op, k in found.items() if k}


def assert_verifies(m: rm.RnnModel, result) -> None:
    """Every output the model names matches, float32 within 1e-4 (the shared check)."""
    verify.assert_verifies(m, result, every_output=True)


def _names(graph_def) -> set[str]:
    parts = {p for n in graph_def.node for p in n.name.split("/")}
    parts |= {p for f in graph_def.library.function for n in f.node_def for p in n.name.split("/")}
    return parts


@pytest.mark.parametrize("form", list(FORMS))
def test_renamed_scopes_fuse_the_same_cells_and_loops(form):
    expected = FORMS[form][1]
    original, neutral = fuse(model(form)), fuse(renamed(form))
    assert counts(original.fused_graph_def) == expected
    assert counts(neutral.fused_graph_def) == expected
    # no name the passes could have read is left: every part of every name is neutral
    parts = _names(renamed(form).graph_def)
    assert not [p for p in parts if any(w in p.lower() for w in ("lstm", "gru", "cell", "while", "rnn"))]
    assert_verifies(renamed(form), neutral)


def _refusals(result, pass_name: str) -> list[str]:
    return [r.reason for r in result.report.pass_report(pass_name).refused]


def _sonnet_projection_of_the_state() -> rm.RnnModel:
    """Sonnet's projected LSTM with step 0's projection reading the cell state c', not the output
    sigmoid(o) * tanh(c'): no LSTM with a projection computes that."""
    m = sm.sonnet("LSTM", projection_size=3)
    graph_def = type(m.graph_def)()
    graph_def.CopyFrom(m.graph_def)
    nodes = {n.name: n for n in graph_def.node}
    assert nodes["lstm/MatMul_2"].input[0] == "lstm/mul_2"
    nodes["lstm/MatMul_2"].input[0] = "lstm/add_2"
    return rm.RnnModel(graph_def, m.input_shapes, m.outputs)


#: look-alike -> (builder, how the refusal starts whatever the names)
LOOK_ALIKES = {
    "Sonnet LSTM projection_size, a projection of the state": (
        _sonnet_projection_of_the_state, "the cell projects its output (the step's output is multiplied by a "
                                          "matrix), and no form of BasicLSTMCell with options reads it (e.g. "),
}


@pytest.mark.parametrize("form", list(LOOK_ALIKES))
def test_look_alikes_of_options_are_refused_by_dataflow_whatever_the_names(form):
    build, reason = LOOK_ALIKES[form]
    m = build()
    graph_def, names = neutral_names(m.graph_def)
    neutral = rm.RnnModel(graph_def, {names[k]: v for k, v in m.input_shapes.items()},
                          [renamed_tensor(t, names) for t in m.outputs])
    result = fuse(neutral)
    assert counts(result.fused_graph_def) == {}
    reasons = _refusals(result, "ScopeBasicLSTMCellPass")
    assert len(reasons) == 1 and reasons[0].startswith(f"rejected by the pass: {reason}"), reasons
    verify.assert_verifies(neutral, result)  # the sinks compared include step 0's output, left unread by the edit


def test_lstm_cell_options_are_the_fused_ops_optional_inputs_and_attributes():
    """LSTMCell(use_peepholes, num_proj, cell_clip, proj_clip): each step one BasicLSTMCell taking
    the peephole weights and the projection as optional inputs, the clips as attributes, whatever
    the scopes are named; its TensorFlow form computes what the cell does."""
    for graph_def in (model("static_rnn LSTMCell every option").graph_def,
                      renamed("static_rnn LSTMCell every option").graph_def):
        cells = [n for n in fuse(rm.RnnModel(graph_def, {}, [])).fused_graph_def.node if n.op == "BasicLSTMCell"]
        assert len(cells) == S
        for cell in cells:
            assert list(cell.attr["optional_inputs"].list.s) == [b"w_i_diag", b"w_f_diag", b"w_o_diag", b"proj"]
            assert len(cell.input) == 9
            assert (cell.attr["cell_clip"].f, cell.attr["proj_clip"].f, cell.attr["forget_bias"].f) == (1.0, 0.5, 1.0)
    only_clip = [n for n in fuse(model("static_rnn LSTMCell cell_clip")).fused_graph_def.node
                 if n.op == "BasicLSTMCell"]
    assert only_clip and all(not n.attr["optional_inputs"].list.s and len(n.input) == 5
                             and n.attr["cell_clip"].f == 1.0 and n.attr["proj_clip"].f == 0.0 for n in only_clip)
    assert_verifies(model("static_rnn LSTMCell every option"), fuse(model("static_rnn LSTMCell every option")))


def _output_peephole_reads_the_old_state(nodes) -> None:  # step 1's o gate: w_o_diag * c, not * c'
    nodes["rnn/lstm_cell/mul_10"].input[1] = "rnn/lstm_cell/add_3"


def _cell_clip_asymmetric(nodes) -> None:  # step 1 clips its state to [-0.5, 1]
    import numpy as np
    import tensorflow as tf

    nodes["rnn/lstm_cell/clip_by_value_1/y"].attr["value"].tensor.CopyFrom(
        tf.make_tensor_proto(np.float32(-0.5)))


@pytest.mark.parametrize("form, edit, reason, fused", [
    # no form with peepholes matches step 1 (read by step 2): the scope refused whole, naming the option
    ("static_rnn LSTMCell use_peepholes", _output_peephole_reads_the_old_state,
     "the cell has peephole connections (LSTMCell use_peepholes=True), and no form of BasicLSTMCell with options "
     "reads it (e.g. 'rnn/lstm_cell/w_f_diag')", {}),
    # the step matches, but its clip is no cell_clip (which clips to [-bound, bound]): that step alone refused
    ("static_rnn LSTMCell cell_clip", _cell_clip_asymmetric,
     "the cell clips to [[-0.5], [1.]], not to [-bound, bound] with a scalar bound > 0, which is what cell_clip says",
     {"BasicLSTMCell": S - 1}),
])
def test_an_lstm_cell_option_look_alike_is_refused(form, edit, reason, fused):
    m = _edited(model(form), edit)
    result = fuse(m)
    refused = _refusals(result, "ScopeBasicLSTMCellPass")
    assert any(r.startswith(f"rejected by the pass: {reason}") for r in refused), refused
    assert counts(result.fused_graph_def) == fused
    assert_verifies(m, result)


def test_sonnet_lstm_is_keras_layout_with_the_forget_bias_in_its_bias():
    """snt.LSTM: gates i, f, g, o from x @ W_i + h @ W_h + b (AddV2, no BiasAdd); its forget bias is
    folded into b when the bias is made, so the fused cells carry forget_bias 0."""
    m = model("Sonnet LSTM, static_unroll")
    result = fuse(m)
    cells = [n for n in result.fused_graph_def.node if n.op == "BasicLSTMCell"]
    assert len(cells) == S
    assert all(n.attr["forget_bias"].f == 0.0 and n.attr["activation"].s == b"tanh" for n in cells)
    # the steps' products and gates are gone (left: the weights put in the op's layout, a Split of each)
    assert not any(n.op in ("MatMul", "Sigmoid", "Tanh", "AddV2") for n in result.fused_graph_def.node)
    assert_verifies(m, result)


def test_sonnet_dynamic_unroll_is_one_loop_op_with_the_step_taken_before_the_loop():
    """snt.dynamic_unroll takes its first step before a tf.while_loop, which freezing lowers to a TF1
    frame whose loop variables the body reads through Identity chains, its time a range kept in the
    loop (start 1, a step size it carries), an output it only overwrites.  The step before the loop
    is the loop's own cell on row 0: the whole is one DynamicRNN over every row."""
    m = model("Sonnet LSTM, dynamic_unroll")
    result = fuse(m)
    assert counts(result.fused_graph_def) == {"DynamicRNN": 1}
    left = {n.op for n in result.fused_graph_def.node}
    assert not left & {"TensorListFromTensor", "TensorListGetItem", "TensorListSetItem", "Enter", "Merge", "MatMul"}
    (loop,) = [n for n in result.fused_graph_def.node if n.op == "DynamicRNN"]
    assert loop.attr["forget_bias"].f == 0.0 and loop.attr["time_major"].b
    assert_verifies(m, result)


def _sonnet_step_before_with_other_kernel(m: rm.RnnModel) -> rm.RnnModel:
    """The step before the loop reading a kernel of its own (the loop's, halved)."""
    import tensorflow as tf

    graph_def = type(m.graph_def)()
    graph_def.CopyFrom(m.graph_def)
    nodes = {n.name: n for n in graph_def.node}
    read = nodes["lstm/MatMul/ReadVariableOp"]  # the step before the loop reads its kernel here
    kernel = nodes[read.input[0]]
    other = graph_def.node.add()
    other.CopyFrom(kernel)
    other.name = "other_kernel"
    other.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(tf.make_ndarray(kernel.attr["value"].tensor) * 0.5))
    read.input[0] = "other_kernel"
    return rm.RnnModel(graph_def, m.input_shapes, m.outputs)


def _keras_tf1_wrong_gate_product(m: rm.RnnModel) -> rm.RnnModel:
    """tf_keras's TF1 loop body with ``sigmoid(i) * tanh(o)`` where the cell has
    ``sigmoid(i) * tanh(g)``: a look-alike of an LSTM step (the output gate's columns read twice,
    the candidate's never)."""
    graph_def = type(m.graph_def)()
    graph_def.CopyFrom(m.graph_def)
    nodes = {n.name: n for n in graph_def.node}
    candidate = nodes["lstm/while/lstm_cell/Tanh"]
    assert candidate.input[0] == "lstm/while/lstm_cell/split:2"
    candidate.input[0] = "lstm/while/lstm_cell/split:3"
    return rm.RnnModel(graph_def, m.input_shapes, m.outputs)


@pytest.mark.parametrize("form, edit, reason, fused", [
    ("Sonnet LSTM, dynamic_unroll", _sonnet_step_before_with_other_kernel,
     "the step 0 taken before the TF1 loop has other weights or attributes than the loop's cell",
     {"BasicLSTMCell": 2}),  # each step is still a cell
    ("tf_keras LSTM, TF1 graph", _keras_tf1_wrong_gate_product, "no BasicLSTMCell or GRUCell step in the TF1 loop",
     {}),
])
def test_a_tf1_loop_look_alike_is_refused(form, edit, reason, fused):
    m = edit(model(form))
    result = fuse(m)
    assert counts(result.fused_graph_def) == fused
    refused = _refusals(result, "ScopeDynamicRNNPass")
    assert any(r == f"rejected by the pass: {reason}" for r in refused), refused
    assert_verifies(m, result)


@pytest.mark.parametrize("kind, cell", [("LSTM", "BasicLSTMCell"), ("GRU", "GRUCell")])
def test_sonnet_dynamic_unroll_with_sequence_length_is_refused_as_it_repeats_the_last_output(kind, cell):
    """snt.dynamic_unroll given sequence_length keeps, past a sequence's end, the previous output
    (``tf1.where(t >= sequence_length, prev_outputs, outputs)``: a Select picking rows, not a
    broadcasting SelectV2, of a value the loop carries): each sequence's last output repeated, which
    the original graph computes, not the zeros the loop op's seq_length writes.  The loop is refused
    with that reason, and its cells (the step taken before the loop and the loop body's) are fused
    each on its own."""
    import numpy as np

    from tests.models.activation_models import run
    from tests.models.model_builders import FrozenModel

    lengths = [1, 2]
    m = sm.sonnet(kind, unroll="dynamic", sequence_length=lengths)
    ops = {n.op for n in m.graph_def.node}
    assert "Select" in ops and "SelectV2" not in ops  # tf1.where: rows picked, no broadcasting
    x = np.random.default_rng(3).normal(size=m.input_shapes["x"]).astype(np.float32)
    y = run(FrozenModel(m.graph_def, {"x:0": x}, m.outputs))[0]  # time-major [steps, batch, hidden]
    for b, length in enumerate(lengths):
        assert np.abs(y[length - 1, b]).min() > 0
        np.testing.assert_array_equal(y[length:, b], np.broadcast_to(y[length - 1, b], y[length:, b].shape))
    result = fuse(m)
    assert counts(result.fused_graph_def) == {cell: 2}
    refused = _refusals(result, "ScopeDynamicRNNPass")
    reason = ("rejected by the pass: past a sequence's end the step's output is the loop's previous output ('while/"
              "merge/_")
    assert any(r.startswith(reason) and r.endswith("a value the loop carries: the sequence's last output repeated, "
                                                   "as snt.dynamic_unroll writes it), where the fused op's seq_length "
                                                   "writes zeros") for r in refused), refused
    assert_verifies(m, result)


def test_sonnet_gru_is_tensorflows_convention_with_the_update_gate_negated():
    """snt.GRU: gates z, r and the candidate from column slices of x @ W_i and of W_h, the reset
    before the candidate's matmul, h' = (1 - z) * h + z * a: GRUCell(reset_after=False) with
    u = 1 - z, its kernel columns and bias negated by the inner graph."""
    m = model("Sonnet GRU, static_unroll")
    result = fuse(m)
    cells = [n for n in result.fused_graph_def.node if n.op == "GRUCell"]
    assert len(cells) == S
    assert all(not n.attr["reset_after"].b and n.attr["activation"].s == b"tanh" for n in cells)
    assert sum(n.op == "Neg" for n in result.fused_graph_def.node) == 2 * S  # u's kernel and bias per step
    assert not any(n.op in ("MatMul", "Sigmoid", "Tanh", "StridedSlice") for n in result.fused_graph_def.node)
    assert_verifies(m, result)


def _edited(m: rm.RnnModel, edit) -> rm.RnnModel:
    graph_def = type(m.graph_def)()
    graph_def.CopyFrom(m.graph_def)
    edit({n.name: n for n in graph_def.node})
    return rm.RnnModel(graph_def, m.input_shapes, m.outputs)


def _candidate_reads_r_columns(nodes) -> None:  # the candidate's input product slice: [H:2H] (r's), not [2H:3H]
    import numpy as np
    import tensorflow as tf

    for begin in ("gru/strided_slice_3/stack", "gru/strided_slice_3/stack_1"):
        value = tf.make_ndarray(nodes[begin].attr["value"].tensor) - np.array([0, rm.HIDDEN], np.int32)
        nodes[begin].attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value))


def _z_resets(nodes) -> None:  # the reset reads z (the Split's port 0), not r
    nodes["gru/mul"].input[0] = "gru/split"


@pytest.mark.parametrize("edit, reason, fused", [
    # the step matches and its slices are checked: that step alone is refused
    (_candidate_reads_r_columns, "the slices are not the gates' columns [0, 8) and the candidate's [8, 12) (a_x: ",
     {"GRUCell": S - 1}),
    # no step there: the scope (every step of the layer) computes more than GRU steps, refused whole
    (_z_resets, "the scope computes more than GRUCell steps: 'gru/add_4' read or feed a step and are part of none",
     {}),
])
def test_a_sliced_gru_look_alike_is_refused(edit, reason, fused):
    m = _edited(model("Sonnet GRU, static_unroll"), edit)
    result = fuse(m)
    refused = _refusals(result, "ScopeGRUCellPass")
    assert any(r.startswith(f"rejected by the pass: {reason}") for r in refused), refused
    assert counts(result.fused_graph_def) == fused
    assert_verifies(m, result)


#: the split's ports -> the gate Keras has there (i, f, g, o = 0, 1, 2, 3): the ONNX order i, o, f, g
ONNX_ORDER = (0, 3, 1, 2)


def _weight_const(nodes, tensor: str):
    node = nodes[tensor.split(":")[0].lstrip("^")]
    while node.op != "Const":
        node = nodes[node.input[0].split(":")[0]]
    return node


def _gates_reordered(m: rm.RnnModel, old_of=ONNX_ORDER) -> rm.RnnModel:
    """The same LSTM with its gates at other ports of each step's split: every weight's column
    blocks and every reader of the split moved together, so the graph computes what it did."""
    import numpy as np
    import tensorflow as tf

    graph_def = type(m.graph_def)()
    graph_def.CopyFrom(m.graph_def)
    nodes = {n.name: n for n in graph_def.node}
    splits = {n.name for n in graph_def.node if n.op == "Split" and n.attr["num_split"].i == 4}
    weights = {}
    for n in graph_def.node:
        if n.op == "MatMul" and nodes[n.input[0].split(":")[0]].op != "Split":
            weights[n.input[1]] = 1
        if n.op == "BiasAdd":
            weights[n.input[1]] = 0
    done = set()
    for tensor in weights:  # the gate blocks lie along the last axis of kernels and biases alike
        const = _weight_const(nodes, tensor)
        if const.name in done:
            continue
        done.add(const.name)
        value = tf.make_ndarray(const.attr["value"].tensor)
        blocks = np.split(value, 4, axis=-1)
        const.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.concatenate([blocks[k] for k in old_of], -1)))
    new_of = {old: new for new, old in enumerate(old_of)}
    for n in graph_def.node:
        for j, text in enumerate(n.input):
            name, _, port = text.partition(":")
            if name in splits:
                n.input[j] = f"{name}:{new_of[int(port or 0)]}"
    return rm.RnnModel(graph_def, m.input_shapes, m.outputs)


def test_the_gate_order_is_read_off_the_dataflow():
    """Keras 3's LSTM with its gates moved to the ports i, o, f, g (ONNX's order), the weights'
    columns moved with them: the same computation, fused with the gates taken from where the
    dataflow puts them."""
    m = _gates_reordered(model("Keras 3 LSTM(unroll=True)"))
    assert len(_weight_const_names(m)) == 3  # kernel, recurrent kernel, bias: each moved once
    result = fuse(m)
    assert counts(result.fused_graph_def) == {"BasicLSTMCell": S}
    # the op's kernel takes the blocks i, j (= g), f, o from where the split has them: ports 0, 3, 2, 1
    kernels = [n for n in result.fused_graph_def.node if n.name.endswith("/w") and n.op == "ConcatV2"]
    assert len(kernels) == S
    assert all([int(i.partition(":")[2] or 0) for i in n.input[:4]] == [0, 3, 2, 1] for n in kernels)
    assert_verifies(m, result)
    renamed_graph, names = neutral_names(m.graph_def)
    neutral = rm.RnnModel(renamed_graph, {names[k]: v for k, v in m.input_shapes.items()},
                          [renamed_tensor(t, names) for t in m.outputs])
    assert counts(fuse(neutral).fused_graph_def) == {"BasicLSTMCell": S}


def _weight_const_names(m: rm.RnnModel) -> set[str]:
    nodes = {n.name: n for n in m.graph_def.node}
    found = set()
    for n in m.graph_def.node:
        if n.op == "BiasAdd" or (n.op == "MatMul" and nodes[n.input[0].split(":")[0]].op != "Split"):
            found.add(_weight_const(nodes, n.input[1]).name)
    return found


def test_a_keras_loop_body_with_its_input_and_forget_gates_trading_ports_is_fused():
    """tf_keras's loop body edited to ``c * sigmoid(split:0) + sigmoid(split:1) * tanh(split:2)``:
    an LSTM whose input and forget gates sit at each other's ports, the order the dataflow reveals.
    Both layers' loops fuse and agree with the edited graph, not with the original."""
    m = model("tf_keras LSTM, two layers not unrolled")
    graph_def = type(m.graph_def)()
    graph_def.CopyFrom(m.graph_def)
    edited_bodies = 0
    for function in graph_def.library.function:
        nodes = {n.name: n for n in function.node_def}
        if "while/mul_1" in nodes:
            nodes["while/mul"].input[0], nodes["while/mul_1"].input[0] = "while/Sigmoid:y:0", "while/Sigmoid_1:y:0"
            edited_bodies += 1
    assert edited_bodies == 2
    edited = rm.RnnModel(graph_def, m.input_shapes, m.outputs)
    result = fuse(edited)
    assert counts(result.fused_graph_def) == {"DynamicRNN": 2}
    assert_verifies(edited, result)
    check = scopefusion.verify(m.graph_def, result.fused_graph_def, fused_ops=REGISTRY.fused_ops,
                               input_shapes=m.input_shapes, runs=2)
    assert not check.passed  # the edit changed what the graph computes, and the fused graph follows it


def test_a_matrix_added_to_the_gates_is_no_bias():
    """Sonnet's LSTM with its bias vector replaced by a [batch, 4 * hidden] matrix: the gates still
    add it (an AddV2, as Sonnet adds its bias), but what is added is no bias, so no step is fused."""
    import numpy as np
    import tensorflow as tf

    m = model("Sonnet LSTM, static_unroll")
    graph_def = type(m.graph_def)()
    graph_def.CopyFrom(m.graph_def)
    (bias,) = [n for n in graph_def.node if n.op == "Const" and n.name.startswith("lstm/add_1/")]
    vector = tf.make_ndarray(bias.attr["value"].tensor)
    assert vector.shape == (4 * rm.HIDDEN,)
    matrix = np.stack([vector, -vector])  # [batch, 4 * hidden]
    bias.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(matrix))
    edited = rm.RnnModel(graph_def, m.input_shapes, m.outputs)
    result = fuse(edited)
    assert counts(result.fused_graph_def) == {}
    (reason,) = _refusals(result, "ScopeBasicLSTMCellPass")
    assert "has shape [2, 16], not a vector: what the gates add is no bias" in reason, reason
    assert_verifies(edited, result)
