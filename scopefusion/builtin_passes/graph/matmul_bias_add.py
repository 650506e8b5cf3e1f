"""MatMulBiasAddFusionPass: a matrix product followed by a bias add -> ``MatMulBiasAdd(a, b, bias)``.

The forms real code writes:

* ``tf.matmul(a, w) + b`` (``Add``/``AddV2``, the bias on either side) and
  ``tf.nn.bias_add(tf.matmul(a, w), b)``, ``transpose_a``/``transpose_b`` kept;
* tf_slim ``fully_connected`` and Keras ``Dense`` on rank-2 input (MatMul + BiasAdd);
* Keras ``Dense`` on rank-3 input, through ``Tensordot``: Reshape -> MatMul -> Reshape
  -> BiasAdd.  The bias add moves before the second Reshape (the bias lies along the
  last axis, which the Reshape keeps), so the match becomes ``MatMulBiasAdd`` followed by
  that Reshape;
* ``BatchMatMulV2`` (a rank-3 ``tf.matmul``, ``adj_x``/``adj_y``) plus a bias.

The bias must be as long as the product's last dimension and lie along it: 1-D, or with
unit axes before it (``[1, n]``: transformers ``TFConv1D`` in GPT-2, ``[1, 1, n]``), of no
higher rank than the sum (a ``[1, n]`` bias added to a 1-D product would add an axis).  A
bias with unit axes is passed through a ``Squeeze`` of them, so ``MatMulBiasAdd`` always
takes a ``[n]`` bias.  A length-1 bias broadcast over n columns, a bias along another axis
(``[n, 1]``) or a sum of two products is not a bias add.  A product also read elsewhere is
refused: fusing would lose it.
"""
from __future__ import annotations

from typing import Any

from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.fusion.refusal import fail
from ...core.fusion.candidate import InnerInput
from ...core.graph.matching import PatternMatch
from ...core.graph.pattern import OpPattern, op
from ...core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass, fused_input, inner_node
from .naming import common_scope
from ...core.graph.vocabulary import ADD_OPS as ADDS


def matmul_bias_add_reference(a: Any, b: Any, bias: Any, *, transpose_a: bool, transpose_b: bool,
                              T: Any) -> tuple[Any]:
    """``matmul(a, b) + bias``: a batched product when a or b has more than two dimensions."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    return (tf.nn.bias_add(tf.linalg.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b), bias),)


MATMUL_BIAS_ADD = FusedOpDef(
    name="MatMulBiasAdd",
    inputs=(
        TensorArg("a", type_attr="T", description="[..., M, K] (or [..., K, M] with transpose_a)"),
        TensorArg("b", type_attr="T", description="[..., K, N] (or [..., N, K] with transpose_b)"),
        TensorArg("bias", type_attr="T", description="[N]"),
    ),
    outputs=(TensorArg("y", type_attr="T", description="[..., M, N]"),),
    attrs=(
        AttrDef("transpose_a", "bool", default=False),
        AttrDef("transpose_b", "bool", default=False),
        AttrDef("T", "type"),
    ),
    reference=matmul_bias_add_reference,
    description="Matrix product (batched over leading dimensions) plus a bias along the last axis",
)

MATMULS = ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
_TRANSPOSE_ATTRS = {"MatMul": ("transpose_a", "transpose_b")}


def _product() -> Any:
    return op(MATMULS, "$a", "$b", label="matmul")


class MatMulBiasAddFusionPass(PatternFusionBasePass):
    """MatMul or BatchMatMulV2 followed by a 1-D bias add (BiasAdd, Add) -> MatMulBiasAdd."""

    name = "MatMulBiasAddFusionPass"
    fusion_type = "GraphFusion"
    description = "MatMul/BatchMatMulV2 + BiasAdd/Add of a 1-D bias (also through Tensordot) -> MatMulBiasAdd"

    def define_patterns(self) -> list[OpPattern]:
        reshaped = op("Reshape", _product(), "$shape", label="reshape")
        return [
            OpPattern("MatMulBiasAdd", op("BiasAdd", _product(), "$bias", label="add")),
            OpPattern("MatMulAddBias", op(ADDS, _product(), "$bias", label="add")),
            OpPattern("TensordotBiasAdd", op("BiasAdd", reshaped, "$bias", label="add")),
            OpPattern("TensordotAddBias", op(ADDS, reshaped, "$bias", label="add")),
        ]

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        matmul = match.node("matmul")
        reshaped = "reshape" in match.nodes
        for label in ("matmul", "reshape") if reshaped else ("matmul",):
            readers = self.outside_readers(match, label)
            if readers:
                fail(f"the {'product' if label == 'matmul' else 'reshaped product'} "
                     f"{match.name(label)!r} is also read by {readers[0]!r}; fusing would lose it",
                     match.name(label), readers[0])
        problem = _bias_problem(match, reshaped)
        if problem:
            fail(problem)
        ta_key, tb_key = _TRANSPOSE_ATTRS.get(matmul.op, ("adj_x", "adj_y"))
        attrs = {
            "transpose_a": bool(matmul.attr[ta_key].b) if ta_key in matmul.attr else False,
            "transpose_b": bool(matmul.attr[tb_key].b) if tb_key in matmul.attr else False,
            "T": matmul.attr["T"].type,
        }
        unit_axes = _unit_axes(match)
        if not reshaped and not unit_axes:
            return FusedOp("MatMulBiasAdd", inputs=["a", "b", "bias"], attrs=attrs, description=matmul.op + " + bias")
        # The fused product takes over the MatMul's name and the Reshape (or, without one, the
        # product itself) the bias add's, so whatever read the bias add reads a node of the same name.
        prefix, (product, output) = common_scope(match.name("matmul"), match.name("add"),
                                                 ("MatMulBiasAdd", "Reshape" if reshaped else "MatMulBiasAdd"))
        if not reshaped:
            product = output
        bias: InnerInput = fused_input(2)
        nodes = []
        if unit_axes:
            bias = f"{output}_bias"
            nodes.append(inner_node(bias, "Squeeze", [fused_input(2)], {"T": attrs["T"], "squeeze_dims": unit_axes}))
        nodes.append(inner_node(product, "MatMulBiasAdd", [fused_input(0), fused_input(1), bias], attrs))
        squeezed = f" of a {len(unit_axes) + 1}-D bias" if unit_axes else ""
        if not reshaped:
            return FusedOp("MatMulBiasAdd", inputs=["a", "b", "bias"], name=prefix, inner_nodes=nodes,
                           inner_outputs={0: product}, description=f"{matmul.op} + bias{squeezed}")
        reshape = match.node("reshape")
        nodes.append(inner_node(output, "Reshape", [product, fused_input(3)],
                                {"T": reshape.attr["T"], "Tshape": reshape.attr["Tshape"]}))
        return FusedOp("MatMulBiasAdd", inputs=["a", "b", "bias", "shape"], name=prefix, inner_nodes=nodes,
                       inner_outputs={0: output}, description=f"Tensordot: MatMul + bias{squeezed}, then the Reshape")


def _bias_problem(match: PatternMatch, reshaped: bool) -> str | None:
    """Why the added tensor is not a bias along the product's last axis (None when it is)."""
    view = match.view
    add = match.node("add")
    if add.op == "BiasAdd":
        fmt = add.attr["data_format"].s.decode() if "data_format" in add.attr else "NHWC"
        if fmt == "NCHW" and _rank(match, "matmul") != 2 and not reshaped:
            return "BiasAdd with data_format NCHW adds along axis 1, not the last axis"
        return None  # TensorFlow checks that a BiasAdd's bias is 1-D and as long as the channel axis
    bias_shape = view.static_shape(match.tensor("bias"))
    if bias_shape is None:
        return f"cannot tell the rank of the added tensor {match.tensor_name('bias')!r}"
    if len(bias_shape) != 1 and (not bias_shape or any(d != 1 for d in bias_shape[:-1])):
        return (f"the added tensor {match.tensor_name('bias')!r} has shape {bias_shape}, not a bias along the "
                "last axis (1-D, or unit axes before it)")
    if len(bias_shape) > 1:
        rank = _rank(match, "reshape" if reshaped else "matmul")
        if rank is None:
            return f"cannot tell the rank of the product, to check that the {bias_shape} bias adds no axis to it"
        if len(bias_shape) > rank:
            return (f"the bias of shape {bias_shape} has more axes than the rank-{rank} product: the add "
                    "broadcasts to a higher rank, it is no bias add")
    columns = _columns(match)
    if columns is None:
        return "cannot tell the product's last dimension, to check the bias length against it"
    if bias_shape[-1] is None:
        return f"cannot tell the length of the bias {match.tensor_name('bias')!r}"
    if bias_shape[-1] != columns:
        return (f"the bias has {bias_shape[-1]} element(s) but the product has {columns} columns: "
                "the add broadcasts, it is no bias add")
    return None


def _unit_axes(match: PatternMatch) -> list[int]:
    """The unit axes before a bias of rank 2 or more (added, not BiasAdd), which a Squeeze removes."""
    if match.node("add").op == "BiasAdd":
        return []
    bias_shape = match.view.static_shape(match.tensor("bias")) or []
    return list(range(len(bias_shape) - 1))


def _columns(match: PatternMatch) -> int | None:
    """The product's last dimension, from the shape of ``b``."""
    matmul = match.node("matmul")
    b_shape = match.view.static_shape(match.tensor("b"))
    if b_shape is None or len(b_shape) < 2:
        return None  # the caller says it cannot tell
    key = _TRANSPOSE_ATTRS.get(matmul.op, ("adj_x", "adj_y"))[1]
    transposed = key in matmul.attr and matmul.attr[key].b
    return b_shape[-2] if transposed else b_shape[-1]


def _rank(match: PatternMatch, label: str) -> int | None:
    index = match.view.index
    return match.view.rank(index.names[match.nodes[label]])

