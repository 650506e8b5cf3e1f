"""ScopeBasicLSTMCellPass and ScopeGRUCellPass on layers built by the real tf.compat.v1 rnn_cell
classes (see ``rnn_models.py``): every time step of every layer becomes one fused cell, the fused
graph runs (reference implementations) and agrees with the original, and cells the ops cannot
express are refused with the reason."""
from __future__ import annotations

import functools
import json

import numpy as np
import pytest
import tensorflow as tf

from tests.models import rnn_models as rm
from tests.models.detection_models import tf1_graph_mode
from tests.helpers.pass_checks import REGISTRY, op_count
from tests.helpers.verify import assert_verifies

import scopefusion
from scopefusion.cli import main
from scopefusion.core.graph.attrs import attr_value_to_python
from scopefusion.core.verify.execute import run_graph_def
from scopefusion.core.verify.tf_form import to_tf_runnable
from scopefusion.testing import assert_fused, assert_not_matched

LSTM, GRU = "ScopeBasicLSTMCellPass", "ScopeGRUCellPass"
BOTH = [LSTM, GRU]
S = rm.STEPS

#: form -> (builder, {fused op: count}, attributes every fused node has)
FORMS = {
    "BasicLSTMCell": (lambda: rm.static_rnn(rm.basic_lstm()), {"BasicLSTMCell": S},
                      dict(forget_bias=1.0, activation="tanh")),
    "BasicLSTMCell forget_bias=0.5 relu": (
        lambda: rm.static_rnn(rm.basic_lstm(forget_bias=0.5, activation=tf.nn.relu)), {"BasicLSTMCell": S},
        dict(forget_bias=0.5, activation="relu")),
    "LSTMCell": (lambda: rm.static_rnn(rm.lstm(), inputs=3), {"BasicLSTMCell": S},
                 dict(forget_bias=1.0, activation="tanh")),
    "LSTMCell softsign": (lambda: rm.static_rnn(rm.lstm(activation=tf.nn.softsign, forget_bias=0.0)),
                          {"BasicLSTMCell": S}, dict(forget_bias=0.0, activation="softsign")),
    "GRUCell": (lambda: rm.static_rnn(rm.gru()), {"GRUCell": S}, dict(activation="tanh")),
    "GRUCell relu": (lambda: rm.static_rnn(rm.gru(activation=tf.nn.relu), inputs=4), {"GRUCell": S},
                     dict(activation="relu")),
    "MultiRNNCell of 3 BasicLSTMCell": (
        lambda: rm.static_rnn(rm.multi(rm.basic_lstm(), rm.basic_lstm(), rm.basic_lstm())),
        {"BasicLSTMCell": 3 * S}, {}),
    "MultiRNNCell LSTMCell + GRUCell": (lambda: rm.static_rnn(rm.multi(rm.lstm(), rm.gru())),
                                        {"BasicLSTMCell": S, "GRUCell": S}, {}),
    "static_bidirectional_rnn BasicLSTMCell": (lambda: rm.static_bidirectional_rnn(rm.basic_lstm()),
                                               {"BasicLSTMCell": 2 * S}, {}),
    "static_bidirectional_rnn GRUCell": (lambda: rm.static_bidirectional_rnn(rm.gru()), {"GRUCell": 2 * S}, {}),
    "sequence_length in a TF1 cond, every step run": (
        lambda: rm.static_rnn(rm.multi(rm.basic_lstm(), rm.gru()), sequence_length=[3, 2], control_flow_v1=True),
        {"BasicLSTMCell": S, "GRUCell": S}, {}),
    "sequence_length in a TF1 cond, the last step skipped": (
        lambda: rm.static_rnn(rm.lstm(), sequence_length=[2, 1], control_flow_v1=True), {"BasicLSTMCell": S}, {}),
    "float16 MultiRNNCell BasicLSTMCell + GRUCell": (
        lambda: rm.static_rnn(rm.multi(rm.basic_lstm(), rm.gru()), dtype="float16"),
        {"BasicLSTMCell": S, "GRUCell": S}, dict(T=tf.float16.as_datatype_enum)),
}


@functools.cache
def model(form: str) -> rm.RnnModel:
    return FORMS[form][0]()


def fuse(m: rm.RnnModel, enable=BOTH):
    return scopefusion.fuse(m.graph_def, registry=REGISTRY, enable_scope_fusion_passes=enable)


def attrs(node) -> dict:
    return {k: attr_value_to_python(v) for k, v in node.attr.items()}


# ------------------------------------------------------------------------------ fused forms
@pytest.mark.parametrize("form", list(FORMS))
def test_every_step_of_every_layer_is_one_fused_cell(form):
    m = model(form)
    _, counts, expected = FORMS[form]
    result = fuse(m)
    assert result.report.refused == []
    for op_type, count in counts.items():
        assert_fused(result, op_type, count, **{"T": tf.float32.as_datatype_enum, **expected})
    others = {"BasicLSTMCell", "GRUCell"} - set(counts)
    assert all(op_count(result.fused_graph_def, o) == 0 for o in others)
    # nothing of the cells is left but their weights: the whole recurrence is fused cells
    left = [n.name for n in result.fused_graph_def.node if "_cell/" in n.name  # (a cond's Switch routes inputs)
            and n.op not in ("Const", "Identity", "Switch", "BasicLSTMCell", "GRUCell")]
    assert left == []
    assert op_count(result.fused_graph_def, "MatMul", "Split", "Sigmoid", "BiasAdd") == 0
    assert_verifies(m, result)


def _chain(result, op_type: str, scope: str) -> list:
    nodes = {n.name: n for n in result.fused_graph_def.node if n.op == op_type}
    return [nodes[f"{scope}/step_{t}"] for t in range(S)]


def test_basic_lstm_steps_are_chained_in_time_with_the_kernel_read_once():
    result = fuse(model("BasicLSTMCell"))
    steps = _chain(result, "BasicLSTMCell", "rnn/basic_lstm_cell")
    zeros = "rnn/BasicLSTMCellZeroState/zeros"
    weights = [f"rnn/basic_lstm_cell/{w}/Read/Identity" for w in ("kernel", "bias")]
    assert list(steps[0].input) == ["unstack", f"{zeros}_1", zeros, *weights]
    for t in (1, 2):
        prev = steps[t - 1].name
        assert list(steps[t].input) == [f"unstack:{t}", prev, f"{prev}:1", *weights]
    stack = next(n for n in result.fused_graph_def.node if n.name == "stack")
    assert list(stack.input) == [s.name for s in steps]
    outputs = {n.name: list(n.input) for n in result.fused_graph_def.node if n.name.startswith("out_")}
    assert outputs == {"out_0": ["stack"], "out_1": [f"{steps[2].name}:1"], "out_2": [steps[2].name]}


def test_gru_and_stacked_layers_read_the_layer_below():
    result = fuse(model("MultiRNNCell LSTMCell + GRUCell"))
    lstm = _chain(result, "BasicLSTMCell", "rnn/rnn/multi_rnn_cell/cell_0/lstm_cell")
    gru = _chain(result, "GRUCell", "rnn/rnn/multi_rnn_cell/cell_1/gru_cell")
    weights = [f"rnn/multi_rnn_cell/cell_1/gru_cell/{w}/Read/Identity" for w in
               ("gates/kernel", "gates/bias", "candidate/kernel", "candidate/bias")]
    for t in range(S):
        assert list(gru[t].input)[0] == lstm[t].name  # the GRU's input is the LSTM's output h
        assert list(gru[t].input)[2:] == weights
        if t:
            assert list(gru[t].input)[1] == gru[t - 1].name


# ------------------------------------------------------------- the convention, on the real graph
def _consts(graph_def) -> dict:
    return {n.name: tf.make_ndarray(n.attr["value"].tensor) for n in graph_def.node if n.op == "Const"}


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def test_basic_lstm_cell_is_i_j_f_o_on_concat_x_h_with_forget_bias_on_f():
    """What BasicLSTMCell declares, computed in numpy from the real graph's weights, is what the
    real graph computes."""
    m = model("BasicLSTMCell forget_bias=0.5 relu")
    w = _consts(m.graph_def)
    kernel, bias = w["rnn/basic_lstm_cell/kernel"], w["rnn/basic_lstm_cell/bias"]
    assert kernel.shape == (5 + rm.HIDDEN, 4 * rm.HIDDEN) and bias.shape == (4 * rm.HIDDEN,)
    x = np.random.default_rng(1).normal(size=(rm.BATCH, S, 5)).astype(np.float32)
    h = c = np.zeros((rm.BATCH, rm.HIDDEN), np.float32)
    relu = functools.partial(np.maximum, 0.0)
    outs = []
    for t in range(S):
        i, j, f, o = np.split(np.concatenate([x[:, t], h], 1) @ kernel + bias, 4, axis=1)
        c = c * _sigmoid(f + 0.5) + _sigmoid(i) * relu(j)
        h = relu(c) * _sigmoid(o)
        outs.append(h)
    fused = to_tf_runnable(fuse(m).fused_graph_def, REGISTRY.fused_ops)  # runs the reference
    for graph in (m.graph_def, fused):
        got = run_graph_def(graph, {"x:0": x}, m.outputs)
        np.testing.assert_allclose(got[0], np.stack(outs, 1), atol=1e-5)
        np.testing.assert_allclose(got[1], c, atol=1e-5)  # final state (c, h)
        np.testing.assert_allclose(got[2], h, atol=1e-5)


def test_lstm_cell_options_are_peepholes_clips_and_a_projection_as_the_op_declares():
    """BasicLSTMCell's optional inputs and attributes, computed in numpy from the weights of the real
    LSTMCell(use_peepholes, num_proj, cell_clip, proj_clip), are what the real graph computes."""
    m = rm.static_rnn(rm.lstm(use_peepholes=True, num_proj=3, cell_clip=0.6, proj_clip=0.3))
    w = {k.removeprefix("rnn/lstm_cell/"): v for k, v in _consts(m.graph_def).items()}
    kernel, bias, proj = w["kernel"], w["bias"], w["projection/kernel"]
    assert kernel.shape == (5 + 3, 4 * rm.HIDDEN) and proj.shape == (rm.HIDDEN, 3)
    x = np.random.default_rng(3).normal(size=(rm.BATCH, S, 5)).astype(np.float32)
    h, c = np.zeros((rm.BATCH, 3), np.float32), np.zeros((rm.BATCH, rm.HIDDEN), np.float32)
    outs = []
    for t in range(S):
        i, j, f, o = np.split(np.concatenate([x[:, t], h], 1) @ kernel + bias, 4, axis=1)
        c = np.clip(c * _sigmoid(f + 1.0 + w["w_f_diag"] * c) + _sigmoid(i + w["w_i_diag"] * c) * np.tanh(j),
                    -0.6, 0.6)
        h = np.clip((np.tanh(c) * _sigmoid(o + w["w_o_diag"] * c)) @ proj, -0.3, 0.3)
        outs.append(h)
    result = fuse(m)
    assert op_count(result.fused_graph_def, "BasicLSTMCell") == S
    for graph in (m.graph_def, to_tf_runnable(result.fused_graph_def, REGISTRY.fused_ops)):
        got = run_graph_def(graph, {"x:0": x}, m.outputs)
        np.testing.assert_allclose(got[0], np.stack(outs, 1), atol=1e-5)
        np.testing.assert_allclose(got[1], c, atol=1e-5)
        np.testing.assert_allclose(got[2], h, atol=1e-5)


def test_gru_cell_is_r_u_gates_with_the_reset_before_the_candidate_matmul():
    m = model("GRUCell")
    w = _consts(m.graph_def)
    scope = "rnn/gru_cell/"
    gk, gb = w[scope + "gates/kernel"], w[scope + "gates/bias"]
    ck, cb = w[scope + "candidate/kernel"], w[scope + "candidate/bias"]
    x = np.random.default_rng(2).normal(size=(rm.BATCH, S, 5)).astype(np.float32)
    h = np.zeros((rm.BATCH, rm.HIDDEN), np.float32)
    outs = []
    for t in range(S):
        r, u = np.split(_sigmoid(np.concatenate([x[:, t], h], 1) @ gk + gb), 2, axis=1)
        candidate = np.tanh(np.concatenate([x[:, t], r * h], 1) @ ck + cb)
        h = u * h + (1 - u) * candidate
        outs.append(h)
    for graph in (m.graph_def, to_tf_runnable(fuse(m).fused_graph_def, REGISTRY.fused_ops)):
        got = run_graph_def(graph, {"x:0": x}, m.outputs)
        np.testing.assert_allclose(got[0], np.stack(outs, 1), atol=1e-5)


# ---------------------------------------------------------------------------------- refusals
REFUSED = {
    "BasicLSTMCell gelu": (lambda: rm.static_rnn(rm.basic_lstm(activation=tf.nn.gelu)), "rnn/basic_lstm_cell",
                           "no BasicLSTMCell step in the scope"),
    "GRUCell gelu": (lambda: rm.static_rnn(rm.gru(activation=tf.nn.gelu)), "rnn/gru_cell",
                     "no GRUCell step in the scope"),
    "BasicLSTMCell state_is_tuple=False": (
        lambda: rm.static_rnn(rm.basic_lstm(state_is_tuple=False)), "rnn/basic_lstm_cell",
        "the scope computes more than BasicLSTMCell steps: 'rnn/basic_lstm_cell/split'"),
}


@pytest.mark.parametrize("form", list(REFUSED))
def test_cells_the_ops_cannot_express_are_refused_with_the_reason(form):
    build, scope, reason = REFUSED[form]
    m = build()
    result = fuse(m)
    assert op_count(result.fused_graph_def, "BasicLSTMCell", "GRUCell") == 0
    why = assert_not_matched(result, scope)
    assert why.startswith(f"{LSTM if 'LSTM' in form else GRU}: rejected by the pass: {reason}"), why
    assert_verifies(m, result)  # the other passes' fusions still compute the same


def test_a_tf1_dynamic_rnn_loop_is_left_alone_a_functional_one_fused_in_its_body():
    """A TF1 while loop holds one step in its body (refused: loops are not fused step by step); a
    functional While keeps the cell in its body function, where it is fused (and not with
    ``functions=False``; tests/functions/test_function_fusion.py has the details)."""
    cell_loop = lambda x: [tf.compat.v1.nn.dynamic_rnn(rm.basic_lstm()(), x, dtype=tf.float32)[0]]  # noqa: E731
    with tf1_graph_mode(control_flow_v1=True):
        m = rm.freeze(cell_loop)
    result = fuse(m)
    assert op_count(result.fused_graph_def, "BasicLSTMCell") == 0
    why = assert_not_matched(result, "rnn/while/basic_lstm_cell")
    assert why.startswith(f"{LSTM}: rejected by the pass: the cell runs inside a TF1 while loop"), why
    assert_verifies(m, result)
    m = rm.freeze(cell_loop)
    assert op_count(m.graph_def, "While", "StatelessWhile") == 1
    (body,) = [n.attr["body"].func.name for n in m.graph_def.node if n.op in ("While", "StatelessWhile")]
    result = fuse(m)
    assert op_count(result.fused_graph_def, "BasicLSTMCell") == 0  # none in the graph itself
    assert [f.function for f in result.report.fused] == [body]
    assert_verifies(m, result)
    left = scopefusion.fuse(m.graph_def, registry=REGISTRY, enable_scope_fusion_passes=BOTH, functions=False)
    assert left.report.pass_report(LSTM).results == 0 and left.report.fused_count() == 0


def test_steps_in_functional_conds_are_fused_in_the_branches():
    """With TF2 control flow, static_rnn's sequence_length puts each step in a StatelessIf, whose
    branches are in the function library: each step is fused in its branch."""
    m = rm.static_rnn(rm.basic_lstm(), sequence_length=[2, 1])
    assert op_count(m.graph_def, "StatelessIf", "If") == S
    result = fuse(m)
    assert op_count(result.fused_graph_def, "BasicLSTMCell") == 0  # none in the graph itself
    branches = {n.attr["else_branch"].func.name for n in m.graph_def.node if n.op in ("StatelessIf", "If")}
    assert sorted(f.function for f in result.report.fused) == sorted(branches)
    assert {f.type for f in result.report.fused} == {"BasicLSTMCell"}
    assert_verifies(m, result)
    left = scopefusion.fuse(m.graph_def, registry=REGISTRY, enable_scope_fusion_passes=BOTH, functions=False)
    assert left.report.pass_report(LSTM).results == 0


def test_the_cell_passes_are_off_unless_enabled_and_listed(capsys):
    result = scopefusion.fuse(model("BasicLSTMCell").graph_def, registry=REGISTRY)
    assert op_count(result.fused_graph_def, "BasicLSTMCell", "GRUCell") == 0
    assert not REGISTRY.get(LSTM).general and not REGISTRY.get(GRU).general
    assert main(["list", "--json", "--enable_scope_fusion_passes", LSTM]) == 0
    data = json.loads(capsys.readouterr().out)
    listed = {p["name"]: p for p in data["passes"]}
    assert listed[LSTM]["enabled"] and not listed[LSTM]["general"] and listed[LSTM]["origin"] == "built-in"
    assert not listed[GRU]["enabled"]
    assert data["fused_ops"]["BasicLSTMCell"] == data["fused_ops"]["GRUCell"] == "built-in"


def test_a_graph_without_cells_is_searched_without_matching(monkeypatch):
    """On a BERT encoder (tf_slim layer norms, GELU; MatMul, Mul and adds by the hundred, no Split
    and no Sigmoid) the cell passes, enabled, find nothing without matching a single candidate
    root: every form's step holds a Split and a Sigmoid, which the graph lacks."""
    from scopefusion.builtin_passes.scope.rnn_cells import discovery
    from scopefusion.builtin_passes.scope.rnn_cells.passes import ScopeBasicLSTMCellPass, ScopeGRUCellPass
    from scopefusion.builtin_passes.scope.rnn_cells.prefilter import first_look
    from scopefusion.core.scope.scope_graph import ScopeGraph
    from tests.models.model_builders import bert_style_encoder

    model = bert_style_encoder(layers=1, hidden=16, heads=2, seq=4)
    sg = ScopeGraph(model.graph_def)
    assert len(sg.index.nodes_of_type("MatMul")) >= 6 and len(sg.index.nodes_of_type("Mul")) >= 10
    forms = ScopeBasicLSTMCellPass.forms + ScopeGRUCellPass.forms
    assert not any(first_look(form).graph_may_hold(sg.index) for form in forms)

    def no_matcher(*args, **kwargs):
        raise AssertionError("a candidate root was matched")

    monkeypatch.setattr(discovery, "PatternMatcher", no_matcher)
    assert discovery.step_scopes(sg, forms) == []
    result = scopefusion.fuse(model.graph_def, registry=REGISTRY, enable_scope_fusion_passes=BOTH)
    for name in BOTH:
        report = result.report.pass_report(name)
        assert not report.fused and not report.refused
