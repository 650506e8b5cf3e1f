"""``FusedOp.view_shapes``: a match may hold a ``Reshape`` whose shape the graph computes at run
time (from ``Shape`` ops) when its pass has checked that the view changes nothing the fused op
computes; the fused op need not take that shape.  Without it the result is refused (the fused
op would read a tensor it does not take), and a named tensor read as data, not as a shape,
still refuses it."""
from __future__ import annotations

import tensorflow as tf

from scopefusion import AttrDef, FusedOp, FusedOpDef, OpPattern, PatternFusionBasePass, TensorArg, op
from scopefusion.testing import PassTester, graph_from_function

VIEW_RELU = FusedOpDef("ViewRelu", inputs=(TensorArg("x", type_attr="T"),), outputs=(TensorArg("y", type_attr="T"),),
                       attrs=(AttrDef("T", "type"),), reference=lambda x, *, T: (tf.nn.relu(x),))
SPEC = tf.TensorSpec([2, 6], tf.float32, "x")


def relu_through_a_view(x):
    """relu(x) viewed [2, 2, 3] by a shape from ``tf.shape(x)``, and viewed back."""
    shape = tf.shape(x)
    viewed = tf.reshape(x, tf.stack([shape[0], 2, shape[1] // 2]))
    return tf.reshape(tf.nn.relu(viewed), shape)


class ViewReluPass(PatternFusionBasePass):
    """reshape(relu(reshape(x, s1)), s2) -> ViewRelu(x), naming the views' shapes or not."""

    name_shapes = True

    def define_patterns(self):
        inner = op("Reshape", "$x", "$split_shape", label="split")
        return [OpPattern("ViewRelu", op("Reshape", op("Relu", inner, label="relu"), "$merge_shape", label="merge"))]

    def fusion(self, match):
        shapes = frozenset(match.tensor(ref) for ref in ("split_shape", "merge_shape")) if self.name_shapes \
            else frozenset()
        return FusedOp("ViewRelu", inputs=["x"], attrs={"T": 1}, view_shapes=shapes)


class Unnamed(ViewReluPass):
    name_shapes = False


def run(pass_class):
    graph = graph_from_function(relu_through_a_view, SPEC)
    tester = PassTester().with_passes([pass_class], [VIEW_RELU])
    return graph, tester, tester.run(graph)


def test_the_shapes_of_a_checked_view_need_not_be_taken():
    graph, tester, result = run(ViewReluPass)
    assert [n.op for n in result.fused_graph_def.node].count("ViewRelu") == 1
    assert "Relu" not in [n.op for n in result.fused_graph_def.node]
    tester.assert_verified(graph, result)


def test_without_them_the_result_is_refused():
    _, _, result = run(Unnamed)
    (refusal,) = result.report.pass_report("Unnamed").refused
    assert "reads" in refusal.reason and "does not take it as an input" in refusal.reason


def test_a_named_tensor_read_as_data_still_refuses():
    """x named among the views' shapes, the fused op taking another tensor: the split Reshape
    reads x as its data, which the fused op then does not take."""
    class DataRead(ViewReluPass):
        def fusion(self, match):
            answer = super().fusion(match)
            return FusedOp("ViewRelu", inputs=["merge_shape"], attrs={"T": 1},
                           view_shapes=answer.view_shapes | {match.tensor("x")})

    _, _, result = run(DataRead)
    reasons = [r.reason for r in result.report.pass_report("DataRead").refused]
    assert reasons == ["inner node 'Reshape' reads x from outside the result, but the fused op does not take it "
                       "as an input"]
