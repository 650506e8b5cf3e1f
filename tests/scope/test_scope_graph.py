"""Section 1: the scope tree built from node names."""
from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers.graph_helpers import make_graph

from scopefusion import GraphValidationError, ScopeGraph
from scopefusion.core.graph.io import load_model
from scopefusion.core.graph.shapes import RankInference
from scopefusion.core.scope.scope_graph import strip_index_suffix


def _graph():
    return make_graph([
        ("in", "Placeholder", []),
        ("a/b/c", "Mul", ["in", "in"]),
        ("a/b/d", "Identity", ["a/b/c"]),
        ("a/e", "Const", []),
        ("z/y", "Add", ["a/b/d", "a/e"]),
        ("a/b/LayerNorm_1/k", "Const", []),
        ("a/x_0/k", "Const", []),
    ])


def test_scopes_come_from_names_and_order_is_first_appearance():
    sg = ScopeGraph(_graph())
    names = [s.name for s in sg.scopes()]
    assert names == ["", "a", "a/b", "z", "a/b/LayerNorm_1", "a/x_0"]
    assert sg.scope_of("in").is_root
    assert sg.scope_of("a/b/c").name == "a/b"
    assert sg.scope("a/b").parent is sg.scope("a")
    assert sg.scope("a").parent is sg.root
    assert [s.name for s in sg.scope("a").sub_scopes()] == ["a/b", "a/x_0"]
    assert [s.name for s in sg.scope("a").all_sub_scopes()] == ["a/b", "a/b/LayerNorm_1", "a/x_0"]


def test_op_counts_cover_all_descendants_and_root_counts_everything():
    sg = ScopeGraph(_graph())
    a = sg.scope("a")
    assert a.op_counts == {"Mul": 1, "Identity": 1, "Const": 3}
    assert sg.scope("a/b").op_counts == {"Mul": 1, "Identity": 1, "Const": 1}
    assert sg.root.op_counts == {"Placeholder": 1, "Mul": 1, "Identity": 1, "Const": 3, "Add": 1}
    assert sg.scope("a/b").node_names(direct=True) == ["a/b/c", "a/b/d"]
    assert sg.scope("a/b").node_names() == ["a/b/c", "a/b/d", "a/b/LayerNorm_1/k"]
    assert [n.name for n in a.nodes_by_op("Const")] == ["a/e", "a/b/LayerNorm_1/k", "a/x_0/k"]


@pytest.mark.parametrize("component,expected", [
    ("LayerNorm_1", "LayerNorm"), ("LayerNorm_12", "LayerNorm"), ("x_0", "x_0"), ("x", "x"),
    ("x_1a", "x_1a"), ("_1", "_1"), ("a_b_2", "a_b"),
])
def test_last_name_strips_positive_numeric_suffix(component, expected):
    assert strip_index_suffix(component) == expected


def test_last_name_of_scopes():
    sg = ScopeGraph(_graph())
    assert sg.root.last_name == "root"
    assert sg.scope("a/b/LayerNorm_1").last_name == "LayerNorm"
    assert sg.scope("a/x_0").last_name == "x_0"


def test_duplicate_names_dangling_inputs_and_cycles_are_reported():
    with pytest.raises(GraphValidationError, match="duplicate node names: 'x'"):
        ScopeGraph(make_graph([("x", "Const", []), ("x", "Const", [])]))
    with pytest.raises(GraphValidationError, match="'y' reads 'nope:1'"):
        ScopeGraph(make_graph([("y", "Identity", ["nope:1"])]))
    with pytest.raises(GraphValidationError, match="cycle through 2 node"):
        ScopeGraph(make_graph([("p", "Identity", ["q"]), ("q", "Identity", ["p"]), ("r", "Identity", ["q"])]))


def test_loop_back_edges_are_not_cycles():
    graph = make_graph([
        ("init", "Const", []),
        ("while/Enter", "Enter", ["init"]),
        ("while/Merge", "Merge", ["while/Enter", "while/NextIteration"]),
        ("while/add", "Add", ["while/Merge", "while/Merge"]),
        ("while/NextIteration", "NextIteration", ["while/add"]),
    ])
    sg = ScopeGraph(graph)
    assert len(sg.index.topological_order()) == 5


def test_index_tracks_ports_consumers_and_control_edges():
    graph = make_graph([
        ("s", "Split", []),
        ("u", "Add", ["s:1", "s", "^c"]),
        ("c", "NoOp", []),
    ])
    sg = ScopeGraph(graph)
    idx = sg.index
    assert idx.inputs[idx.index["u"]] == ((0, 1), (0, 0), (2, -1))
    assert idx.consumers[idx.index["s"]] == ((1, 1, 0), (1, 0, 1))  # by consumer, then slot
    assert idx.consumers[idx.index["c"]] == ((1, -1, 2),) and idx.consumers[idx.index["u"]] == ()
    assert sg.input_names("u", control=True) == ["s:1", "s", "^c"]


def test_rank_inference_through_computed_shapes_and_einsum():
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, None, 7], name="x")
        kernel = tf.ones([7, 4])
        # what Keras' Tensordot writes: a reshape to a shape computed from Shape(x)
        flat = tf.matmul(tf.reshape(x, [-1, 7]), kernel, name="flat")
        shape = tf.concat([tf.gather(tf.shape(x), [0, 1]), [4]], axis=0, name="shape")
        tf.reshape(flat, shape, name="dense")
        tf.einsum("bsd,dk->bsk", x, kernel, name="einsum")
        tf.reshape(x, tf.shape(x)[:2], name="sliced")  # a StridedSlice: length unknown
    sg = ScopeGraph(graph.as_graph_def())
    assert sg.rank("x") == 3 and sg.rank("flat") == 2
    assert sg.rank("dense") == 3
    assert sg.rank("einsum/Einsum") == 3
    # the local rules cannot follow a StridedSlice's length; TensorFlow's shape inference can
    assert RankInference(sg.index).rank("sliced") is None
    assert sg.rank("sliced") == 2


def test_the_scope_arrays_agree_with_the_scopes_on_a_real_model():
    """ScopeTree.arrays (what a pattern search tests) says what the Scope objects say: pre-order,
    subtree ranges, and every op type's count over each subtree (-1 where absent)."""
    example = Path(__file__).resolve().parents[2] / "scopefusion" / "examples" / "bert_tiny.pb"
    sg = ScopeGraph(load_model(example).graph_def)
    arrays = sg.tree.arrays
    expected, stack = [], [sg.root]
    while stack:
        scope = stack.pop()
        expected.append(scope)
        stack.extend(reversed(scope.sub_scopes()))
    assert arrays.order == expected
    for i, scope in enumerate(arrays.order):
        inside = {id(s) for s in arrays.order[i:int(arrays.end[i])]}
        assert inside == {id(scope)} | {id(s) for s in scope.all_sub_scopes()}
    ops = {op for s in sg.scopes() for op in s.op_counts} | {"NoSuchOp"}
    assert len(ops) > 10
    for op in ops:
        assert arrays.counts(op).tolist() == [s.op_counts.get(op, -1) for s in arrays.order], op
