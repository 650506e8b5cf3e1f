"""ScopeDynamicRNNPass on ``tf.compat.v1.nn.dynamic_rnn`` loops built by the real library (control
flow v2, batch 2, input 3, hidden 4, 5 steps, random weights, frozen): the loop, its input and
output lists and the stack after it become one ``DynamicRNN`` (LSTM) or ``DynamicGRUV2`` (GRU) per
layer, time-major; with ``sequence_length`` every op also reads the lengths (``seq_length``); the
fused graph runs (the ops' reference implementations) and agrees with the original within 1e-4;
loops it cannot express are left as they are with the reason."""
from __future__ import annotations

import functools
import json

import pytest

from tests.models import loop_models as lm
from tests.models import rnn_models as rm
from tests.helpers.pass_checks import REGISTRY
from tests.helpers import verify as checks

import scopefusion
from scopefusion.core.functions.prune import called_functions
from scopefusion.cli import main

PASSES = "ScopeBasicLSTMCellPass,ScopeGRUCellPass,ScopeDynamicRNNPass"
LOOP_NODES = ("While", "StatelessWhile", "TensorListFromTensor", "TensorListReserve", "TensorListStack",
              "Enter", "Merge", "Switch", "NextIteration", "Exit", "LoopCond", "TensorArrayV3")

#: sequence_length and bidirectional_dynamic_rnn forms: (builder, fused ops expected, loops); the
#: lengths are constants, some shorter than the 5 steps ([3, 2]: the loop stops after 3), or fed
#: (placeholder ``lengths``, verified with lengths below 4)
SEQUENCE_LOOPS = {
    "sequence_length, BasicLSTMCell": (
        lambda: lm.dynamic_rnn(rm.basic_lstm(), sequence_length=[5, 3]), {"DynamicRNN": 1}, 1),
    "sequence_length shorter than the steps, LSTMCell": (
        lambda: lm.dynamic_rnn(rm.lstm(), sequence_length=[3, 2]), {"DynamicRNN": 1}, 1),
    "sequence_length fed, GRUCell": (
        lambda: lm.dynamic_rnn(rm.gru(), sequence_length=lm.FED), {"DynamicGRUV2": 1}, 1),
    "sequence_length fed, time_major BasicLSTMCell": (
        lambda: lm.dynamic_rnn(rm.basic_lstm(), sequence_length=lm.FED, time_major=True), {"DynamicRNN": 1}, 1),
    "sequence_length, MultiRNNCell LSTMCell + GRUCell (one loop)": (
        lambda: lm.dynamic_rnn(rm.multi(rm.lstm(), rm.gru()), sequence_length=[4, 1]),
        {"DynamicRNN": 1, "DynamicGRUV2": 1}, 1),
    "TF1 loop, sequence_length, BasicLSTMCell": (
        lambda: lm.dynamic_rnn(rm.basic_lstm(), sequence_length=[5, 3], control_flow_v1=True), {"DynamicRNN": 1}, 1),
    "TF1 loop, sequence_length fed, GRUCell": (
        lambda: lm.dynamic_rnn(rm.gru(), sequence_length=lm.FED, control_flow_v1=True), {"DynamicGRUV2": 1}, 1),
    "TF1 loop, sequence_length shorter than the steps, time_major MultiRNNCell of two LSTMCell layers": (
        lambda: lm.dynamic_rnn(rm.multi(rm.lstm(), rm.lstm()), sequence_length=[2, 3], time_major=True,
                               control_flow_v1=True), {"DynamicRNN": 2}, 1),
    # bidirectional_dynamic_rnn: a loop per direction, the backward one over the reversed input
    "bidirectional_dynamic_rnn, LSTMCell": (lambda: lm.bidirectional(rm.lstm()), {"DynamicRNN": 2}, 2),
    "bidirectional_dynamic_rnn, sequence_length fed, GRUCell": (
        lambda: lm.bidirectional(rm.gru(), sequence_length=lm.FED), {"DynamicGRUV2": 2}, 2),
    "TF1 loops, bidirectional_dynamic_rnn, sequence_length, time_major BasicLSTMCell": (
        lambda: lm.bidirectional(rm.basic_lstm(), sequence_length=[4, 2], time_major=True, control_flow_v1=True),
        {"DynamicRNN": 2}, 2),
    "TF1 loops, bidirectional_dynamic_rnn, GRUCell": (
        lambda: lm.bidirectional(rm.gru(), control_flow_v1=True), {"DynamicGRUV2": 2}, 2),
    # a Keras cell in dynamic_rnn: both optional inputs, the candidate's recurrent bias then the lengths
    "sequence_length fed, tf_keras GRUCell (reset_after=True)": (
        lambda: lm.dynamic_rnn(rm.keras_gru_cell(), sequence_length=lm.FED), {"DynamicGRUV2": 1}, 1),
}

#: Keras GRU layers with reset_after=True (the default), not unrolled: (builder, fused ops
#: expected, loops); each DynamicGRUV2 has reset_after=True and, with a bias, the recurrent bias of
#: the candidate.  Keras 3 runs its generic loop (the cell scoped in the body); tf_keras runs
#: standard_gru (the step straight under while/, the bias's rows unstacked before the loop) where
#: cuDNN could run the layer, else its generic loop too (use_bias=False, relu).
KERAS_GRU_LOOPS = {
    "Keras 3 GRU, two layers (two loops)": (lambda: lm.keras("keras", "GRU"), {"DynamicGRUV2": 2}, 2),
    "tf_keras GRU, two layers (two loops)": (lambda: lm.keras("tf_keras", "GRU"), {"DynamicGRUV2": 2}, 2),
    "Keras 3 Bidirectional GRU (two loops, the backward one on the reversed input)": (
        lambda: lm.keras("keras", "GRU", layers=1, bidirectional=True), {"DynamicGRUV2": 2}, 2),
    "tf_keras Bidirectional GRU (two loops, the backward one on the reversed input)": (
        lambda: lm.keras("tf_keras", "GRU", layers=1, bidirectional=True), {"DynamicGRUV2": 2}, 2),
    "Keras 3 GRU mixed_float16": (lambda: lm.keras("keras", "GRU", layers=1, policy="mixed_float16"),
                                  {"DynamicGRUV2": 1}, 1),
    "tf_keras GRU mixed_float16": (lambda: lm.keras("tf_keras", "GRU", layers=1, policy="mixed_float16"),
                                   {"DynamicGRUV2": 1}, 1),
    "Keras 3 GRU use_bias=False": (lambda: lm.keras("keras", "GRU", layers=1, use_bias=False), {"DynamicGRUV2": 1}, 1),
    "tf_keras GRU use_bias=False (the generic loop)": (
        lambda: lm.keras("tf_keras", "GRU", layers=1, use_bias=False), {"DynamicGRUV2": 1}, 1),
    "tf_keras GRU relu (the generic loop)": (lambda: lm.keras("tf_keras", "GRU", layers=1, activation="relu"),
                                             {"DynamicGRUV2": 1}, 1),
    "Keras 3 GRU return_sequences=False": (
        lambda: lm.keras("keras", "GRU", layers=1, return_sequences=False), {"DynamicGRUV2": 1}, 1),
    "tf_keras two GRU layers, the top one return_sequences=False and return_state": (
        lambda: lm.keras("tf_keras", "GRU", return_sequences=False, return_state=True), {"DynamicGRUV2": 2}, 2),
}

#: form -> (builder, fused ops expected in the graph, loops in the original)
LOOPS = {
    "BasicLSTMCell": (lambda: lm.dynamic_rnn(rm.basic_lstm()), {"DynamicRNN": 1}, 1),
    "LSTMCell": (lambda: lm.dynamic_rnn(rm.lstm()), {"DynamicRNN": 1}, 1),
    "GRUCell": (lambda: lm.dynamic_rnn(rm.gru()), {"DynamicGRUV2": 1}, 1),
    "tf_keras GRUCell (reset_after=True)": (lambda: lm.dynamic_rnn(rm.keras_gru_cell()), {"DynamicGRUV2": 1}, 1),
    "time_major BasicLSTMCell": (lambda: lm.dynamic_rnn(rm.basic_lstm(), time_major=True), {"DynamicRNN": 1}, 1),
    # MultiRNNCell: one loop whose body runs both layers -> one op per layer, the upper reading the lower's y
    "MultiRNNCell of two LSTMCell layers (one loop)": (
        lambda: lm.dynamic_rnn(rm.multi(rm.lstm(), rm.lstm())), {"DynamicRNN": 2}, 1),
    "MultiRNNCell LSTMCell + GRUCell (one loop)": (
        lambda: lm.dynamic_rnn(rm.multi(rm.lstm(), rm.gru())), {"DynamicRNN": 1, "DynamicGRUV2": 1}, 1),
    "two dynamic_rnn calls, BasicLSTMCell then GRUCell (two loops)": (
        lambda: lm.dynamic_rnn(rm.basic_lstm(), rm.gru()), {"DynamicRNN": 1, "DynamicGRUV2": 1}, 2),
    # control flow v1: a TF1 while loop (Enter / Merge / Switch / NextIteration / Exit, TensorArrays) whose
    # cells are their own ops (the cell passes leave steps inside TF1 loops alone)
    "TF1 loop, BasicLSTMCell": (lambda: lm.dynamic_rnn(rm.basic_lstm(), control_flow_v1=True), {"DynamicRNN": 1}, 1),
    "TF1 loop, GRUCell": (lambda: lm.dynamic_rnn(rm.gru(), control_flow_v1=True), {"DynamicGRUV2": 1}, 1),
    "TF1 loop, MultiRNNCell LSTMCell + GRUCell": (
        lambda: lm.dynamic_rnn(rm.multi(rm.lstm(), rm.gru()), control_flow_v1=True),
        {"DynamicRNN": 1, "DynamicGRUV2": 1}, 1),
    "TF1 loops, two dynamic_rnn calls": (lambda: lm.dynamic_rnn(rm.lstm(), rm.lstm(), control_flow_v1=True),
                                         {"DynamicRNN": 2}, 2),
    # Keras 3 layers not unrolled: a While per layer whose body also puts the weights in the cell's
    # layout each step (the preparation, run once inside the fused result)
    "Keras 3 LSTM, two layers (two loops)": (lambda: lm.keras("keras", "LSTM"), {"DynamicRNN": 2}, 2),
    "Keras 3 GRU(reset_after=False)": (lambda: lm.keras("keras", "GRU", layers=1, reset_after=False),
                                       {"DynamicGRUV2": 1}, 1),
    "Keras 3 Bidirectional LSTM (two loops, the backward one on the reversed input)": (
        lambda: lm.keras("keras", "LSTM", layers=1, bidirectional=True), {"DynamicRNN": 2}, 2),
    "Keras 3 LSTM mixed_float16 (the preparation casts the float32 weights)": (
        lambda: lm.keras("keras", "LSTM", layers=1, policy="mixed_float16"), {"DynamicRNN": 1}, 1),
    # sequence_length: the body copies the state through past each sequence's end (Select) and the
    # loop may stop at the longest sequence; every op reads the lengths as its seq_length
    **SEQUENCE_LOOPS,
    # tf_keras LSTM (standard_lstm): the step's ops straight under the body's while/, fused there first; the
    # loop's condition is time < n alone
    "tf_keras LSTM, two layers (two loops)": (lambda: lm.keras("tf_keras", "LSTM"), {"DynamicRNN": 2}, 2),
    "tf_keras Bidirectional LSTM (two loops, the backward one on the reversed input)": (
        lambda: lm.keras("tf_keras", "LSTM", layers=1, bidirectional=True), {"DynamicRNN": 2}, 2),
    "tf_keras LSTM return_state (the final h and c read from the loop)": (
        lambda: lm.keras("tf_keras", "LSTM", layers=1, return_state=True), {"DynamicRNN": 1}, 1),
    "tf_keras LSTM go_backwards (the reversed input)": (
        lambda: lm.keras("tf_keras", "LSTM", layers=1, go_backwards=True), {"DynamicRNN": 1}, 1),
    "tf_keras LSTM mixed_float16": (lambda: lm.keras("tf_keras", "LSTM", layers=1, policy="mixed_float16"),
                                    {"DynamicRNN": 1}, 1),
    # return_sequences=False: each step writes at 0 of a one-element list, which holds y[-1:] after the loop
    "tf_keras LSTM return_sequences=False": (
        lambda: lm.keras("tf_keras", "LSTM", layers=1, return_sequences=False), {"DynamicRNN": 1}, 1),
    "tf_keras two LSTM layers, the top one return_sequences=False and return_state (its input's rows unknown)": (
        lambda: lm.keras("tf_keras", "LSTM", return_sequences=False, return_state=True), {"DynamicRNN": 2}, 2),
    "tf_keras two LSTM layers, unknown batch, the top one return_sequences=False": (
        lambda: lm.keras("tf_keras", "LSTM", return_sequences=False, unknown_batch=True), {"DynamicRNN": 2}, 2),
    "tf_keras Bidirectional LSTM return_sequences=False": (
        lambda: lm.keras("tf_keras", "LSTM", layers=1, bidirectional=True, return_sequences=False),
        {"DynamicRNN": 2}, 2),
    "Keras 3 two LSTM layers, the top one return_sequences=False": (
        lambda: lm.keras("keras", "LSTM", return_sequences=False), {"DynamicRNN": 2}, 2),
    "Keras 3 GRU(reset_after=False) return_sequences=False": (
        lambda: lm.keras("keras", "GRU", layers=1, reset_after=False, return_sequences=False), {"DynamicGRUV2": 1}, 1),
    # tf_keras GRU(reset_after=False) and LSTM(activation="relu") run the generic loop (a cell scope in the body)
    "tf_keras GRU(reset_after=False)": (lambda: lm.keras("tf_keras", "GRU", layers=1, reset_after=False),
                                        {"DynamicGRUV2": 1}, 1),
    "tf_keras LSTM relu (the generic loop)": (lambda: lm.keras("tf_keras", "LSTM", layers=1, activation="relu"),
                                              {"DynamicRNN": 1}, 1),
    # use_bias=False: the fused cells' zero bias, made once with the rest of the weights' preparation
    "tf_keras LSTM use_bias=False (the generic loop)": (
        lambda: lm.keras("tf_keras", "LSTM", layers=1, use_bias=False), {"DynamicRNN": 1}, 1),
    "Keras 3 GRU(reset_after=False, use_bias=False)": (
        lambda: lm.keras("keras", "GRU", layers=1, reset_after=False, use_bias=False), {"DynamicGRUV2": 1}, 1),
    **KERAS_GRU_LOOPS,
}


def _gelu(x):  # an activation no fused cell takes
    import tensorflow as tf

    return tf.nn.gelu(x)


@functools.cache
def model(form: str) -> rm.RnnModel:
    builders = {**{k: v[0] for k, v in LOOPS.items()},
                "peepholes": lambda: lm.dynamic_rnn(rm.lstm(use_peepholes=True)),
                "TF1 loop, peepholes": lambda: lm.dynamic_rnn(rm.lstm(use_peepholes=True), control_flow_v1=True),
                "TF1 loop, gelu": lambda: lm.dynamic_rnn(rm.lstm(activation=_gelu), control_flow_v1=True),
                "forget_bias 0.5, relu": lambda: lm.dynamic_rnn(rm.basic_lstm(forget_bias=0.5, activation="relu")),
                "tf_keras GRU with a mask": lambda: lm.keras("tf_keras", "GRU", layers=1, masking=True),
                "tf_keras LSTM with a mask": lambda: lm.keras("tf_keras", "LSTM", layers=1, masking=True)}
    return builders[form]()


def fuse(m: rm.RnnModel, passes: str = PASSES, **options):
    return scopefusion.fuse(m.graph_def, registry=REGISTRY, enable_scope_fusion_passes=passes, hints=False, **options)


def counts(graph_def, *ops: str) -> dict[str, int]:
    found = {op: sum(n.op == op for n in graph_def.node) for op in ops}
    return {op: k for op, k in found.items() if k}


def verify(m: rm.RnnModel, fused_graph_def):
    return scopefusion.verify(m.graph_def, fused_graph_def, fused_ops=REGISTRY.fused_ops,
                              input_shapes=m.input_shapes, runs=2, int_range=m.info.get("int_range", (0, 10)))


#: a loop model's outputs are every output its graph has
assert_verifies = functools.partial(checks.assert_verifies, every_output=True)


def loop_report(result):
    return result.report.pass_report("ScopeDynamicRNNPass")


def graph_refusals(result) -> list:
    """The pass's refusals in the graph itself; inside the library it sees each loop's body and
    condition as a graph of its own, whose ``while`` scope it refuses as no loop."""
    refused = loop_report(result).refused
    inside = [r for r in refused if r.function]
    assert all("no While / StatelessWhile node is named" in r.reason for r in inside), inside
    return [r for r in refused if not r.function]


# ------------------------------------------------------------------------------ fused
@pytest.mark.parametrize("form", list(LOOPS))
def test_each_loop_becomes_one_op_per_layer(form):
    m = model(form)
    _, expected, loops = LOOPS[form]
    assert sum(counts(m.graph_def, "While", "StatelessWhile", "LoopCond").values()) == loops
    result = fuse(m)
    fused = result.fused_graph_def
    assert counts(fused, "DynamicRNN", "DynamicGRUV2", "BasicLSTMCell", "GRUCell") == expected
    assert counts(fused, *LOOP_NODES) == {}
    report = loop_report(result)
    assert len(report.fused) == loops and not graph_refusals(result), report.refused
    for node in fused.node:
        if node.op in ("DynamicRNN", "DynamicGRUV2"):
            assert node.attr["time_major"].b and node.attr["activation"].s == (b"relu" if "relu" in form else b"tanh")
            assert node.attr["T"].type == (19 if "mixed_float16" in form else 1)  # float16, float32
        if node.op == "DynamicGRUV2":  # Keras's default convention, or TensorFlow's (rnn_cell, reset_after=False)
            assert node.attr["reset_after"].b == (form in KERAS_GRU_LOOPS or "(reset_after=True)" in form), node.attr
    # the fused loops' bodies and conditions left the library; nothing left in it is uncalled
    assert {f.signature.name for f in fused.library.function} == called_functions(fused)
    before = {f.signature.name for f in m.graph_def.library.function}
    assert result.report.removed_functions == sorted(before - {f.signature.name for f in fused.library.function})
    assert bool(result.report.removed_functions) == bool(before)
    assert_verifies(m, fused)


def test_layers_of_one_loop_are_chained():
    """The upper layer of a MultiRNNCell reads the lower layer's y; the final states of both
    layers are outputs of the graph."""
    result = fuse(model("MultiRNNCell of two LSTMCell layers (one loop)"))
    ops = [n for n in result.fused_graph_def.node if n.op == "DynamicRNN"]
    lower, upper = sorted(ops, key=lambda n: n.name)
    assert upper.input[0] == lower.name
    assert not lower.input[0].startswith(upper.name)


def test_cell_attributes_carry_over():
    m = model("forget_bias 0.5, relu")
    fused = fuse(m).fused_graph_def
    (node,) = [n for n in fused.node if n.op == "DynamicRNN"]
    assert node.attr["forget_bias"].f == pytest.approx(0.5) and node.attr["activation"].s == b"relu"
    assert_verifies(m, fused)


def test_verify_sees_a_wrong_attribute():
    """The verification runs DynamicRNN's reference: another forget_bias gives other outputs."""
    m = model("BasicLSTMCell")
    fused = fuse(m).fused_graph_def
    (node,) = [n for n in fused.node if n.op == "DynamicRNN"]
    node.attr["forget_bias"].f = 0.0
    assert not verify(m, fused).passed


@pytest.mark.parametrize("form", [f for f in KERAS_GRU_LOOPS if "Bidirectional" not in f]
                         + ["sequence_length fed, tf_keras GRUCell (reset_after=True)"])
def test_a_keras_gru_layer_keeps_its_convention_and_the_candidates_recurrent_bias(form):
    """Each DynamicGRUV2 of a Keras GRU(reset_after=True) loop has reset_after=True and reads, with
    a bias, the candidate's recurrent bias (the h part of Keras's recurrent bias row) as its
    optional input, before the lengths of a loop that has them; its weights are prepared once,
    before it (the gate kernel and bias put together, the candidate's kernel and biases split off)."""
    fused = fuse(model(form)).fused_graph_def
    nodes = {n.name: n for n in fused.node}
    biased = "use_bias=False" not in form
    for node in _loop_ops(fused):
        assert node.attr["reset_after"].b
        data = [t for t in node.input if not t.startswith("^")]
        assert len(data) == len(REGISTRY.fused_ops[node.op].present_inputs(node.attr))
        listed = [s.decode() for s in node.attr["optional_inputs"].list.s]
        lengths = ["seq_length"] if "sequence_length" in form else []
        assert listed == (["candidate_recurrent_bias"] if biased else []) + lengths
        weights = data[1:5] + data[6:7] if biased else data[1:5]
        assert [nodes[t.split(":")[0]].op for t in weights] == ["ConcatV2", "ConcatV2", "Split", "Split", "Split"][
            :len(weights)]
        assert all(t.endswith(":2") for t in weights[2:])  # the h columns / parts
        if biased:  # the input row's h part and the recurrent row's: two different splits
            assert weights[3].split(":")[0] != weights[4].split(":")[0]
        for t in weights:  # prepared outside any loop, from the graph's constants
            assert not any(n.op in ("While", "StatelessWhile") for n in _upstream(nodes, t))


def _upstream(nodes: dict, tensor: str) -> list:
    seen, stack, found = set(), [tensor.split(":")[0]], []
    while stack:
        name = stack.pop()
        if name in seen or name not in nodes:
            continue
        seen.add(name)
        found.append(nodes[name])
        stack.extend(t.split(":")[0].lstrip("^") for t in nodes[name].input)
    return found


def test_verify_sees_the_convention_of_a_gru_layer():
    """The same DynamicGRUV2 ops with TensorFlow's convention (reset_after false, no recurrent bias
    of the candidate) compute something else than the Keras GRU layers."""
    m = model("tf_keras GRU, two layers (two loops)")
    fused = fuse(m).fused_graph_def
    assert verify(m, fused).passed
    for node in _loop_ops(fused):
        node.attr["reset_after"].b = False
        del node.attr["optional_inputs"]
        del node.input[6]
    assert not verify(m, fused).passed


def test_tf_form_runs_the_reference():
    m = model("GRUCell")
    tf_form = fuse(m, emit="tf").graph_def
    assert counts(tf_form, "DynamicGRUV2", "GRUCell", *LOOP_NODES) == {}
    calls = [n.attr["_scopefusion_op"].s for n in tf_form.node if n.op == "PartitionedCall"]
    assert calls == [b"DynamicGRUV2"]
    assert_verifies(m, tf_form)


def test_pass_off_leaves_the_loop():
    m = model("BasicLSTMCell")
    fused = fuse(m, passes="ScopeBasicLSTMCellPass").fused_graph_def
    assert counts(fused, "StatelessWhile", "DynamicRNN") == {"StatelessWhile": 1}


# ------------------------------------------------------------------------------ sequence_length
def _source(graph_def, tensor: str):
    """The node ``tensor`` comes from, Identity nodes (dynamic_rnn's ``CheckSeqLen``) looked through."""
    nodes = {n.name: n for n in graph_def.node}
    node = nodes[tensor.split(":")[0]]
    while node.op == "Identity":
        node = nodes[node.input[0].split(":")[0]]
    return node


def _loop_ops(graph_def) -> list:
    return [n for n in graph_def.node if n.op in ("DynamicRNN", "DynamicGRUV2")]


@pytest.mark.parametrize("form", list(SEQUENCE_LOOPS))
def test_each_op_reads_the_sequence_lengths(form):
    """With sequence_length every op lists seq_length and reads the lengths given to dynamic_rnn
    (the placeholder, or the constant) as its last input; without, it has its required inputs only."""
    from tensorflow.python.framework import tensor_util

    fused = fuse(model(form)).fused_graph_def
    for node in _loop_ops(fused):
        declared = REGISTRY.fused_ops[node.op]
        data = [t for t in node.input if not t.startswith("^")]
        if "sequence_length" not in form:
            assert "optional_inputs" not in node.attr and len(data) == len(declared.required_inputs)
            continue
        assert list(node.attr["optional_inputs"].list.s) == ([b"candidate_recurrent_bias"] if "reset_after=True" in form
                                                             else []) + [b"seq_length"]
        assert list(node.attr["optional_inputs"].list.s)[-1:] == [b"seq_length"]
        assert len(data) == len(declared.present_inputs(node.attr))
        lengths = _source(fused, data[-1])
        if "fed" in form:
            assert (lengths.name, lengths.op) == ("lengths", "Placeholder")
        else:
            value = tensor_util.MakeNdarray(lengths.attr["value"].tensor)
            assert lengths.op == "Const" and value.dtype == "int32" and value.shape == (rm.BATCH,)
        assert all(_source(fused, t).name != lengths.name for t in data[:-1])


def test_verify_sees_a_missing_sequence_length():
    """The lengths matter: the same op without its seq_length runs every step for every sequence."""
    m = model("sequence_length shorter than the steps, LSTMCell")
    fused = fuse(m).fused_graph_def
    (node,) = _loop_ops(fused)
    del node.attr["optional_inputs"]
    del node.input[5]
    assert not verify(m, fused).passed


@pytest.mark.parametrize("form", [f for f in SEQUENCE_LOOPS if f.startswith(("bidirectional", "TF1 loops, bi"))])
def test_bidirectional_has_one_op_per_direction(form):
    """The forward op reads the input, the backward one the input reversed (ReverseSequence by the
    lengths, else ReverseV2), each through dynamic_rnn's transpose unless time-major."""
    fused = fuse(model(form)).fused_graph_def
    ops = {n.name.split("/")[1]: n for n in _loop_ops(fused)}
    assert sorted(ops) == ["bw", "fw"] and all(n.name.split("/")[2] == n.name.split("/")[1] for n in ops.values())
    nodes = {n.name: n for n in fused.node}

    def reads(node):
        producer = nodes[node.input[0].split(":")[0]]
        return nodes[producer.input[0].split(":")[0]] if producer.op == "Transpose" else producer

    reverse = "ReverseSequence" if "sequence_length" in form else "ReverseV2"
    assert reads(ops["bw"]).op == reverse and reads(ops["fw"]).op != reverse
    assert reads(ops["fw"]).name == reads(reads(ops["bw"])).name  # both read the same input


def _edited(form: str, edit) -> rm.RnnModel:
    """The real model of ``form`` with ``edit(graph_def)`` applied to a copy of its graph."""
    import dataclasses

    m = model(form)
    graph_def = type(m.graph_def)()
    graph_def.CopyFrom(m.graph_def)
    edit(graph_def)
    return dataclasses.replace(m, graph_def=graph_def)


def _node(graph_def, name: str):
    nodes = [n for n in graph_def.node] + [n for f in graph_def.library.function for n in f.node_def]
    (node,) = [n for n in nodes if n.name == name]
    return node


def _ones(graph_def) -> None:  # the output past a sequence's end: zeros -> ones
    from tensorflow.python.framework import tensor_util

    _node(graph_def, "rnn/zeros/Const").attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(1.0))


def _min(graph_def) -> None:  # the loop stops at the shortest sequence, not the longest
    _node(graph_def, "rnn/Max").op = "Min"


def _swapped(name: str):
    def swap(graph_def) -> None:  # Select(done, new, state): the new state kept past the end, not the old
        node = _node(graph_def, name)
        node.input[1], node.input[2] = node.input[2], node.input[1]
    return swap


@pytest.mark.parametrize("form, edit, reason", [
    ("sequence_length, BasicLSTMCell", _ones, "is 'rnn/zeros', not zeros"),
    ("TF1 loop, sequence_length, BasicLSTMCell", _ones, "is 'rnn/zeros', not zeros"),
    ("sequence_length, BasicLSTMCell", _min, "it may stop before a sequence ends"),
    ("TF1 loop, sequence_length, BasicLSTMCell", _min, "it may stop before a sequence ends"),
    ("sequence_length, BasicLSTMCell", _swapped("Select_1"), "does not carry its argument 'placeholder_2' through"),
    ("TF1 loop, sequence_length, BasicLSTMCell", _swapped("rnn/while/Select_1"),
     "does not carry the BasicLSTMCell step's state into its next step (through its sequence_length's Select)"),
])
def test_a_sequence_length_look_alike_is_refused(form, edit, reason):
    """dynamic_rnn's loops with one thing changed, so that a DynamicRNN with seq_length would
    compute something else: each is left as it is, with the reason."""
    m = _edited(form, edit)
    result = fuse(m)
    fused = result.fused_graph_def
    assert counts(fused, "DynamicRNN") == {}
    assert counts(fused, "StatelessWhile", "LoopCond") in ({"StatelessWhile": 1}, {"LoopCond": 1})
    (refusal,) = graph_refusals(result)
    assert refusal.name == "rnn" and reason in refusal.reason, refusal.reason
    assert_verifies(m, fused)


# ------------------------------------------------------------------------------ refused
def test_peepholes_are_the_loop_ops_optional_inputs():
    """LSTMCell with peepholes: the body's fused cell takes them as optional inputs, and so does
    the loop op, under control flow v2 and v1 alike."""
    for form in ("peepholes", "TF1 loop, peepholes"):
        m = model(form)
        fused = fuse(m).fused_graph_def
        assert counts(fused, "StatelessWhile", "LoopCond", "DynamicRNN") == {"DynamicRNN": 1}
        (loop,) = [n for n in fused.node if n.op == "DynamicRNN"]
        assert list(loop.attr["optional_inputs"].list.s) == [b"w_i_diag", b"w_f_diag", b"w_o_diag"]
        assert len(loop.input) == 5 + 3
        assert_verifies(m, fused)


def test_unfused_library_is_refused():
    """functions=False: the body keeps the cell's own ops, which the pass does not read."""
    m = model("BasicLSTMCell")
    result = fuse(m, functions=False)
    assert counts(result.fused_graph_def, "StatelessWhile", "DynamicRNN") == {"StatelessWhile": 1}
    (refusal,) = graph_refusals(result)
    assert "does more than fused cells" in refusal.reason and "(MatMul)" in refusal.reason, refusal.reason


@pytest.mark.parametrize("form, reason", [
    ("TF1 loop, gelu", "no BasicLSTMCell or GRUCell step in the TF1 loop"),
])
def test_tf1_loops_refused(form, reason):
    m = model(form)
    result = fuse(m)
    fused = result.fused_graph_def
    assert counts(fused, "DynamicRNN") == {} and counts(fused, "LoopCond") == {"LoopCond": 1}
    (refusal,) = graph_refusals(result)
    assert refusal.name == "rnn" and reason in refusal.reason, refusal.reason
    assert_verifies(m, fused)


def test_keras_weight_preparation_runs_once():
    """The Keras cell's weights, rearranged in the loop body each step, are rearranged once in the
    fused result, outside any loop."""
    m = model("Keras 3 LSTM, two layers (two loops)")
    fused = fuse(m).fused_graph_def
    assert counts(fused, "While", "StatelessWhile") == {}
    rnn = [n for n in fused.node if n.op == "DynamicRNN"]
    producers = {n.name: n.op for n in fused.node}
    for node in rnn:
        assert node.attr["forget_bias"].f == 0.0
        assert [producers[t.split(":")[0]] for t in node.input[1:3]] == ["ConcatV2", "ConcatV2"]


@pytest.mark.parametrize("form, cell_pass, cell_reason", [
    # a mask: the cell pass refuses the step (tf_keras's standard_lstm / standard_gru, straight under while/), so
    # the body holds no fused cell
    ("tf_keras GRU with a mask", "ScopeGRUCellPass",
     "the loop body keeps each sequence's state through its masked steps"),
    ("tf_keras LSTM with a mask", "ScopeBasicLSTMCellPass",
     "the loop body keeps each sequence's state through its masked steps"),
])
def test_keras_loops_refused(form, cell_pass, cell_reason):
    m = model(form)
    result = fuse(m)
    assert counts(result.fused_graph_def, "DynamicRNN", "DynamicGRUV2", "BasicLSTMCell", "GRUCell") == {}
    (refusal,) = graph_refusals(result)
    assert "does more than fused cells" in refusal.reason, refusal.reason
    (step,) = result.report.pass_report(cell_pass).refused
    assert step.function and cell_reason in step.reason, step.reason
    assert_verifies(m, result.fused_graph_def)


def _source_tensor(graph_def, tensor: str) -> str:
    """The tensor ``tensor`` is, Identity and Transpose nodes looked through."""
    nodes = {n.name: n for n in graph_def.node}
    node = nodes[tensor.split(":")[0]]
    while node.op in ("Identity", "Transpose"):
        tensor = node.input[0]
        node = nodes[tensor.split(":")[0]]
    return tensor


def test_tf_keras_layers_are_chained_and_their_states_are_read_from_the_op():
    """Two stacked tf_keras LSTM layers: the upper DynamicRNN reads the lower one's y (through
    tf_keras's transposes); a layer returning its state gives y, h and c from the op."""
    fused = fuse(model("tf_keras LSTM, two layers (two loops)")).fused_graph_def
    ops = [n for n in fused.node if n.op == "DynamicRNN"]
    (lower,) = [n for n in ops if _source_tensor(fused, n.input[0]) == "x"]
    (upper,) = [n for n in ops if n is not lower]
    assert _source_tensor(fused, upper.input[0]) == lower.name
    m = model("tf_keras LSTM return_state (the final h and c read from the loop)")
    fused = fuse(m).fused_graph_def
    (rnn,) = [n for n in fused.node if n.op == "DynamicRNN"]
    assert [_source_tensor(fused, t) for t in m.outputs] == [rnn.name, f"{rnn.name}:1", f"{rnn.name}:2"]


def test_a_tf_keras_look_alike_step_is_not_fused():
    """The real tf_keras loop body with its output reading the old state (``sigmoid(o) *
    tanh(c)``, not ``tanh(c')``) is no LSTM step: neither the cell nor the loop is fused.  (Gates
    trading ports, ``c * sigmoid(i) + sigmoid(f) * tanh(g)``, are an LSTM whose order the dataflow
    reveals: fused, ``test_rnn_dataflow``.)"""
    m = model("tf_keras LSTM, two layers (two loops)")
    graph_def = type(m.graph_def)()
    graph_def.CopyFrom(m.graph_def)
    for function in graph_def.library.function:
        nodes = {n.name: n for n in function.node_def}
        if "while/mul_1" in nodes:
            nodes["while/Tanh_1"].input[0] = "while_placeholder_3"
    edited = rm.RnnModel(graph_def, m.input_shapes, m.outputs)
    result = fuse(edited)
    assert counts(result.fused_graph_def, "DynamicRNN", "BasicLSTMCell") == {}
    assert len(graph_refusals(result)) == 2
    steps = result.report.pass_report("ScopeBasicLSTMCellPass").refused
    assert len(steps) == 2 and all("no BasicLSTMCell step in the scope" in r.reason for r in steps), steps
    assert_verifies(edited, result.fused_graph_def)
    assert not verify(m, result.fused_graph_def).passed  # the edit changed what the graph computes


@pytest.mark.parametrize("form, shape_node", [
    ("BasicLSTMCell", "rnn/Shape"),
    # return_sequences=False: the list holds one element, the step count is the loop's bound alone
    ("tf_keras LSTM return_sequences=False", "/PartitionedCall/Shape"),
])
def test_a_loop_over_fewer_steps_than_its_input_is_refused(form, shape_node):
    """The real loop with its step count (``shape(x)[0]``, a constant once frozen) changed to 3 of
    the input's 5 rows: a DynamicRNN would run all 5, so the loop is left as it is."""
    import numpy as np
    from tensorflow.python.framework import tensor_util

    m = model(form)
    graph_def = type(m.graph_def)()
    graph_def.CopyFrom(m.graph_def)
    (shape,) = [n for n in graph_def.node if n.name.endswith(shape_node)]
    value = tensor_util.MakeNdarray(shape.attr["value"].tensor)
    assert list(value) == [lm.STEPS, rm.BATCH, lm.INPUTS]
    shape.attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(np.array([3, rm.BATCH, lm.INPUTS], np.int32)))
    result = scopefusion.fuse(graph_def, registry=REGISTRY, enable_scope_fusion_passes=PASSES, hints=False)
    assert counts(result.fused_graph_def, "StatelessWhile", "DynamicRNN") == {"StatelessWhile": 1}
    (refusal,) = graph_refusals(result)
    assert "the loop runs 3 steps over an input of 5" in refusal.reason, refusal.reason


def test_a_layer_keeping_its_last_output_alone_gives_the_last_row_of_y():
    """return_sequences=False: each step writes its h at 0 of a one-element list, so the fused op's
    y[-1:] takes the list's place (the layer's own [-1] after it is kept). The top layer reads the
    lower one's output, whose rows the graph does not say: it reads x[:5], the steps its loop runs."""
    m = model("tf_keras two LSTM layers, the top one return_sequences=False and return_state (its input's rows "
              "unknown)")
    fused = fuse(m).fused_graph_def
    nodes = {n.name: n for n in fused.node}
    ops = [n for n in fused.node if n.op == "DynamicRNN"]
    (lower,) = [n for n in ops if _source_tensor(fused, n.input[0]) == "x"]
    (upper,) = [n for n in ops if n is not lower]
    top, bottom = upper.name.rpartition("/")[0], lower.name.rpartition("/")[0]
    last, first = nodes[f"{top}/last"], nodes[f"{top}/first"]
    assert last.op == first.op == "StridedSlice" and last.input[0] == upper.name and upper.input[0] == first.name
    assert _source_tensor(fused, first.input[0]) == lower.name and _source_tensor(fused, lower.input[0]) == "x"
    assert [n.attr["value"].tensor.int_val[0] for n in (nodes[f"{top}/first_end"], nodes[f"{top}/last_begin"])] \
        == [lm.STEPS, -1]
    assert not {f"{bottom}/first", f"{bottom}/last"} & set(nodes)  # the lower layer keeps every output
    y, h, c = (_source_tensor(fused, t) for t in m.outputs)
    assert nodes[y].op == "StridedSlice" and nodes[y].input[0] == last.name
    assert (h, c) == (f"{upper.name}:1", f"{upper.name}:2")


def test_list_shows_the_pass_and_its_ops(capsys):
    assert main(["list", "--ops", "--json"]) == 0
    ops = {op["name"]: op for op in json.loads(capsys.readouterr().out)}
    assert [(a["name"], a["optional"]) for a in ops["DynamicRNN"]["inputs"]] == \
        [("x", False), ("w", False), ("b", False), ("init_h", False), ("init_c", False), ("w_i_diag", True),
         ("w_f_diag", True), ("w_o_diag", True), ("proj", True), ("seq_length", True)]
    assert [a["name"] for a in ops["DynamicGRUV2"]["outputs"]] == ["y", "h"]
    assert ops["DynamicRNN"]["reference"] and ops["DynamicGRUV2"]["reference"]
    assert main(["list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (loop_pass,) = [p for p in data["passes"] if p["name"] == "ScopeDynamicRNNPass"]
    assert not loop_pass["general"] and not loop_pass["enabled"] and loop_pass["origin"] == "built-in"
    assert data["fused_ops"]["DynamicRNN"] == data["fused_ops"]["DynamicGRUV2"] == "built-in"


def test_a_loop_inside_a_called_function_is_refused():
    """dynamic_rnn inside a tf.function called from a TF1 graph: the loop lives in a library function,
    whose graph does not hold the loop's body; its step is still fused inside the body."""
    from tests.models import function_models as fm

    m = fm.called_dynamic_rnn(rm.basic_lstm())
    result = fuse(m)
    fused = result.fused_graph_def
    assert counts(fused, "DynamicRNN") == {}
    inside = [r for r in loop_report(result).refused if r.function and "no While" not in r.reason]
    assert len(inside) == 1 and "a loop inside a function" in inside[0].reason, inside
    cells = [n for f in fused.library.function for n in f.node_def if n.op == "BasicLSTMCell"]
    assert len(cells) == 1
    assert_verifies(m, fused)


@pytest.mark.parametrize("build", [
    lambda: lm.dynamic_rnn(rm.basic_lstm()),
    lambda: lm.keras("tf_keras", "LSTM", layers=1),
    lambda: lm.keras("keras", "GRU", layers=1),
], ids=["dynamic_rnn", "tf_keras LSTM", "Keras 3 GRU"])
def test_the_loop_pass_left_out_is_named_where_it_would_fuse(build):
    """With the cell passes on and the loop pass left out, the loop pass is tried for hints (a
    functional While is in the graph) and names the loop."""
    result = scopefusion.fuse(build().graph_def, registry=REGISTRY,
                              enable_scope_fusion_passes="ScopeBasicLSTMCellPass,ScopeGRUCellPass")
    (hint,) = [h for h in result.report.hints if h.startswith("ScopeDynamicRNNPass is not enabled")]
    assert "it would fuse 1 place(s)" in hint and "while'" in hint
