"""The partitioner's rules and its errors: the supported-ops table and its file, ``in_out_pair``
mistakes, plugins' declarations, cycle-free segments, functional loops, resources."""
from __future__ import annotations

import types

import numpy as np
import pytest
from tests.models.partition_models import loop_model, text_features_model

import scopefusion
from scopefusion import OptionError, PluginError, hookimpl
from scopefusion.core.partition import PartitionError, SupportedOps, parse_supported_ops
from scopefusion.core.partition.supported import host_only_family, read_supported_ops_file
from scopefusion.core.options import SessionOptionError
from scopefusion.plugins.registry import load_registry
from scopefusion.testing import graph_from_function


@pytest.fixture(scope="module")
def registry():
    return load_registry(autoload=False)


@pytest.fixture(scope="module")
def text_model():
    return text_features_model()


# ------------------------------------------------------------------ the supported-ops table
def test_a_supported_ops_file_in_the_reference_format(tmp_path):
    path = tmp_path / "npu_supported_ops.json"
    path.write_text('{"MatMul": {"isGray": false, "isHeavy": true}, "Softmax": {"isGray": true, "isHeavy": false},'
                    ' "Relu": {}}')
    table = SupportedOps.build(file_table=read_supported_ops_file(path), fused_ops=["Gelu"])
    assert table.why_not("MatMul") is None and table.is_heavy("MatMul") and not table.is_heavy("Relu")
    assert table.why_not("Gelu") is None  # a declared fused op
    assert table.why_not("Softmax") == (f"op Softmax is gray (isGray) in supported-ops file {path}: not run by the "
                                        "back end in mixed mode")
    assert table.why_not("Conv2D") == f"op Conv2D is not in the back end's supported ops (supported-ops file {path})"
    assert table.why_not("Placeholder") == "graph input Placeholder: runs on the host"


@pytest.mark.parametrize("text,message", [
    ("", "the supported-ops file is empty"),
    ('{"MatMul": {"isGray": false},\n "Relu": }', "not JSON (Expecting value at line 2 column 10)"),
    ('["MatMul"]', "the file holds a list, not an object"),
    ("{}", "the file names no op"),
    ('{"MatMul": {"isGrey": false}}', "the entry of 'MatMul' has unknown key(s) 'isGrey'; allowed: isGray and isHeavy"),
    ('{"MatMul": {"isGray": "no"}}', "MatMul.isGray is 'no'; allowed: true or false"),
    ('{"MatMul": true}', "the entry of 'MatMul' is True, not an object"),
    ('{"MatMul": {}, "MatMul": {"isGray": true}}', "'MatMul' is given twice; allowed: each op type once"),
])
def test_supported_ops_file_mistakes_are_one_line_errors(text, message):
    with pytest.raises(PartitionError) as caught:
        parse_supported_ops(text, "ops.json")
    assert str(caught.value).startswith("ops.json: ") and message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_missing_supported_ops_file_is_an_error_before_any_work(tmp_path, text_model, registry):
    missing = tmp_path / "none.json"
    with pytest.raises(PartitionError, match=f"supported-ops file {missing}: no such file"):
        scopefusion.fuse("/nonexistent/model.pb", registry=registry, mix_compile_mode=True,
                         supported_ops_file=missing)
    with pytest.raises(OptionError, match="given without mix_compile_mode"):
        scopefusion.fuse(text_model.graph_def, registry=registry, supported_ops_file=missing)


@pytest.mark.parametrize("op,family", [
    ("DecodeJpeg", "string op"), ("StringSplitV2", "string op"), ("ParseExampleV2", "string op"),
    ("TFRecordDataset", "dataset or iterator op"), ("IteratorGetNext", "dataset or iterator op"),
    ("PyFunc", "Python function"), ("ScalarSummary", "summary op"), ("SaveV2", "checkpoint op"),
    ("Print", "print op"), ("FIFOQueueV2", "queue or reader op"), ("ReaderReadV2", "queue or reader op"),
    ("OutfeedEnqueueTuple", "outfeed op"), ("Placeholder", "graph input"),
    ("Conv2D", None), ("NextIteration", None), ("Size", None), ("Identity", None), ("While", None),
])
def test_the_default_supported_set_leaves_out_host_only_families(op, family):
    assert host_only_family(op) == family
    verdict = SupportedOps.build().why_not(op)
    assert (verdict is None) == (family is None)


def test_no_table_makes_the_reference_run_datasets_or_string_join_on_a_back_end():
    table = SupportedOps.build(plugin_table=parse_supported_ops('{"TFRecordDataset": {}, "StringJoin": {}}'))
    assert table.why_not("TFRecordDataset") == "dataset op TFRecordDataset: runs on the host"
    assert table.why_not("StringJoin") == "string op StringJoin: runs on the host"


# ------------------------------------------------------------------------- plugins
def _plugin(table):
    module = types.ModuleType("backend")

    @hookimpl
    def scopefusion_supported_ops():
        return table

    module.scopefusion_supported_ops = scopefusion_supported_ops
    return module


def test_plugins_may_declare_one_op_only_with_the_same_flags():
    same = load_registry(autoload=False, plugins=[("a", _plugin(["MatMul"])), ("b", _plugin({"MatMul": {}}))])
    assert same.supported_ops["MatMul"].origin == "a local"
    with pytest.raises(PluginError, match="supported op 'Softmax' is declared with different flags by a local "
                                          "and by b local"):
        load_registry(autoload=False, plugins=[("a", _plugin({"Softmax": {"isGray": True}})),
                                               ("b", _plugin(["Softmax"]))])
    with pytest.raises(PluginError, match=r"hook scopefusion_supported_ops returned 42; allowed: op type names"):
        load_registry(autoload=False, plugins=[("a", _plugin([42]))])
    with pytest.raises(PluginError, match=r"MatMul.isHeavy is 1; allowed: true or false"):
        load_registry(autoload=False, plugins=[("a", _plugin({"MatMul": {"isHeavy": 1}}))])


# ------------------------------------------------------------------------ in_out_pair
def test_in_out_pair_without_mix_compile_mode_is_one_line_error(text_model, registry):
    with pytest.raises(SessionOptionError) as caught:
        scopefusion.fuse(text_model.graph_def, registry=registry, in_out_pair="[[['parse/StringStrip'], ['scores']]]")
    assert str(caught.value) == (
        "NpuOptimizer options in_out_pair, mix_compile_mode: in_out_pair is set but mix_compile_mode = False "
        "(default); allowed: mix_compile_mode = True with in_out_pair")


@pytest.mark.parametrize("value,problem", [
    ("[[['a', 'b'], ['c']]", "is not a Python literal"),
    ("[['a', 'b']]", "has a str as the in_nodes of pair 1, not a list of node names"),
    ("[[['a'], []]]", "has no out_nodes in pair 1"),
])
def test_an_unparsable_in_out_pair_is_one_line_error(text_model, registry, value, problem):
    with pytest.raises(SessionOptionError) as caught:
        scopefusion.partition(text_model.graph_def, registry=registry, in_out_pair=value)
    assert str(caught.value).startswith("NpuOptimizer option in_out_pair: ") and "\n" not in str(caught.value)
    assert problem in str(caught.value)


def test_names_not_in_the_graph_are_errors_listing_close_names(text_model, registry):
    with pytest.raises(PartitionError) as caught:
        scopefusion.partition(text_model.graph_def, registry=registry,
                              in_out_pair="[[['parse/StringSpl', 'mlp/dense_0/MatMull'], ['scores', 'score']]]")
    assert str(caught.value) == (
        "in_out_pair: pair 1 in_nodes 'parse/StringSpl' is not in the graph (close: 'parse/StringSplit/Const', "
        "'parse/StringSplit/StringSplitV2', 'parse/StringSplit/strided_slice'); pair 1 in_nodes 'mlp/dense_0/MatMull' "
        "is not in the graph (close: 'mlp/dense_0/MatMul'); pair 1 out_nodes 'score' is not in the graph (close: "
        "'scores'); allowed: exact node names of the graph")


def test_a_pair_that_bounds_nothing_is_an_error(text_model, registry):
    with pytest.raises(PartitionError) as caught:
        scopefusion.partition(text_model.graph_def, registry=registry,
                              in_out_pair="[[['mlp/logits/MatMul', 'parse/StringStrip'], ['parse/StringToNumber']]]")
    assert str(caught.value) == ("in_out_pair pair 1: in node 'mlp/logits/MatMul' reaches none of the out nodes; "
                                 "allowed: in nodes from which a path leads to the out nodes")


def test_an_unsupported_node_inside_a_device_range_is_named(text_model, registry):
    with pytest.raises(PartitionError) as caught:
        scopefusion.partition(text_model.graph_def, registry=registry, in_out_pair="[[['parse/tokens'], ['scores']]]")
    assert str(caught.value) == (
        "in_out_pair pair 1: node 'parse/StringToNumber' (StringToNumber) lies between the in and out nodes but the "
        "back end does not run it (string op StringToNumber: host-only in the default supported set); allowed: only "
        "supported nodes inside a range when in_out_pair_flag is True")
    # the same range on the host (flag False) is fine: the rest goes to the back end
    report = scopefusion.partition(text_model.graph_def, registry=registry, in_out_pair_flag=False,
                                   in_out_pair="[[['parse/tokens'], ['scores']]]")
    assert report.where("mlp/dense_0/MatMul") == "host" and report.where("parse/Size") == "host"
    assert report.reason("parse/StringStrip").startswith("string op StringStrip")


def test_a_range_that_splits_a_loop_is_an_error(registry):
    model = loop_model()
    with pytest.raises(PartitionError) as caught:
        scopefusion.partition(model.graph_def, registry=registry,
                              in_out_pair="[[['refine/Merge_1'], ['refine/Exit_1']]]")
    message = str(caught.value)
    assert message.startswith("in_out_pair: the range splits while loop 'refine/while_context': ")
    assert message.endswith("allowed: a range holding all of a loop or none of it")


# --------------------------------------------------------------------------- segments
def test_segments_never_form_a_cycle_through_the_host(registry):
    """a feeds c directly and through a host round trip: a and c cannot share a segment."""
    import tensorflow as tf

    def model(x):
        a = tf.nn.relu(x * 2.0, name="a")
        n = tf.strings.to_number(tf.strings.as_string(a, precision=6), name="n")
        c = tf.add(a, n, name="c")
        return tf.identity(tf.nn.sigmoid(c) + 2.0, name="y")

    graph = graph_from_function(model, tf.TensorSpec([3], tf.float32, "x"))
    result = scopefusion.fuse(graph, registry=registry, emit="tf", mix_compile_mode=True)
    first, second = result.partition.report.segments
    assert "a" in first.node_names and "c" in second.node_names
    assert first.outputs == ["a"] and second.inputs == ["a", "n"]
    shared = [n.name for n in graph.node if n.op == "Const" and n.name.endswith("y")]  # add/y, mul/y
    copied = {name for s in result.partition.report.segments for name in s.const_names}
    assert set(shared) <= copied and "Const" not in {n.op for n in result.fused_graph_def.node}
    calls = [n for n in result.graph_def.node if n.op == "PartitionedCall"]
    assert [list(c.input) for c in calls] == [["x"], ["GeOp0_0", "n"]]
    scopefusion.verify(graph, result.graph_def, fused_ops=registry.fused_ops,
                       feeds={"x": np.array([0.5, -1.0, 2.25], np.float32)}).assert_ok()


def test_functional_loops_are_placed_by_what_their_bodies_hold(registry):
    import tensorflow as tf

    def model(x):
        def format_and_parse(i, v):
            return i + 1, tf.strings.to_number(tf.strings.as_string(v * 1.5))

        def scale(i, v):
            return i + 1, tf.nn.relu(v * 0.5 + 1.0)

        _, y = tf.while_loop(lambda i, v: i < 3, format_and_parse, [0, x], name="formatted")
        _, z = tf.while_loop(lambda i, v: i < 3, scale, [0, y * 2.0], name="scaled")
        return tf.identity(z, name="z")

    graph = tf.function(model, input_signature=[tf.TensorSpec([4], tf.float32, "x")],
                        autograph=False).get_concrete_function().graph.as_graph_def()
    loops = {n.name: n.op for n in graph.node if n.op in ("While", "StatelessWhile")}
    assert len(loops) == 2
    report = scopefusion.partition(graph, registry=registry)
    assert report.where("formatted") == "host"
    assert report.reason("formatted").startswith("calls function formatted_body_")
    assert "whose node 'formatted/AsString' (AsString) the back end does not run: string op AsString" in report.reason(
        "formatted")
    assert report.where("scaled") == "GeOp0_0" and report.where("mul") == "GeOp0_0"
    result = scopefusion.fuse(graph, registry=registry, emit="tf", mix_compile_mode=True)
    scopefusion.verify(graph, result.graph_def, fused_ops=registry.fused_ops,
                       feeds={"x": np.array([0.5, -1.0, 2.25, 3.0], np.float32)}).assert_ok()


def test_resources_not_from_var_handle_ops_stay_on_the_host(registry):
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        keys = tf1.placeholder(tf.int64, [None], name="keys")
        table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant([1, 2, 3], tf.int64), tf.constant([10, 20, 30], tf.int64)), -1)
        tf.identity(tf.cast(table.lookup(keys), tf.float32) * 0.5, name="scaled")
    report = scopefusion.partition(graph.as_graph_def(), registry=registry, outputs="scaled")
    handle = next(n.name for n in graph.as_graph_def().node if n.op == "HashTableV2")
    find = next(n.name for n in graph.as_graph_def().node if n.op == "LookupTableFindV2")
    assert report.reason(handle) == "outputs a resource (HashTableV2); on the back end only VarHandleOp may"
    assert report.reason(find) == f"reads a resource from {handle!r} (HashTableV2), which is not a VarHandleOp"
    assert report.where("scaled") == "GeOp0_0"
