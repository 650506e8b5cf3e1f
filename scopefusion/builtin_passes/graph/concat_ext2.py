"""ZConcatExt2FusionPass: ``ConcatV2`` with a constant axis -> ``ConcatV2D``, the axis an attribute.

TensorFlow's ``ConcatV2`` takes its axis as a last input tensor; a back end that compiles the
graph wants it as a number it knows before running.  The reference system's pass of this name
turns each ``ConcatV2`` whose axis is a constant into its ``ConcatV2D``, the axis as attribute
``concat_dim``, and splits one with more inputs than its kernel takes into a tree of them
(``concat_pass_util.cc`` ``SplitConcatNode``): 63 inputs when every input's shape is known, 48
otherwise.  A concat of more than 63 * 63 inputs becomes a deeper tree.  (The reference's third
limit, 21 for dynamic shapes on one device, belongs to that device.)

The pass is **off by default**: the conversion changes nothing but the spelling of every concat,
and passes of the later stage (attention) read ``ConcatV2`` nodes; a switch file turns it on
(``"ZConcatExt2FusionPass": "on"``, or ``"ALL": "on"``), as the reference system's own switch
file examples do.  It runs in the graph fusion stage, and loses to any other match there that
contains the concat (``ConcatFlattenFusionPass`` flattens nested concats first; a chain loses one
level per run).

Refused with the reason: an axis that is not a constant (nothing to make an attribute of).
"""
from __future__ import annotations

from typing import Any

from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.fusion.refusal import fail
from ...core.graph.matching import PatternMatch
from ...core.graph.pattern import OpPattern, op
from ...core.graph.vocabulary import CONTROL
from ...core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass, fused_input, inner_node
from ...core.fusion.candidate import InnerInput, InnerNode
from .fused_shapes import static_shape

#: The most inputs one ConcatV2D takes: with every input's shape known, and otherwise.
MAX_INPUTS_STATIC = 63
MAX_INPUTS_DYNAMIC = 48

CONCAT = OpPattern("ConcatV2", op("ConcatV2", any_inputs=True, label="concat"))


def concat_v2d_reference(values: list[Any], *, N: int, concat_dim: int, T: Any) -> tuple[Any]:
    """``tf.concat(values, concat_dim)``."""
    import tensorflow as tf  # deferred: TensorFlow runs a reference only when a graph is verified

    return (tf.concat(values, concat_dim),)


CONCAT_V2D = FusedOpDef(
    name="ConcatV2D",
    inputs=(TensorArg("x", type_attr="T", number_attr="N", description="the N tensors joined, in order"),),
    outputs=(TensorArg("y", type_attr="T"),),
    attrs=(
        AttrDef("N", "int", description="how many tensors are joined"),
        AttrDef("concat_dim", "int", description="the axis they are joined along (negative: from the end)"),
        AttrDef("T", "type"),
    ),
    reference=concat_v2d_reference,
    description="Concatenation along an axis given as an attribute (ConcatV2 with a constant axis)",
)


class ZConcatExt2FusionPass(PatternFusionBasePass):
    """ConcatV2 with a constant axis -> ConcatV2D (axis as attribute), a tree past 63 (48) inputs."""

    name = "ZConcatExt2FusionPass"
    fusion_type = "GraphFusion"
    default_on = False
    description = ("ConcatV2 with a constant axis -> ConcatV2D, the axis an attribute, split into a tree past "
                   f"{MAX_INPUTS_STATIC} inputs ({MAX_INPUTS_DYNAMIC} with unknown shapes); off by default")

    def define_patterns(self) -> list[OpPattern]:
        return [CONCAT]

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        index = match.view.index
        root = match.root
        *values, axis = [t for t in index.inputs[root] if t[1] != CONTROL]
        chain = match.view.constant_chain(axis[0])
        value = match.view.const_value_of(axis[0]) if chain is not None else None
        if chain is None or value is None or value.size != 1:
            fail(f"the axis {index.names[axis[0]]!r} of {match.root_name!r} is not a constant: ConcatV2D takes "
                 "its axis as an attribute")
        for k, tensor in enumerate(values):  # named for the fused op: the concat's inputs, in order
            match.tensors[f"value{k}"] = tensor
        dtype = match.node("concat").attr["T"].type
        static = all(_known(match, t) for t in values)
        limit = MAX_INPUTS_STATIC if static else MAX_INPUTS_DYNAMIC
        alone = all(len(index.consumers[c]) == 1 for c in chain)  # the axis, read by this concat alone, goes
        absorbed = frozenset(chain) if alone else frozenset()
        inputs = [f"value{k}" for k in range(len(values))]
        attrs = {"N": len(values), "concat_dim": int(value.reshape(-1)[0]), "T": dtype}
        if len(values) <= limit:
            return FusedOp("ConcatV2D", inputs=inputs, attrs=attrs, absorbed=absorbed,
                           description=f"ConcatV2D of {len(values)} tensors along axis {attrs['concat_dim']}")
        prefix, _, last = match.root_name.rpartition("/")
        nodes, output = _tree(last, [fused_input(k) for k in range(len(values))], attrs, limit)
        return FusedOp("ConcatV2D", inputs=inputs, name=prefix or None, inner_nodes=nodes, inner_outputs={0: output},
                       absorbed=absorbed, description=f"a tree of {len(nodes)} ConcatV2D joining {len(values)} "
                       f"tensors along axis {attrs['concat_dim']}, at most {limit} per node")


def _known(match: PatternMatch, tensor: tuple[int, int]) -> bool:
    shape = static_shape(match.view, tensor)
    return shape is not None and None not in shape


def _tree(name: str, sources: list[InnerInput], attrs: dict[str, Any], limit: int) -> tuple[list[InnerNode], str]:
    """ConcatV2D nodes joining ``sources`` in order, at most ``limit`` inputs each: consecutive runs of
    ``limit`` joined first, then their results, until one node remains (named ``name``)."""
    nodes: list[InnerNode] = []
    level = 0
    while len(sources) > limit:
        joined: list[InnerInput] = []
        for k in range(0, len(sources), limit):
            run = sources[k:k + limit]
            if len(run) == 1:  # a lone leftover goes up as it is
                joined.append(run[0])
                continue
            part = f"{name}_part{level}_{k // limit}"
            nodes.append(inner_node(part, "ConcatV2D", run, {**attrs, "N": len(run)}))
            joined.append(part)
        sources, level = joined, level + 1
    nodes.append(inner_node(name, "ConcatV2D", sources, {**attrs, "N": len(sources)}))
    return nodes, name
