"""EpilogueFusionPass: a product or convolution with its bias, then one activation -> one fused op.

It runs in the ``UBFusion`` stage, after graph fusion made ``MatMulBiasAdd``, ``Gelu``
and ``Swish`` out of the ops real code writes.  The forms (``act`` one of
:data:`~.activations.ACTIVATIONS`):

* ``act(MatMulBiasAdd(a, b, bias))``: Keras 3 and tf_keras ``Dense(activation=...)`` on
  rank-2 input, tf_slim ``fully_connected(activation_fn=...)``
  -> ``MatMulBiasAddActivation(a, b, bias)``;
* ``act(Reshape(MatMulBiasAdd(a, b, bias), shape))``: ``Dense`` on rank-3 input (through
  Tensordot); the activation, element by element, moves before the Reshape
  -> ``MatMulBiasAddActivation`` then that Reshape;
* ``act(BiasAdd(Conv2D(x, filter), bias))``: Keras 3 and tf_keras ``Conv2D(activation=...)``,
  tf_slim ``conv2d(activation_fn=...)`` -> ``Conv2DBiasAddActivation(x, filter, bias)`` with the
  Conv2D's attributes;
* a ``Conv2D`` or ``DepthwiseConv2dNative`` and its bias with no activation the pass takes
  after it -> ``Conv2DBiasAdd`` / ``DepthwiseConv2dNativeBiasAdd`` (see :mod:`..conv_bias_add`).

The activation's parameter is kept (LeakyRelu's ``alpha``, Gelu's ``approximate``, Swish's
``beta``).  A product, convolution or pre-activation that something else reads too is
refused (fusing would lose it), and so is a BiasAdd whose data format differs from the
convolution's (it would add the bias along another axis).
"""
from __future__ import annotations

from ....core.fusion.refusal import fail
from ....core.graph.matching import PatternMatch
from ....core.graph.pattern import Op, OpPattern, op
from ....core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass, fused_input, inner_node
from ..conv_bias_add import CONV_ATTRS, conv_bias_fusion, conv_bias_patterns
from ..naming import common_scope
from .activations import ACTIVATIONS, activation_attrs
from .ops import MATMUL_BIAS_ADD_ACTIVATION

#: The Conv2D attributes the fused convolution carries, as they are.


def _product() -> Op:
    return op("MatMulBiasAdd", "$a", "$b", "$bias", label="product")


class EpilogueFusionPass(PatternFusionBasePass):
    """MatMulBiasAdd or Conv2D + BiasAdd followed by one activation -> one op with the activation."""

    name = "EpilogueFusionPass"
    fusion_type = "UBFusion"
    description = ("MatMulBiasAdd or Conv2D + BiasAdd, then Relu/Relu6/Elu/LeakyRelu/Sigmoid/Tanh/Gelu/Swish "
                   "-> MatMulBiasAddActivation / Conv2DBiasAddActivation; a convolution + bias with no "
                   "activation -> Conv2DBiasAdd / DepthwiseConv2dNativeBiasAdd")

    def define_patterns(self) -> list[OpPattern]:
        conv = op("BiasAdd", op("Conv2D", "$x", "$filter", label="conv"), "$bias", label="bias_add")
        return [
            OpPattern("MatMulBiasAddActivation", op(ACTIVATIONS, _product(), label="act")),
            OpPattern("TensordotActivation", op(ACTIVATIONS, op("Reshape", _product(), "$shape", label="reshape"),
                                                label="act")),
            OpPattern("Conv2DBiasAddActivation", op(ACTIVATIONS, conv, label="act")),
            *conv_bias_patterns(),  # no activation after it: inside the match above when there is one
        ]

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        if "act" not in match.nodes:
            return conv_bias_fusion(match, self.outside_readers)
        for label, what in (("product", "pre-activation"), ("reshape", "reshaped pre-activation"),
                            ("conv", "convolution"), ("bias_add", "pre-activation")):
            readers = self.outside_readers(match, label) if label in match.nodes else []
            if readers:
                fail(f"the {what} {match.name(label)!r} is also read by {readers[0]!r}; "
                     "fusing would lose it", match.name(label), readers[0])
        act = match.node("act")
        if "conv" in match.nodes:
            return self._conv(match, activation_attrs(act))
        product = match.node("product")
        attrs = {
            "transpose_a": bool(product.attr["transpose_a"].b) if "transpose_a" in product.attr else False,
            "transpose_b": bool(product.attr["transpose_b"].b) if "transpose_b" in product.attr else False,
            **activation_attrs(act),
            "T": product.attr["T"].type,
        }
        description = f"MatMulBiasAdd + {act.op}"
        if "reshape" not in match.nodes:
            return FusedOp("MatMulBiasAddActivation", inputs=["a", "b", "bias"], attrs=attrs, description=description)
        return _reshaped(match, attrs, description)

    def _conv(self, match: PatternMatch, activation: dict[str, object]) -> FusionAnswer:
        conv, bias_add = match.node("conv"), match.node("bias_add")
        conv_format = conv.attr["data_format"].s.decode() if "data_format" in conv.attr else "NHWC"
        bias_format = bias_add.attr["data_format"].s.decode() if "data_format" in bias_add.attr else "NHWC"
        if conv_format != bias_format:
            fail(f"the BiasAdd {match.name('bias_add')!r} adds in data format {bias_format} to a "
                 f"{conv_format} convolution: the bias lies along another axis than the channels")
        attrs: dict[str, object] = {key: conv.attr[key] for key in CONV_ATTRS if key in conv.attr}
        attrs.update(activation)
        attrs["T"] = conv.attr["T"].type
        return FusedOp("Conv2DBiasAddActivation", inputs=["x", "filter", "bias"], attrs=attrs,
                       description=f"Conv2D + BiasAdd + {match.node('act').op}")


def _reshaped(match: PatternMatch, attrs: dict[str, object], description: str) -> FusedOp:
    """The Tensordot form: the fused product takes the MatMulBiasAdd's name and the Reshape
    the activation's, so whatever read the activation reads a node of the same name."""
    reshape = match.node("reshape")
    prefix, (product, output) = common_scope(match.name("product"), match.name("act"),
                                             ("MatMulBiasAddActivation", "Reshape"))
    nodes = [
        inner_node(product, "MatMulBiasAddActivation", [fused_input(0), fused_input(1), fused_input(2)],
                   MATMUL_BIAS_ADD_ACTIVATION.with_defaults(attrs)),
        inner_node(output, "Reshape", [product, fused_input(3)],
                   {"T": reshape.attr["T"], "Tshape": reshape.attr["Tshape"]}),
    ]
    return FusedOp("MatMulBiasAddActivation", inputs=["a", "b", "bias", "shape"], name=prefix, inner_nodes=nodes,
                   inner_outputs={0: output}, description=description + ", then the Reshape")
