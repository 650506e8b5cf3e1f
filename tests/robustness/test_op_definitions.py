"""Graphs TensorFlow refuses (or crashes on) are refused at load with a reason, checked against
TensorFlow's op definitions without importing TensorFlow; a pass's result that TensorFlow would
refuse is never written.  Each case was found by a fuzzing campaign."""
from __future__ import annotations

import subprocess
import sys

import pytest
import tensorflow as tf
from tensorflow.core.framework import graph_pb2

import scopefusion
from scopefusion import FusedOp, GraphValidationError, OpPattern, PassError, PatternFusionBasePass, op
from scopefusion.core.graph.io import parse_graph_def
from scopefusion.testing import PassTester, graph_from_function

SPEC = tf.TensorSpec([2, 3], tf.float32, "x")


def _graph() -> graph_pb2.GraphDef:
    return graph_from_function(lambda x: tf.nn.relu(x + tf.constant([[1.0, 2, 3], [4, 5, 6]])), SPEC)


def _node(graph: graph_pb2.GraphDef, op_type: str):
    return next(n for n in graph.node if n.op == op_type)


def _refusal(graph: graph_pb2.GraphDef) -> str:
    with pytest.raises(GraphValidationError) as caught:
        parse_graph_def(graph.SerializeToString())
    text = str(caught.value)
    assert "\n" not in text
    with pytest.raises(GraphValidationError) as again:  # a text file is judged alike
        from google.protobuf import text_format
        parse_graph_def(text_format.MessageToString(graph).encode())
    assert str(again.value).split("invalid graph: ")[1] == text.split("invalid graph: ")[1]
    return text


def _imports(graph: graph_pb2.GraphDef) -> str | None:
    try:
        with tf.Graph().as_default():
            tf.compat.v1.import_graph_def(graph, name="")
    except Exception as exc:  # noqa: BLE001 - TensorFlow's refusal
        return str(exc)
    return None


def _spoil_edge_dtype(g):
    _node(g, "Placeholder").attr["dtype"].type = 3


def _spoil_edge_dtype_named_port(g):
    _spoil_edge_dtype(g)
    add = _node(g, "AddV2")
    add.input[0] += ":0"


def _spoil_input_count(g):
    _node(g, "Relu").input.append(_node(g, "Placeholder").name)


def _spoil_colocation(g):
    _node(g, "Relu").attr["_class"].list.s.append(b"loc:@nowhere")


def _spoil_device(g):
    _node(g, "Relu").device = "/foo:bar"


def _spoil_version(g):
    g.versions.min_consumer = 10**6


def _spoil_shape(g):
    _node(g, "Placeholder").attr["shape"].shape.dim[0].size = -7


def _spoil_output_shapes(g):
    _node(g, "Relu").attr["_output_shapes"].list.shape.add().dim.add(size=-5)


@pytest.mark.parametrize("spoil, needle", [
    (_spoil_edge_dtype, "input 0 'x' carries int32, its op AddV2 takes float32 there"),
    (_spoil_edge_dtype_named_port, "input 0 'x:0' carries int32, its op AddV2 takes float32 there"),
    (_spoil_input_count, "it has 2 data input(s), its op Relu takes 1"),
    (_spoil_colocation, "it is to be colocated with 'loc:@nowhere', which is no node of the graph"),
    (_spoil_device, "its device '/foo:bar' does not read as a device"),
    (_spoil_version, "its minimum consumer version 1000000 is above the installed TensorFlow's graph version"),
    (_spoil_shape, "attribute 'shape' holds the shape [-7, 3]: no dimension may be below -1"),
    (_spoil_output_shapes, "attribute '_output_shapes' holds the shape [-5]"),
])
def test_a_graph_tensorflow_refuses_to_import_is_refused_with_the_rule(spoil, needle):
    graph = _graph()
    spoil(graph)
    assert _imports(graph) is not None  # TensorFlow refuses it too
    assert needle in _refusal(graph)


def test_a_const_whose_tensor_disagrees_with_its_dtype_is_refused_before_tensorflow_sees_it():
    graph = _graph()
    _node(graph, "Const").attr["value"].tensor.dtype = 3  # one enum changed: TensorFlow aborts on it
    assert "node 'Const' (Const): its tensor holds int32 values, its dtype attribute says float32" in _refusal(graph)


@pytest.mark.parametrize("spoil, needle", [
    (lambda t: setattr(t, "tensor_content", t.tensor_content[:8]), "its tensor holds 8 bytes, its shape [2, 3] "
                                                                   "of float32 takes 24"),
    (lambda t: (setattr(t, "tensor_content", b""), t.float_val.extend([1.0] * 7)), "its tensor holds 7 values, "
                                                                                   "its shape [2, 3] has 6"),
])
def test_a_const_whose_contents_do_not_fit_its_shape_is_refused(spoil, needle):
    graph = _graph()
    spoil(_node(graph, "Const").attr["value"].tensor)
    assert needle in _refusal(graph)


def _recursive_library(graph: graph_pb2.GraphDef) -> graph_pb2.GraphDef:
    """A PartitionedCall of a function that calls itself."""
    function = graph.library.function.add()
    function.signature.name = "loop_forever"
    function.signature.input_arg.add(name="a", type=1)
    function.signature.output_arg.add(name="out", type=1)
    inner = function.node_def.add(name="again", op="PartitionedCall", input=["a"])
    inner.attr["Tin"].list.type.append(1)
    inner.attr["Tout"].list.type.append(1)
    inner.attr["f"].func.name = "loop_forever"
    function.ret["out"] = "again:output:0"
    call = graph.node.add(name="call", op="PartitionedCall", input=[_node(graph, "Relu").name])
    call.attr["Tin"].list.type.append(1)
    call.attr["Tout"].list.type.append(1)
    call.attr["f"].func.name = "loop_forever"
    return graph


def test_a_self_recursive_function_is_refused_before_tensorflow_imports_it(tmp_path):
    graph = _recursive_library(_graph())
    assert "function 'loop_forever': it calls itself ('loop_forever' -> 'loop_forever')" in _refusal(graph)
    path = tmp_path / "recursive.pb"
    path.write_bytes(graph.SerializeToString())
    for extra in ([], ["--no-functions"]):  # asking for shapes used to kill the process in TensorFlow
        done = subprocess.run([sys.executable, "-m", "scopefusion", "run", str(path), "-o", str(tmp_path / "o.pb"),
                               *extra], capture_output=True, text=True, timeout=300)
        assert done.returncode not in (0, -11, 139, -6, 134), done.stderr  # an error, no crash
        assert done.stderr.strip().splitlines()[-1].startswith("scopefusion: error: ")
        assert "calls itself" in done.stderr


@pytest.mark.parametrize("spoil, needle", [
    (lambda g: g.library.function.append(g.library.function[0]), "the library defines it 2 times"),
    (lambda g: g.library.function[0].ret.__setitem__("out", "nothing:output:0"),
     "its output 'out' returns 'nothing:output:0', which names no node or argument of it"),
    (lambda g: setattr(_node(g, "PartitionedCall").attr["f"].func, "name", "absent"),
     "attribute 'f' calls function 'absent', which the library does not define"),
])
def test_a_broken_function_library_is_refused(spoil, needle):
    graph = _recursive_library(_graph())
    graph.library.function[0].node_def[0].attr["f"].func.name = "helper"  # no recursion
    helper = graph.library.function.add()
    helper.signature.name = "helper"
    helper.signature.input_arg.add(name="a", type=1)
    helper.signature.output_arg.add(name="out", type=1)
    helper.ret["out"] = "a"
    spoil(graph)
    assert needle in _refusal(graph)


def test_the_checks_do_not_import_tensorflow():
    code = ("import sys, pathlib, scopefusion\n"
            "from scopefusion.core.graph.io import load_model\n"
            "load_model(pathlib.Path(scopefusion.__file__).parent / 'examples' / 'bert_tiny.pb')\n"
            "print('tensorflow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


# ------------------------------------------------------------------ a pass's result
class TwoInputIdentity(PatternFusionBasePass):
    def define_patterns(self):
        return [OpPattern("R", op("Relu", op("AddV2", "$a", "$b")))]

    def fusion(self, match):
        return FusedOp("Identity", inputs=["a", "b"], attrs={})


class YesTranspose(PatternFusionBasePass):
    def define_patterns(self):
        return [OpPattern("R", op("Relu", op("AddV2", "$a", "$b")))]

    def fusion(self, match):
        return FusedOp("MatMul", inputs=["a", "b"], attrs={"T": 1, "transpose_a": "yes"})


@pytest.mark.parametrize("cls, needle", [
    (TwoInputIdentity, "the fused op is TensorFlow's Identity, which it does not fit: it lacks the required "
                       "attribute(s) 'T' (type)"),
    (YesTranspose, "attribute 'transpose_a' = 'yes' cannot be written as bool: a bool is wanted, not str"),
])
def test_a_pass_producing_a_stock_op_that_does_not_fit_it_is_refused(cls, needle):
    graph = _graph()
    result = PassTester().with_passes([cls]).run(graph, strict=False)
    (refusal,) = result.report.pass_report(cls.__name__).refused
    assert needle in refusal.reason
    assert _imports(result.fused_graph_def) is None
    assert "Relu" in [n.op for n in result.fused_graph_def.node]


class WrongDtypeIdentity(PatternFusionBasePass):
    """A stock op that fits its definition, but reads a tensor of another dtype than it declares."""

    def define_patterns(self):
        return [OpPattern("R", op("Relu", op("AddV2", "$a", "$b")))]

    def fusion(self, match):
        return FusedOp("Cast", inputs=["a"], attrs={"SrcT": 3, "DstT": 1})


def test_a_pass_result_reading_a_tensor_of_the_wrong_dtype_is_never_written(tmp_path):
    graph = _graph()
    with pytest.raises(PassError, match=r"pass WrongDtypeIdentity wrote node 'Relu' \(Cast\), which TensorFlow "
                                        r"would refuse: input 0 'x' carries float32, its op Cast takes int32"):
        PassTester().with_passes([WrongDtypeIdentity]).run(graph, strict=False)


def test_fuse_refuses_an_in_memory_graph_tensorflow_would_crash_on():
    graph = _graph()
    _node(graph, "Const").attr["value"].tensor.dtype = 3
    with pytest.raises(GraphValidationError, match="its dtype attribute says float32"):
        scopefusion.fuse(graph)
