"""The activations an epilogue fusion takes into the op before it, and how they are computed.

An activation is named on the fused op by the type of the node it replaces (``Relu``,
``LeakyRelu``, ``Gelu``, ...); the one parameter some of them have travels as its own
attribute: ``alpha`` (LeakyRelu's negative slope), ``approximate`` (Gelu's tanh form)
and ``beta`` (Swish's scale).  ``Gelu`` and ``Swish`` are the fused ops of the graph
fusion stage, which runs before the epilogue stage.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....core.fusion.fused_ops import AttrDef
from ..gelu import gelu_reference
from ..swish import swish_reference

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.node_def_pb2 import NodeDef

#: Activation op types, in the order the patterns list them.
ACTIVATIONS = ("Relu", "Relu6", "Elu", "LeakyRelu", "Sigmoid", "Tanh", "Gelu", "Swish")

#: The attributes every epilogue op carries: the activation and its parameters (a parameter
#: the activation has no use for keeps its default).
ACTIVATION_ATTRS = (
    AttrDef("activation", "string", description=f"the activation: one of {', '.join(ACTIVATIONS)}"),
    AttrDef("alpha", "float", default=0.2, description="LeakyRelu: the slope for negative inputs"),
    AttrDef("approximate", "bool", default=False, description="Gelu: the tanh approximation"),
    AttrDef("beta", "float", default=1.0, description="Swish: x * sigmoid(beta * x)"),
)


def activation_attrs(node: "NodeDef") -> dict[str, Any]:
    """The fused op's activation attributes for the activation node ``node``."""
    attrs: dict[str, Any] = {"activation": node.op}
    if node.op == "LeakyRelu" and "alpha" in node.attr:
        attrs["alpha"] = float(node.attr["alpha"].f)
    elif node.op == "Gelu" and "approximate" in node.attr:
        attrs["approximate"] = bool(node.attr["approximate"].b)
    elif node.op == "Swish" and "beta" in node.attr:
        attrs["beta"] = float(node.attr["beta"].f)
    return attrs


def apply_activation(y: Any, activation: str, *, alpha: float, approximate: bool, beta: float) -> Any:
    """``activation`` of the tensor ``y``, in TensorFlow ops (for reference implementations)."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    if activation == "Relu":
        return tf.nn.relu(y)
    if activation == "Relu6":
        return tf.nn.relu6(y)
    if activation == "Elu":
        return tf.nn.elu(y)
    if activation == "LeakyRelu":
        return tf.nn.leaky_relu(y, alpha=alpha)
    if activation == "Sigmoid":
        return tf.sigmoid(y)
    if activation == "Tanh":
        return tf.tanh(y)
    if activation == "Gelu":
        return gelu_reference(y, approximate=approximate, T=y.dtype)[0]
    if activation == "Swish":
        return swish_reference(y, beta=beta, T=y.dtype)[0]
    raise ValueError(f"unknown activation {activation!r}; known: {', '.join(ACTIVATIONS)}")
