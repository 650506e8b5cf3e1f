"""RotaryEmbeddingFusionPass: rotary position embedding -> ``RotaryEmbedding(x, cos, sin)``.

``y = x * cos + rotate(x) * sin``, with ``cos`` and ``sin`` as the model computed them (full
width, broadcast over x's other axes), in the two layouts real code writes:

* **rotate-half** (``interleaved = False``): ``rotate(x) = concat(-x2, x1)`` with ``x1, x2``
  the two halves of the last axis: transformers ``TFMistral`` / Llama-style ``rotate_half``
  (``tf.concat([-x[..., d/2:], x[..., :d/2]], -1)``), keras-hub ``RotaryEmbedding`` (Llama,
  Mistral, Gemma: ``split``, then ``reshape(stack((-x2, x1), axis=-2), shape(x))``);
* **interleaved** (``interleaved = True``): ``rotate(x)`` pairs element ``2i`` with ``2i + 1``:
  ``(-x[2i+1], x[2i])``: transformers ``TFGPTJ``'s ``rotate_every_two``
  (``reshape(stack((-x[..., 1::2], x[..., ::2]), axis=-1), shape)``).

The halves may be read by ``StridedSlice`` (any spelling: ellipsis or explicit axes, masks or
bounds, which are resolved against the last dimension) or by a two-way ``Split`` of the last
axis.  ``Add`` and ``Mul`` commute.  What is checked, each refused with the reason when it
fails: the slices select exactly the halves (or the odd and even elements) of the last axis
and take every element of the others, the negated part is the one the layout negates, the stack
and the concat run along the axes of that layout, the reshape gives back x's shape, neither
product broadcasts beyond x's shape, and nothing else reads the rotation's intermediate tensors.
"""
from __future__ import annotations

from typing import Any

from ...core.fusion.refusal import fail
from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.graph.matching import PatternMatch
from ...core.graph.pattern import ANY, OpPattern, const, one_of, op
from ...core.graph.vocabulary import FLOAT_DTYPES, dtype_name
from ...core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass
from .fused_shapes import static_shape
from .rotary_checks import halves_of, slice_indices, split_indices


def rotary_embedding_reference(x: Any, cos: Any, sin: Any, *, interleaved: bool, T: Any) -> tuple[Any]:
    """``x * cos + rotate(x) * sin`` (rotate-half or interleaved rotation of the last axis)."""
    import tensorflow as tf  # deferred: TensorFlow runs a reference only when a graph is verified

    if interleaved:
        rotated = tf.reshape(tf.stack([-x[..., 1::2], x[..., ::2]], axis=-1), tf.shape(x))
    else:
        first, second = tf.split(x, 2, axis=-1)
        rotated = tf.concat([-second, first], axis=-1)
    return (x * cos + rotated * sin,)


ROTARY_EMBEDDING = FusedOpDef(
    name="RotaryEmbedding",
    inputs=(
        TensorArg("x", type_attr="T", description="[..., d], d even: the queries or keys of some heads"),
        TensorArg("cos", type_attr="T", description="cos of the position angles, broadcast to x's shape"),
        TensorArg("sin", type_attr="T", description="sin of the position angles, broadcast to x's shape"),
    ),
    outputs=(TensorArg("y", type_attr="T", description="x's shape"),),
    attrs=(
        AttrDef("interleaved", "bool", default=False,
                description="False: rotate halves (x1, x2) -> (-x2, x1); True: rotate pairs (x[2i], x[2i+1])"),
        AttrDef("T", "type"),
    ),
    same_shape={0: 0},
    reference=rotary_embedding_reference,
    description="Rotary position embedding: y = x * cos + rotate(x) * sin",
)


def _part(which: str) -> Any:
    """One operand of the rotation: a slice of x, or one output of a Split of x."""
    return one_of(op("StridedSlice", "$x", ANY, ANY, ANY, label=f"{which}_slice"),
                  op("Split", ANY, "$x", port=1 if which == "negated" else 0, label=f"{which}_split"))


#: The axes of a ``reduce_prod`` over all of a constant: a constant or ``range(0, rank)``.
_ALL_AXES = one_of(const(), op("Range", const(), one_of(const(), op("Rank", const())), const()))
#: One dimension of the shape the stacked rotation is reshaped to: a constant, a dimension of x's
#: shape, or the product of the last two (GPT-J's ``reduce_prod(shape_list(...)[-2:])``).
_DIMENSION = one_of(const(), op("StridedSlice", op("Shape", "$x"), const(), const(), const()),
                    op("Prod", const(), _ALL_AXES))
#: x's shape, as the reshape back is given it (checked against x's static shape in ``fusion``).
_SHAPE = one_of(const(), op("Shape", "$x"), *(op("Pack", *([_DIMENSION] * n)) for n in range(2, 8)))


def _rotation() -> Any:
    negated, kept = op("Neg", _part("negated"), label="neg"), _part("kept")
    concat = op("ConcatV2", negated, kept, const(), label="concat")
    stacked = op("Reshape", op("Pack", negated, kept, label="pack"), _SHAPE, label="reshape")
    return one_of(concat, stacked)


class RotaryEmbeddingFusionPass(PatternFusionBasePass):
    """x * cos + rotate(x) * sin (rotate-half or interleaved) -> RotaryEmbedding(x, cos, sin)."""

    name = "RotaryEmbeddingFusionPass"
    fusion_type = "GraphFusion"
    description = ("x * cos + rotate(x) * sin, rotate-half (Llama, Mistral, keras-hub) or interleaved (GPT-J) "
                   "-> RotaryEmbedding(x, cos, sin, interleaved)")

    def define_patterns(self) -> list[OpPattern]:
        root = op(("Add", "AddV2"), op("Mul", "$x", "$cos", label="x_cos"),
                  op("Mul", _rotation(), "$sin", label="rot_sin"), label="sum")
        return [OpPattern("RotaryEmbedding", root)]

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        interleaved = _layout(match)
        _check(match)
        dtype = match.node("sum").attr["T"].type
        return FusedOp("RotaryEmbedding", inputs=["x", "cos", "sin"], attrs={"interleaved": interleaved, "T": dtype},
                       description=f"RotaryEmbedding ({'interleaved' if interleaved else 'rotate-half'})")


def _layout(match: PatternMatch) -> bool:
    """Whether the rotation is interleaved (True) or rotate-half (False); refused (:func:`fail`) otherwise."""
    view = match.view
    x_shape = static_shape(view, match.tensor("x"))
    if x_shape is None or not x_shape or x_shape[-1] is None:
        fail(f"cannot tell the last dimension of {match.tensor_name('x')!r}")
    rank, width = len(x_shape), x_shape[-1]
    parts = {}
    for which in ("negated", "kept"):
        if f"{which}_slice" in match.nodes:
            parts[which] = slice_indices(view, match.nodes[f"{which}_slice"], rank, width)
        else:
            parts[which] = split_indices(view, match.nodes[f"{which}_split"], rank, width,
                                         1 if which == "negated" else 0)
    layout = halves_of(parts["negated"], parts["kept"], width)
    if "concat" in match.nodes:
        axis = view.const_value_of(view.forwarded(view.index.data_input(match.nodes["concat"], 2)[0]))
        if axis is None or int(axis) not in (-1, rank - 1):
            fail(f"the concat {match.name('concat')!r} does not join along the last axis")
        if layout != "half":
            fail("a concat of the negated odd and the even elements is no rotation")
        return False
    axis = match.node("pack").attr["axis"].i
    axis = axis + rank + 1 if axis < 0 else axis  # the stack has rank + 1 axes
    wanted = {"half": rank - 1, "pairs": rank}[layout]
    if axis != wanted:
        fail(f"the stack {match.name('pack')!r} runs along axis {axis} of {rank + 1}: "
             f"the {'halves' if layout == 'half' else 'pairs'} then do not interleave as RoPE's do")
    reshaped = static_shape(view, (match.nodes["reshape"], 0))
    if reshaped is None or len(reshaped) != rank or any(a is not None and b is not None and a != b
                                                         for a, b in zip(reshaped, x_shape, strict=True)) \
            or reshaped[-1] != width:
        fail(f"the reshape {match.name('reshape')!r} does not give back the shape {x_shape} of x "
             f"(it gives {reshaped})")
    return layout == "pairs"


def _check(match: PatternMatch) -> None:
    """The products keep x's shape, the dtype is a float, nothing else reads the rotation."""
    view = match.view
    index = view.index
    dtype = match.node("sum").attr["T"].type
    if dtype not in FLOAT_DTYPES:
        fail(f"a rotation of a non-float tensor (T = {dtype_name(dtype)})")
    x_shape = static_shape(view, match.tensor("x"))
    for label in ("x_cos", "rot_sin"):
        shape = static_shape(view, (match.nodes[label], 0))
        if shape is None or shape != x_shape:
            fail(f"the product {match.name(label)!r} has shape {shape}, not x's {x_shape}: "
                 "cos and sin must not broadcast x to more")
    for member in sorted(match.members - {match.root}):
        readers = [index.names[c] for c, port, _ in index.consumers[member] if c not in match.members and port >= 0]
        if readers:
            fail(f"{index.names[member]!r} is also read by {readers[0]!r}; fusing would lose it")
