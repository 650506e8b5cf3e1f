"""Contributes a graph pass (Primer's squared ReLU, ``Square(Relu(x))`` -> ``SquaredRelu``),
its fused op, and a replacement for the built-in GeluFusionPass that fuses only the tanh form."""
from __future__ import annotations

from scopefusion import (AttrDef, FusedOp, FusedOpDef, OpPattern, PatternFusionBasePass, TensorArg, hookimpl,
                         one_of, op)
from scopefusion.builtin_passes.graph.gelu import GeluFusionPass as BuiltinGeluFusionPass

OVERRIDE_DESCRIPTION = "GELU, tanh form only (sf-test-graph)"


def squared_relu_reference(x, *, T):
    import tensorflow as tf

    return (tf.square(tf.nn.relu(x)),)


SQUARED_RELU = FusedOpDef(
    name="SquaredRelu",
    inputs=(TensorArg("x", type_attr="T"),),
    outputs=(TensorArg("y", type_attr="T"),),
    attrs=(AttrDef("T", "type"),),
    reference=squared_relu_reference,
    description="relu(x) ** 2",
)


class SquaredReluFusionPass(PatternFusionBasePass):
    """Square(Relu(x)) or Relu(x) * Relu(x) -> SquaredRelu(x)."""

    description = "squared ReLU -> SquaredRelu (test plugin)"

    def define_patterns(self):
        relu = op("Relu", "$x", label="relu")
        return [OpPattern("SquaredRelu", one_of(op("Square", relu), op("Mul", relu, relu)))]

    def fusion(self, match):
        return FusedOp("SquaredRelu", inputs=["x"], attrs={"T": match.node("relu").attr["T"].type})


class GeluFusionPass(BuiltinGeluFusionPass):
    """The built-in GELU pass, restricted to the tanh form."""

    name = "GeluFusionPass"
    description = OVERRIDE_DESCRIPTION

    def define_patterns(self):
        return [p for p in super().define_patterns() if p.name == "GeluTanh"]


@hookimpl
def scopefusion_graph_passes():
    return [SquaredReluFusionPass, GeluFusionPass]


@hookimpl
def scopefusion_fused_ops():
    return [SQUARED_RELU]
