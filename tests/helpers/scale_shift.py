"""A small test pass over real TF graphs: ``blk`` scopes computing
``x * scale + shift`` -> ``ScaleShift(x)``."""
from __future__ import annotations

from scopefusion import (
    AttrDef, FusedOpDef, FusionScopesResult, ScopeBasePass, ScopePattern, ScopesResult, TensorArg,
)


def scale_shift_reference(x, *, scale, shift, T):
    return (x * scale + shift,)


SCALE_SHIFT = FusedOpDef(
    "ScaleShift",
    inputs=(TensorArg("x", type_attr="T"),),
    outputs=(TensorArg("y", type_attr="T"),),
    attrs=(AttrDef("scale", "float"), AttrDef("shift", "float"), AttrDef("T", "type")),
    reference=scale_shift_reference,
)


class ScaleShiftPass(ScopeBasePass):
    """blk scopes: x * scale + shift."""

    name = "ScaleShiftPass"
    general = True
    suffix = "blk"

    def define_patterns(self):
        return [[[ScopePattern("ScaleShift").add_scope_feature(suffix=self.suffix)
                  .add_node_op_type_feature("Mul", 1).add_node_op_type_feature("AddV2", 1)]]]

    def generate_fusion_result(self, scopes, result: FusionScopesResult) -> None:
        scope = scopes[0]
        sg = scope.graph
        mul = scope.nodes_by_op("Mul")[0].name
        add = scope.nodes_by_op("AddV2")[0].name
        scale = sg.const_value(sg.producer(mul, 1)[0])
        shift = sg.const_value(sg.producer(add, 1)[0])
        if scale is None or shift is None:
            result.reject("scale or shift is not constant")
            return
        result.set_type("ScaleShift")
        result.set_attr("scale", float(scale))
        result.set_attr("shift", float(shift))
        result.set_attr("T", sg.node(mul).attr["T"].type)
        result.insert_inputs(scope.suffix_of(mul), [0, None])
        result.insert_outputs(scope.suffix_of(add), [0])


class WholeModelPass(ScaleShiftPass):
    """Matches the outer ``model`` scope (which contains blk scopes) as one ScaleShift."""

    name = "WholeModelPass"
    general = False
    suffix = "model"

    def define_patterns(self):
        return [[[ScopePattern("Whole").add_scope_feature(suffix="model")]]]

    def generate_fusion_result(self, scopes, result):
        scope = scopes[0]
        sg = scope.graph
        first = scope.graph.scope(scope.name + "/blk").nodes_by_op("Mul")[0].name
        adds = scope.nodes_by_op("AddV2")
        result.set_type("ScaleShift")
        result.set_attr("scale", 4.0)
        result.set_attr("shift", 5.0)
        result.set_attr("T", sg.node(first).attr["T"].type)
        result.insert_inputs(scope.suffix_of(first), [0, None])
        result.insert_outputs(scope.suffix_of(adds[-1].name), [0])


class BrokenPass(ScaleShiftPass):
    name = "BrokenPass"
    general = True

    def generate_fusion_result(self, scopes, result):
        raise RuntimeError("boom")


class TwoScopesPass(ScaleShiftPass):
    """Groups every matched blk scope into one result (custom grouping); port
    maps use full node names, which are never ambiguous."""

    name = "TwoScopesPass"
    general = False

    def last_match_scopes_and_ops(self, scope_graph):
        scopes = self.matched_scopes(scope_graph)
        return [ScopesResult(scopes)] if scopes else []

    def generate_fusion_result(self, scopes, result):
        sg = scopes[0].graph
        scale, shift = 1.0, 0.0
        for scope in scopes:
            mul = scope.nodes_by_op("Mul")[0].name
            add = scope.nodes_by_op("AddV2")[0].name
            s = float(sg.const_value(sg.producer(mul, 1)[0]))
            scale, shift = scale * s, shift * s + float(sg.const_value(sg.producer(add, 1)[0]))
        first_mul = scopes[0].nodes_by_op("Mul")[0].name
        result.set_type("ScaleShift")
        result.set_attr("scale", scale)
        result.set_attr("shift", shift)
        result.set_attr("T", sg.node(first_mul).attr["T"].type)
        result.insert_inputs(first_mul, [0, None])
        result.insert_outputs(scopes[-1].nodes_by_op("AddV2")[0].name, [0])


def pair_reference(a, b, *, T):
    return (b + 1.0, a * 3.0)


PAIR = FusedOpDef(
    "Pair",
    inputs=(TensorArg("a", type_attr="T"), TensorArg("b", type_attr="T")),
    outputs=(TensorArg("y", type_attr="T"), TensorArg("m", type_attr="T")),
    attrs=(AttrDef("T", "type"),),
    reference=pair_reference,
)


class PairPass(ScaleShiftPass):
    """Maps every edge of a blk scope whose Mul and Add are separate steps."""

    name = "PairPass"

    def generate_fusion_result(self, scopes, result):
        scope = scopes[0]
        mul = scope.nodes_by_op("Mul")[0].name
        add = scope.nodes_by_op("AddV2")[0].name
        result.set_type("Pair")
        result.set_attr("T", scope.graph.node(mul).attr["T"].type)
        result.insert_inputs(scope.suffix_of(mul), [0, None])
        result.insert_inputs(scope.suffix_of(add), [1, None])
        result.insert_outputs(scope.suffix_of(add), [0])
        result.insert_outputs(scope.suffix_of(mul), [1])


def build_graph(kind: str = "plain"):
    """Real TF graphs (tf.compat.v1) around ``blk`` scopes."""
    import numpy as np
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [2, 3], name="x")
        if kind == "plain":
            with tf.name_scope("model"):
                with tf.name_scope("blk"):
                    y = x * 2.0 + 1.0
                with tf.name_scope("blk"):
                    z = y * 2.0 + 3.0
            out = tf.nn.relu(z, name="out")
        elif kind == "leak":  # the Mul inside feeds a node outside the scope
            with tf.name_scope("blk"):
                m = x * 3.0
                y = m + 1.0
            out = tf.add(tf.nn.relu(y), m, name="out")
        elif kind == "nonconvex":  # blk/mul -> outside -> blk/add
            with tf.name_scope("blk"):
                m = x * 3.0
            r = tf.nn.relu(m, name="outside")
            with tf.name_scope("blk/"):
                y = r + 1.0
            out = tf.identity(y, name="out")
        elif kind == "crossed":  # each blk convex, but they feed each other
            with tf.name_scope("blk"):
                a_mul = x * 3.0
            with tf.name_scope("blk_1"):
                b_mul = x * 3.0
            with tf.name_scope("blk/"):
                a_add = b_mul + 1.0
            with tf.name_scope("blk_1/"):
                b_add = a_mul + 1.0
            out = tf.add(a_add, b_add, name="out")
        elif kind == "near":  # a blk scope that subtracts instead of adding
            with tf.name_scope("blk"):
                y = x * 2.0 - 1.0
            out = tf.identity(y, name="out")
        elif kind == "shared_const":  # blk/mul/y is also read outside, so it stays
            with tf.name_scope("blk"):
                y = x * 2.0 + 1.0
            out = tf.add(y, graph.get_tensor_by_name("blk/mul/y:0"), name="out")
        elif kind == "tail":  # the graph output itself lies inside the scope
            with tf.name_scope("blk"):
                out = x * 5.0 + 2.0
        else:
            raise ValueError(kind)
    feeds = {"x:0": np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5}
    return graph.as_graph_def(), feeds, [out.name]


class InnerGraphPass(ScaleShiftPass):
    """The "scope to multi nodes" form: the blk scope becomes Const, Mul,
    Const and AddV2 nodes of an inner graph instead of one fused op."""

    name = "InnerGraphPass"

    def generate_fusion_result(self, scopes, result):
        from tensorflow.core.framework.attr_value_pb2 import AttrValue

        scope = scopes[0]
        sg = scope.graph
        mul = scope.nodes_by_op("Mul")[0].name
        add = scope.nodes_by_op("AddV2")[0].name
        dtype = sg.node(mul).attr["T"].type
        scale_const = sg.node(sg.resolve_forwarding(sg.producer(mul, 1)[0]))
        shift_const = sg.node(sg.resolve_forwarding(sg.producer(add, 1)[0]))
        result.set_type("ScaleShiftGraph")
        result.insert_inputs(scope.suffix_of(mul), [0, None])
        result.insert_outputs(scope.suffix_of(add), [0])
        result.add_inner_node("scale", "Const", [],
                              {"value": scale_const.attr["value"], "dtype": AttrValue(type=dtype)})
        result.add_inner_node("shift", "Const", [],
                              {"value": shift_const.attr["value"], "dtype": AttrValue(type=dtype)})
        result.add_inner_node("scaled", "Mul", [result.fused_input(0), "scale"], {"T": AttrValue(type=dtype)})
        result.add_inner_node("shifted", "AddV2", ["scaled", "shift"], {"T": AttrValue(type=dtype)})
        result.set_inner_output(0, "shifted:0")
