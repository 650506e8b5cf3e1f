"""Fused ops with optional inputs: the declaration, its ``optional_inputs`` attribute (which
optional inputs a node has), the checks on it, and the TensorFlow-runnable form, which calls the
reference with ``None`` for an input a node leaves out."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from scopefusion import AttrDef, FusedOpDef, TensorArg
from scopefusion.core.errors import EmitError
from scopefusion.core.fusion.fused_ops import OPTIONAL_INPUTS_ATTR
from scopefusion.core.verify.tf_form import to_tf_runnable


def _scaled(x, scale=None, shift=None, *, T):
    y = x if scale is None else x * scale
    return (y if shift is None else y + shift,)


SCALED = FusedOpDef(
    "ScaledShift",
    inputs=(TensorArg("x", type_attr="T"), TensorArg("scale", type_attr="T", optional=True),
            TensorArg("shift", type_attr="T", optional=True)),
    outputs=(TensorArg("y", type_attr="T"),),
    attrs=(AttrDef("T", "type"),),
    reference=_scaled,
    same_shape={0: 0},
)


def test_the_declaration_gains_the_listing_attribute():
    listing = SCALED.attr_def(OPTIONAL_INPUTS_ATTR)
    assert listing is not None and listing.type == "list(string)" and listing.default == []
    assert [a.name for a in SCALED.attrs] == ["T", OPTIONAL_INPUTS_ATTR]
    assert SCALED.signature() == "ScaledShift(x[, scale][, shift]) -> (y)"
    assert dataclasses.replace(SCALED, origin="plugin 1.0").attrs == SCALED.attrs  # declared once
    plain = FusedOpDef("Plain", inputs=(TensorArg("x", type_attr="T"),), outputs=(TensorArg("y", type_attr="T"),),
                       attrs=(AttrDef("T", "type"),))
    assert plain.attr_def(OPTIONAL_INPUTS_ATTR) is None and plain.signature() == "Plain(x) -> (y)"


@pytest.mark.parametrize("inputs, outputs, same_shape, message", [
    ((TensorArg("a", dtype="float", optional=True), TensorArg("x", dtype="float")), (TensorArg("y", dtype="float"),),
     {}, "must come after every required input"),
    ((TensorArg("x", dtype="float"),), (TensorArg("y", dtype="float", optional=True),), {}, "cannot be optional"),
    ((TensorArg("x", dtype="float"), TensorArg("a", dtype="float", optional=True)),
     (TensorArg("y", dtype="float"),), {0: 1}, "1 required input(s)"),
])
def test_bad_declarations_are_refused(inputs, outputs, same_shape, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        FusedOpDef("Bad", inputs=inputs, outputs=outputs, same_shape=same_shape)


def test_declaring_the_listing_attribute_by_hand_is_refused():
    with pytest.raises(ValueError, match="leave it out"):
        FusedOpDef("Bad", inputs=(TensorArg("x", dtype="float"), TensorArg("a", dtype="float", optional=True)),
                   outputs=(TensorArg("y", dtype="float"),), attrs=(AttrDef(OPTIONAL_INPUTS_ATTR, "string", ""),))


def test_present_inputs_follow_the_listing():
    assert [a.name for a in SCALED.present_inputs({})] == ["x"]
    assert [a.name for a in SCALED.present_inputs({OPTIONAL_INPUTS_ATTR: ["shift"]})] == ["x", "shift"]
    assert SCALED.input_count({OPTIONAL_INPUTS_ATTR: [b"scale", b"shift"]}) == 3
    assert SCALED.check_attrs({"T": 1, OPTIONAL_INPUTS_ATTR: ["scale", "shift"]}) == []


@pytest.mark.parametrize("listed, message", [
    (["bias"], "lists 'bias', which is not one of its optional inputs (scale, shift)"),
    (["shift", "scale"], "once, in declaration order"),
    (["scale", "scale"], "once, in declaration order"),
    ("scale", "is not a list of input names"),
])
def test_a_wrong_listing_is_named(listed, message):
    (problem,) = SCALED.check_attrs({"T": 1, OPTIONAL_INPUTS_ATTR: listed})
    assert message in problem and OPTIONAL_INPUTS_ATTR in problem


def _graph(nodes):
    """A GraphDef of a float placeholder ``x`` [2], constants ``s`` and ``b`` and ``ScaledShift``
    nodes: (name, inputs, listed optional inputs or None)."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.placeholder(tf.float32, [2], name="x")
        tf.constant([2.0, 3.0], name="s")
        tf.constant([10.0, 20.0], name="b")
    graph_def = graph.as_graph_def()
    for name, inputs, listed in nodes:
        node = graph_def.node.add(name=name, op="ScaledShift", input=inputs)
        node.attr["T"].type = 1
        if listed is not None:
            node.attr[OPTIONAL_INPUTS_ATTR].list.s.extend(s.encode() for s in listed)
    return graph_def


def test_the_runnable_form_passes_none_for_a_left_out_input():
    import tensorflow as tf

    graph_def = _graph([("all", ["x", "s", "b"], ["scale", "shift"]), ("shift_only", ["x", "b"], ["shift"]),
                        ("none", ["x"], None), ("empty_list", ["x"], [])])
    original = graph_def.SerializeToString()
    runnable = to_tf_runnable(graph_def, {"ScaledShift": SCALED})
    assert graph_def.SerializeToString() == original  # input not modified
    assert sum(f.signature.name.startswith("scopefusion_ScaledShift") for f in runnable.library.function) == 3
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(runnable, name="")
    with tf.compat.v1.Session(graph=graph) as session:
        values = session.run(["all:0", "shift_only:0", "none:0", "empty_list:0"], {"x:0": np.array([1.0, 2.0])})
    expected = [[12.0, 26.0], [11.0, 22.0], [1.0, 2.0], [1.0, 2.0]]
    for got, want in zip(values, expected, strict=True):
        np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("inputs, listed, message", [
    (["x", "s"], None, "ScaledShift (with optional inputs []) takes 1 inputs, the node has 2"),
    (["x"], ["scale"], "ScaledShift (with optional inputs ['scale']) takes 2 inputs, the node has 1"),
    (["x", "s"], ["factor"], "lists 'factor', which is not one of its optional inputs"),
])
def test_the_runnable_form_names_a_node_whose_inputs_do_not_match(inputs, listed, message):
    with pytest.raises(EmitError, match=r"^bad: ") as caught:
        to_tf_runnable(_graph([("bad", inputs, listed)]), {"ScaledShift": SCALED})
    assert message in str(caught.value)


def test_shapes_flow_through_a_node_with_or_without_its_optional_inputs():
    """``same_shape`` names a required input, which keeps its position whatever optional inputs
    follow: a later stage sees the shape of ``x`` behind either node."""
    from tensorflow.core.framework import node_def_pb2

    from scopefusion.core.fusion.fused_ops import shape_rules
    from scopefusion.core.graph.view import GraphView

    graph_def = _graph([("all", ["x", "s", "b"], ["scale", "shift"]), ("none", ["x"], None)])
    for name in ("all", "none"):
        graph_def.node.append(node_def_pb2.NodeDef(name=f"{name}_relu", op="Relu", input=[name]))
        graph_def.node[-1].attr["T"].type = 1
    view = GraphView(graph_def, same_shape=shape_rules({"ScaledShift": SCALED}))
    index = view.index.index
    assert view.static_shape((index["all_relu"], 0)) == [2]
    assert view.static_shape((index["none_relu"], 0)) == [2]
    assert GraphView(graph_def).static_shape((index["all_relu"], 0)) is None
