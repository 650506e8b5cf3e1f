"""Fusion inside the function library: the cell step in the ``While`` body of a Keras LSTM / GRU
that is not unrolled and of ``dynamic_rnn`` under control flow v2, and a GELU in a function
called by a ``StatefulPartitionedCall``, each fused in its function with the same passes and
checks; the nodes calling the functions and the functions' signatures stay as they were, the
report names the function, the fused graph runs (reference implementations inside the bodies)
and agrees with the original; ``functions=False`` / ``--no-functions`` leave the library as it is."""
from __future__ import annotations

import functools
import json
import re

import pytest

from tests.models import function_models as fm
from tests.models import rnn_models as rm
from tests.helpers.pass_checks import REGISTRY
from tests.helpers.verify import assert_verifies
from tests.passes.rnn.test_rnn_keras import HARD_SIGMOID

import scopefusion
from scopefusion.report.html import report as html_report
from scopefusion.cli import main
from scopefusion.core.functions.arg_shapes import constant_arg_shapes

LSTM, GRU = "ScopeBasicLSTMCellPass", "ScopeGRUCellPass"
CELLS = f"{LSTM},{GRU}"
CALL_OPS = ("While", "StatelessWhile", "PartitionedCall", "StatefulPartitionedCall", "If", "StatelessIf")

#: form -> (builder, fused ops expected in each loop body, number of loop bodies, the calling
#: nodes' attribute naming the functions that hold the steps)
LOOPS = {
    "Keras 3 LSTM, two layers": (lambda: fm.keras_loop("keras", "LSTM"), {"BasicLSTMCell": 1}, 2),
    "Keras 3 GRU(reset_after=False)": (lambda: fm.keras_loop("keras", "GRU", layers=1, reset_after=False),
                                       {"GRUCell": 1}, 1),
    "Keras 3 Bidirectional LSTM": (lambda: fm.keras_loop("keras", "LSTM", layers=1, bidirectional=True),
                                   {"BasicLSTMCell": 1}, 2),
    "Keras 3 Bidirectional GRU(reset_after=False)": (
        lambda: fm.keras_loop("keras", "GRU", layers=1, bidirectional=True, reset_after=False), {"GRUCell": 1}, 2),
    "Keras 3 LSTM mixed_float16 (the body casts the float32 weights)": (
        lambda: fm.keras_loop("keras", "LSTM", layers=1, policy="mixed_float16"), {"BasicLSTMCell": 1}, 1),
    # tf_keras (standard_lstm): the step's ops straight under while/, beside the loop's plumbing
    "tf_keras LSTM, two layers": (lambda: fm.keras_loop("tf_keras", "LSTM"), {"BasicLSTMCell": 1}, 2),
    "tf_keras Bidirectional LSTM": (lambda: fm.keras_loop("tf_keras", "LSTM", layers=1, bidirectional=True),
                                    {"BasicLSTMCell": 1}, 2),
    "tf_keras LSTM mixed_float16": (lambda: fm.keras_loop("tf_keras", "LSTM", layers=1, policy="mixed_float16"),
                                    {"BasicLSTMCell": 1}, 1),
    # tf_keras GRU(reset_after=False) runs the generic loop: its body scopes the cell (while/gru_cell)
    "tf_keras GRU(reset_after=False)": (lambda: fm.keras_loop("tf_keras", "GRU", layers=1, reset_after=False),
                                        {"GRUCell": 1}, 1),
    "tf_keras LSTM use_bias=False (the generic loop, a zero bias)": (
        lambda: fm.keras_loop("tf_keras", "LSTM", layers=1, use_bias=False), {"BasicLSTMCell": 1}, 1),
    # GRU(reset_after=True), the default: Keras 3's generic loop scopes the cell; tf_keras runs standard_gru (the
    # step straight under while/) where cuDNN could run the layer, else its generic loop (use_bias=False)
    "Keras 3 GRU": (lambda: fm.keras_loop("keras", "GRU", layers=1), {"GRUCell": 1}, 1),
    "Keras 3 Bidirectional GRU": (lambda: fm.keras_loop("keras", "GRU", layers=1, bidirectional=True),
                                  {"GRUCell": 1}, 2),
    "Keras 3 GRU mixed_float16": (lambda: fm.keras_loop("keras", "GRU", layers=1, policy="mixed_float16"),
                                  {"GRUCell": 1}, 1),
    "tf_keras GRU, two layers": (lambda: fm.keras_loop("tf_keras", "GRU"), {"GRUCell": 1}, 2),
    "tf_keras Bidirectional GRU": (lambda: fm.keras_loop("tf_keras", "GRU", layers=1, bidirectional=True),
                                   {"GRUCell": 1}, 2),
    "tf_keras GRU mixed_float16": (lambda: fm.keras_loop("tf_keras", "GRU", layers=1, policy="mixed_float16"),
                                   {"GRUCell": 1}, 1),
    "tf_keras GRU use_bias=False (the generic loop, zero biases)": (
        lambda: fm.keras_loop("tf_keras", "GRU", layers=1, use_bias=False), {"GRUCell": 1}, 1),
    "dynamic_rnn BasicLSTMCell": (lambda: fm.dynamic_rnn(rm.basic_lstm()), {"BasicLSTMCell": 1}, 1),
    "dynamic_rnn LSTMCell": (lambda: fm.dynamic_rnn(rm.lstm(), inputs=3), {"BasicLSTMCell": 1}, 1),
    "dynamic_rnn GRUCell": (lambda: fm.dynamic_rnn(rm.gru()), {"GRUCell": 1}, 1),
    "dynamic_rnn MultiRNNCell LSTMCell + GRUCell": (
        lambda: fm.dynamic_rnn(rm.multi(rm.lstm(), rm.gru())), {"BasicLSTMCell": 1, "GRUCell": 1}, 1),
    "static_rnn with sequence_length, control flow v2: each step in a StatelessIf branch": (
        lambda: rm.static_rnn(rm.multi(rm.basic_lstm(), rm.gru()), sequence_length=[3, 2], control_flow_v1=False),
        {"BasicLSTMCell": 1, "GRUCell": 1}, rm.STEPS),
}


@functools.cache
def model(form: str) -> rm.RnnModel:
    builders = {**{k: v[0] for k, v in LOOPS.items()},
                "tf_keras GRU with a mask": lambda: fm.keras_loop("tf_keras", "GRU", layers=1, masking=True),
                "tf_keras GRU hard_sigmoid": lambda: fm.keras_loop("tf_keras", "GRU", layers=1,
                                                                   recurrent_activation="hard_sigmoid"),
                "tf_keras LSTM with a mask": lambda: fm.keras_loop("tf_keras", "LSTM", layers=1, masking=True),
                "tf_keras LSTM hard_sigmoid": lambda: fm.keras_loop("tf_keras", "LSTM", layers=1,
                                                                    recurrent_activation="hard_sigmoid"),
                "called dynamic_rnn": lambda: fm.called_dynamic_rnn(rm.basic_lstm()),
                "called GELU + LayerNormalization": fm.called_dense_gelu_layer_norm}
    return builders[form]()


def fuse(m: rm.RnnModel, **options):
    return scopefusion.fuse(m.graph_def, registry=REGISTRY, enable_scope_fusion_passes=CELLS, hints=False,
                            **options)


def bodies(graph_def) -> list[str]:
    """The body functions of the graph's loops."""
    return sorted(n.attr["body"].func.name for n in graph_def.node if n.op in ("While", "StatelessWhile"))


def step_functions(graph_def) -> list[str]:
    """The functions that run a recurrent step: loop bodies, else the branches of the conds
    that skip the step once the sequences end (the step runs in the else branch)."""
    return bodies(graph_def) or sorted(n.attr["else_branch"].func.name for n in graph_def.node
                                       if n.op in ("If", "StatelessIf"))


def functions(graph_def) -> dict:
    return {f.signature.name: f for f in graph_def.library.function}


def op_counts(function) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in function.node_def:
        counts[node.op] = counts.get(node.op, 0) + 1
    return counts


def assert_call_sites_and_signatures_kept(original, fused) -> None:
    """Every calling node is the same, byte for byte, and every function keeps its signature,
    attributes and argument attributes."""
    calls = {n.name: n.SerializeToString(deterministic=True) for n in original.node if n.op in CALL_OPS}
    assert calls, "the graph calls no function"
    after = {n.name: n.SerializeToString(deterministic=True) for n in fused.node if n.name in calls}
    assert after == calls
    fused_functions = functions(fused)
    for name, f in functions(original).items():
        g = fused_functions[name]
        assert g.signature == f.signature and g.attr == f.attr and g.arg_attr == f.arg_attr, name
        assert sorted(g.ret) == sorted(f.ret) and sorted(g.control_ret) == sorted(f.control_ret)


# ------------------------------------------------------------------------------ loops
@pytest.mark.parametrize("form", list(LOOPS))
def test_the_step_in_each_loop_body_is_fused(form):
    m = model(form)
    _, per_body, loops = LOOPS[form]
    result = fuse(m)
    fused, report = result.fused_graph_def, result.report
    loop_bodies = step_functions(m.graph_def)
    assert len(loop_bodies) == loops
    after = functions(fused)
    for body in loop_bodies:
        counts = op_counts(after[body])
        assert {op: counts.get(op, 0) for op in per_body} == per_body, (body, counts)
        record = next(r for r in report.functions if r.name == body)
        assert record.status == "fused" and record.fused == sum(per_body.values())
        assert record.nodes_after < record.nodes_before
    changes = {op: (before, after) for op, before, after in report.function_op_count_changes()}
    for op, count in per_body.items():  # nothing else, and only inside the bodies
        assert report.fused_count(op) == count * loops
        assert changes[op] == (0, count * loops)
        assert all(f.function in loop_bodies and f.name.startswith(f"{f.function}::")
                   for f in report.fused if f.type == op)
    assert not any(n.op in per_body for n in fused.node)
    assert_call_sites_and_signatures_kept(m.graph_def, fused)
    assert_verifies(m, fused)


def test_the_tensorflow_runnable_form_calls_the_reference_inside_the_body():
    m = model("Keras 3 LSTM, two layers")
    result = fuse(m, emit="tf")
    library = functions(result.graph_def)
    for body in bodies(m.graph_def):
        calls = [n for n in library[body].node_def if n.op == "PartitionedCall"]
        assert [n.attr["_scopefusion_op"].s for n in calls] == [b"BasicLSTMCell"]
        readers = [t for n in library[body].node_def for t in n.input if t.startswith(calls[0].name + ":")]
        readers += [t for t in library[body].ret.values() if t.startswith(calls[0].name + ":")]
        assert readers and all(t.split(":")[1] == "output" for t in readers)
    assert_verifies(m, result.graph_def)


@pytest.mark.parametrize("form, scope, pass_name, reason", [
    # tf_keras's standard_lstm / standard_gru write the step straight under while/
    ("tf_keras GRU with a mask", "while", GRU,
     "the loop body keeps each sequence's state through its masked steps (a mask: 'while/SelectV2"),
    ("tf_keras LSTM with a mask", "while", LSTM,
     "the loop body keeps each sequence's state through its masked steps (a mask: 'while/SelectV2"),
    # options cuDNN cannot run: tf_keras's generic loop, whose body scopes the cell
    ("tf_keras LSTM hard_sigmoid", r"sequential(_\d+)*/lstm(_\d+)*/while/lstm_cell", LSTM,
     HARD_SIGMOID.format(cell="LSTM")),
    ("tf_keras GRU hard_sigmoid", r"sequential(_\d+)*/gru(_\d+)*/while/gru_cell", GRU, HARD_SIGMOID.format(cell="GRU")),
])
def test_a_cell_the_op_cannot_express_is_refused_inside_the_body_with_the_reason(form, scope, pass_name, reason):
    m = model(form)
    result = fuse(m)
    (body,) = bodies(m.graph_def)
    (refusal,) = result.report.pass_report(pass_name).refused
    assert refusal.function == body
    assert re.fullmatch(rf"{body}::{scope}", refusal.name), refusal.name
    assert refusal.reason.startswith(f"rejected by the pass: {reason}"), refusal.reason
    assert result.report.fused_count("GRUCell") == result.report.fused_count("BasicLSTMCell") == 0
    assert_verifies(m, result.fused_graph_def)


def test_a_tf_keras_lstm_step_is_fused_beside_the_loops_plumbing():
    """tf_keras's standard_lstm writes the step under while/ with no cell scope: the cell
    (named as Keras names its cell scope) reads the loop's x_t, h and c arguments and the weights
    in its layout; its h is written to the output list and returned, its c returned; the loop's
    read, write and counters are left as they were; the report names no near miss."""
    m = model("tf_keras LSTM, two layers")
    result = fuse(m)
    fused = result.fused_graph_def
    # the body's while scope is fused, so no near miss of the pass's patterns (scope name 'while' is not 'lstm_cell')
    assert result.report.pass_report(LSTM).near_misses == [] and result.report.refused == []
    for body in bodies(m.graph_def):
        before, after = functions(m.graph_def)[body], functions(fused)[body]
        nodes = {n.name: n for n in after.node_def}
        (cell,) = [n for n in after.node_def if n.op == "BasicLSTMCell"]
        assert cell.name == "while/lstm_cell/cell"
        args = [a.name for a in after.signature.input_arg]
        x, h, c, w, b = cell.input
        assert nodes[x.split(":")[0]].op == "TensorListGetItem" and h in args and c in args
        assert (w, b) == ("while/lstm_cell/w:output:0", "while/lstm_cell/b:output:0")
        (put,) = [n for n in after.node_def if n.op == "TensorListSetItem"]
        assert put.input[2] == f"{cell.name}:h:0"
        returned = {args.index(arg): nodes[after.ret[out.name].split(":")[0]].input[0]
                    for arg, out in zip(args, after.signature.output_arg, strict=True) if ":" in after.ret[out.name]}
        assert returned[args.index(h)] == f"{cell.name}:h:0" and returned[args.index(c)] == f"{cell.name}:c:0"
        kept = {"TensorListGetItem": 1, "TensorListSetItem": 1, "AddV2": 2}  # the AddV2: time + 1, counter + 1
        assert {op: op_counts(after).get(op) for op in kept} == kept
        assert op_counts(before)["AddV2"] == 4  # and the step's two
        assert not {"MatMul", "BiasAdd", "Sigmoid", "Tanh", "Mul"} & set(op_counts(after))
    assert_verifies(m, fused)


def test_a_tf_keras_gru_step_is_fused_beside_the_loops_plumbing():
    """tf_keras's standard_gru writes the step under while/ with no cell scope and receives Keras's
    bias as its two rows, unstacked before the loop: the GRUCell(reset_after=True) (named as Keras
    names its cell scope) reads x_t, h and the weights put in its layout from the body's kernel
    arguments and both bias arguments (the input row's h part as the candidate's bias, the
    recurrent row's as its recurrent bias); its h is written and returned."""
    m = model("tf_keras GRU, two layers")
    result = fuse(m)
    fused = result.fused_graph_def
    assert result.report.pass_report(GRU).near_misses == [] and result.report.refused == []
    for body in bodies(m.graph_def):
        before, after = functions(m.graph_def)[body], functions(fused)[body]
        old = {n.name: n for n in before.node_def}
        nodes = {n.name: n for n in after.node_def}
        (cell,) = [n for n in after.node_def if n.op == "GRUCell"]
        assert cell.name == "while/gru_cell/cell" and cell.attr["reset_after"].b
        assert list(cell.attr["optional_inputs"].list.s) == [b"candidate_recurrent_bias"]
        args = [a.name for a in after.signature.input_arg]
        x, h, *weights = cell.input
        assert nodes[x.split(":")[0]].op == "TensorListGetItem" and h in args
        step = "while/gru_cell/"
        assert weights == [f"{step}gate_kernel:output:0", f"{step}gate_bias:output:0", f"{step}kernel_gates:output:2",
                           f"{step}bias_gates:output:2", f"{step}recurrent_bias_gates:output:2"]
        # the rows of the bias: the one the x product read, then the one the h product read
        rows = [old["while/BiasAdd"].input[1], old["while/BiasAdd_1"].input[1]]
        assert all(row in args for row in rows)
        assert list(nodes[f"{step}gate_bias_sum"].input) == rows
        assert [nodes[f"{step}{split}"].input[1] for split in ("bias_gates", "recurrent_bias_gates")] == rows
        kernels = [old["while/MatMul"].input[1], old["while/MatMul_1"].input[1]]  # kernel, recurrent kernel
        assert list(nodes[f"{step}stacked_kernel"].input)[:2] == kernels
        (put,) = [n for n in after.node_def if n.op == "TensorListSetItem"]
        assert put.input[2] == f"{cell.name}:h:0"
        returned = {args.index(arg): nodes[after.ret[out.name].split(":")[0]].input[0]
                    for arg, out in zip(args, after.signature.output_arg, strict=True) if ":" in after.ret[out.name]}
        assert returned[args.index(h)] == f"{cell.name}:h:0"
        assert not {"MatMul", "BiasAdd", "Sigmoid", "Tanh", "Mul", "Sub"} & set(op_counts(after))
    assert_verifies(m, fused)


# ------------------------------------------------------------------------------ called functions
def test_a_gelu_and_a_layer_norm_in_a_called_function_are_fused():
    """The GELU epilogue by the graph passes; the tf_keras layer norm by the scope pass, which
    needs gamma's shape: the call passes gamma as a constant, whose shape the argument takes."""
    m = model("called GELU + LayerNormalization")
    result = fuse(m)
    fused, report = result.fused_graph_def, result.report
    (call,) = [n for n in m.graph_def.node if n.op == "StatefulPartitionedCall"]
    name = call.attr["f"].func.name
    counts = op_counts(functions(fused)[name])
    assert counts.get("MatMulBiasAddActivation") == 1 and "Erfc" not in counts and "MatMul" not in counts, counts
    assert counts.get("LayerNorm") == 1 and "FusedBatchNormV3" not in counts, counts
    (epilogue,) = [n for n in functions(fused)[name].node_def if n.op == "MatMulBiasAddActivation"]
    assert epilogue.attr["activation"].s == b"Gelu"
    assert {f.type for f in report.fused if f.function == name} >= {"Gelu", "MatMulBiasAddActivation", "LayerNorm"}
    assert all(f.function == name for f in report.fused)
    assert_call_sites_and_signatures_kept(m.graph_def, fused)
    assert_verifies(m, fused)


def test_arguments_take_the_shape_of_the_constants_every_caller_passes_loop_invariants_only():
    """Keras 3 passes each layer's weights (frozen: constants) to its loop, which hands them on
    unchanged; the initial states are constants too (zeros) but change from step to step."""
    m = model("Keras 3 LSTM, two layers")
    shapes = constant_arg_shapes(m.graph_def)
    for body in bodies(m.graph_def):
        signature = functions(m.graph_def)[body].signature
        fixed = {signature.input_arg[k].name: [d.size for d in s.dim] for k, s in shapes[body].items()}
        assert sorted(fixed.values()) in ([[4, 16], [4, 16], [16]], [[4, 16], [5, 16], [16]]), fixed
        assert not any("placeholder" in name for name in fixed), fixed  # loop variables: none


def test_a_loop_in_a_called_function_is_fused_in_its_own_body_the_caller_kept():
    """The call's function holds the While; the While's body is a function of its own, fused on its
    own; the calling function, with nothing fused in it, is left as it was."""
    m = model("called dynamic_rnn")
    result = fuse(m)
    library = functions(m.graph_def)
    (call,) = [n for n in m.graph_def.node if n.op == "StatefulPartitionedCall"]
    caller = library[call.attr["f"].func.name]
    (loop,) = [n for n in caller.node_def if n.op in ("While", "StatelessWhile")]
    body = loop.attr["body"].func.name
    assert [(f.function, f.type) for f in result.report.fused] == [(body, "BasicLSTMCell")]
    statuses = {r.name: r.status for r in result.report.functions}
    assert statuses[body] == "fused" and statuses[caller.signature.name] == "unchanged"
    after = functions(result.fused_graph_def)
    assert after[caller.signature.name] == caller
    assert op_counts(after[body]).get("BasicLSTMCell") == 1
    assert_call_sites_and_signatures_kept(m.graph_def, result.fused_graph_def)
    assert_verifies(m, result.fused_graph_def)


# ------------------------------------------------------------------------------ the switch
def test_functions_false_leaves_the_library_byte_identical():
    m = model("Keras 3 LSTM, two layers")
    result = fuse(m, functions=False)
    assert result.fused_graph_def.library.SerializeToString(deterministic=True) == \
        m.graph_def.library.SerializeToString(deterministic=True)
    assert result.report.functions == [] and result.report.fused_count() == 0


def test_cli_no_functions_and_the_report(tmp_path, capsys):
    m = model("dynamic_rnn BasicLSTMCell")
    source = tmp_path / "rnn.pb"
    source.write_bytes(m.graph_def.SerializeToString())
    off, on = tmp_path / "off.pb", tmp_path / "on.pb"
    assert main(["run", str(source), "-o", str(off), "--enable_scope_fusion_passes", CELLS, "--no-functions"]) == 0
    written = type(m.graph_def)()
    written.ParseFromString(off.read_bytes())
    assert written.library.SerializeToString(deterministic=True) == \
        m.graph_def.library.SerializeToString(deterministic=True)
    assert "inside functions" not in capsys.readouterr().out
    report_file = tmp_path / "report.json"
    assert main(["run", str(source), "-o", str(on), "--enable_scope_fusion_passes", CELLS,
                 "--report", str(report_file)]) == 0
    printed = capsys.readouterr().out
    (body,) = bodies(m.graph_def)
    assert "inside functions: 1 fused op(s) in 1 of 2 function(s)" in printed
    assert f"function {body}: 1 fused op(s)" in printed
    table = printed[printed.index("Op counts inside functions (types that changed)"):]
    assert re.search(r"BasicLSTMCell\s*│\s*0\s*│\s*1\s*│\s*\+1", table), table
    report = json.loads(report_file.read_text())
    (record,) = [f for p in report["passes"] for f in p["fused"]]
    assert record["function"] == body and record["name"] == f"{body}::basic_lstm_cell"
    assert {f["name"]: f["status"] for f in report["functions"]}[body] == "fused"
    assert report["function_op_counts_after"]["BasicLSTMCell"] == 1
    assert "BasicLSTMCell" not in report["function_op_counts_before"]


# ------------------------------------------------------------------------------ left alone
def _edited_step(edit):
    """A copy of the dynamic_rnn graph whose loop body's first Sigmoid ``edit`` changed:
    ``(graph, body name, the node, the body's bytes)``."""
    m = model("dynamic_rnn BasicLSTMCell")
    graph = type(m.graph_def)()
    graph.CopyFrom(m.graph_def)
    (body,) = bodies(graph)
    target = functions(graph)[body]
    sigmoid = next(n for n in target.node_def if n.op == "Sigmoid")
    edit(sigmoid)
    return graph, body, sigmoid, target.SerializeToString(deterministic=True)


def test_a_body_whose_outputs_cannot_be_named_is_left_alone_with_the_reason(tmp_path, capsys):
    """An op neither TensorFlow nor the fused ops define: its output arguments, and so the
    tensors read from it, cannot be told; the function is left exactly as it was, and the run
    summary says why."""
    graph, body, sigmoid, before = _edited_step(lambda node: setattr(node, "op", "VendorSigmoid"))
    result = scopefusion.fuse(graph, registry=REGISTRY, enable_scope_fusion_passes=CELLS, hints=False)
    record = next(r for r in result.report.functions if r.name == body)
    assert record.status == "left alone" and record.fused == 0
    assert f"node {sigmoid.name!r} has op 'VendorSigmoid'" in record.reason
    assert functions(result.fused_graph_def)[body].SerializeToString(deterministic=True) == before
    source = tmp_path / "vendor.pb"
    source.write_bytes(graph.SerializeToString())
    assert main(["run", str(source), "-o", str(tmp_path / "out.pb"), "--enable_scope_fusion_passes", CELLS]) == 0
    printed = capsys.readouterr().out
    assert "inside functions: 0 fused op(s) in 0 of 2 function(s), 1 left alone" in printed
    assert f"function {body}: left alone: node {sigmoid.name!r} has op 'VendorSigmoid'" in printed


def test_a_body_that_is_no_valid_graph_is_left_alone_with_the_reason():
    """A node reading its own output (a cycle TensorFlow refuses as well): the function is left as it was."""
    graph, body, sigmoid, before = _edited_step(lambda node: node.input.__setitem__(0, f"{node.name}:y:0"))
    result = scopefusion.fuse(graph, registry=REGISTRY, enable_scope_fusion_passes=CELLS, hints=False)
    record = next(r for r in result.report.functions if r.name == body)
    assert record.status == "left alone" and record.reason.startswith("its body is not a valid graph:")
    assert "cycle" in record.reason and sigmoid.name in record.reason, record.reason
    assert functions(result.fused_graph_def)[body].SerializeToString(deterministic=True) == before


def test_a_mixed_computation_run_leaves_the_functions_alone_and_says_so():
    m = model("dynamic_rnn BasicLSTMCell")
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY, enable_scope_fusion_passes=CELLS, hints=False,
                              mix_compile_mode=True)
    assert any("functions of its library were left alone" in w for w in result.report.warnings)
    assert result.report.functions == [] and result.report.fused_count("BasicLSTMCell") == 0
    after = functions(result.fused_graph_def)
    for name, function in functions(m.graph_def).items():
        assert after[name] == function


def test_the_html_page_shows_the_op_counts_inside_functions():
    result = fuse(model("dynamic_rnn BasicLSTMCell"))
    page = html_report.html_report(result.report, "rnn.pb")
    section = page[page.index("<h2>Op counts inside functions (types that changed)</h2>"):]
    assert "<td>BasicLSTMCell</td>" in section.split("</table>")[0]
