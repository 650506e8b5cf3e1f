"""``tf.math.l2_normalize`` -> ``L2Normalize``.

TensorFlow writes ``Square``, ``Sum``, ``Maximum`` and ``Rsqrt`` inside the
``l2_normalize`` scope and names the final ``Mul`` after the scope itself
(``head/l2_normalize``), so the result holds the scope plus that extra node.
"""
from __future__ import annotations

from scopefusion import (
    AttrDef, FusedOpDef, FusionScopesResult, ScopeBasePass, ScopePattern, ScopesResult, TensorArg, fail,
)


def l2_normalize_reference(x, *, axis, epsilon, T):
    import tensorflow as tf

    square_sum = tf.reduce_sum(tf.square(x), axis, keepdims=True)
    return (x * tf.math.rsqrt(tf.maximum(square_sum, tf.cast(epsilon, x.dtype))),)


L2_NORMALIZE = FusedOpDef(
    "L2Normalize",
    inputs=(TensorArg("x", type_attr="T"),),
    outputs=(TensorArg("y", type_attr="T"),),
    attrs=(AttrDef("axis", "list(int)"), AttrDef("epsilon", "float"), AttrDef("T", "type")),
    reference=l2_normalize_reference,
    description="x / sqrt(max(sum(x**2, axis), epsilon))",
)


class ScopeL2NormalizePass(ScopeBasePass):
    """tf.math.l2_normalize scopes -> L2Normalize(x)."""

    general = False

    def define_patterns(self):
        pattern = (
            ScopePattern("L2Normalize")
            .add_scope_feature(suffix="l2_normalize")
            .add_node_op_type_feature("Square", 1)
            .add_node_op_type_feature("Sum", 1)
            .add_node_op_type_feature("Maximum", 1)
            .add_node_op_type_feature("Rsqrt", 1)
        )
        return [[[pattern]]]

    def may_fuse(self, op_types):
        # results are matched scopes only (regrouped below), so the patterns say what the pass
        # needs: a run that leaves it out tries it for hints only on graphs holding those op types
        return self.patterns_may_match(op_types)

    def last_match_scopes_and_ops(self, scope_graph):
        results = []
        for scope in self.matched_scopes(scope_graph):
            # the output Mul carries the scope's own name, outside the scope
            if scope_graph.has_node(scope.name) and scope_graph.op_of(scope.name) == "Mul":
                results.append(ScopesResult([scope], nodes=[scope.name]))
        return results

    def generate_fusion_result(self, scopes, result: FusionScopesResult) -> None:
        scope = scopes[0]
        graph = scope.graph
        square = scope.nodes_by_op("Square")[0].name
        total = scope.nodes_by_op("Sum")[0].name
        maximum = scope.nodes_by_op("Maximum")[0].name
        x = graph.producer(square, 0)
        output = scope.name  # the Mul named like the scope
        if x not in (graph.producer(output, 0), graph.producer(output, 1)):
            fail("the output Mul does not scale the normalised input", output)
        axis = graph.const_value(graph.producer(total, 1)[0])
        epsilon = graph.const_value(graph.producer(maximum, 1)[0])
        if axis is None or epsilon is None or epsilon.size != 1:
            fail("axis or epsilon is not a constant", total, maximum)
        x_slot = 0 if graph.producer(output, 0) == x else 1
        result.set_type("L2Normalize")
        result.set_attr("axis", [int(a) for a in axis.reshape(-1)])
        result.set_attr("epsilon", float(epsilon.reshape(-1)[0]))
        result.set_attr("T", graph.node(square).attr["T"].type)
        result.insert_inputs(scope.suffix_of(square), [0])
        result.insert_inputs(output, [0 if k == x_slot else None for k in range(2)])
        result.insert_outputs(output, [0])
