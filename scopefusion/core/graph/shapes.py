"""Static rank inference over a GraphDef, without TensorFlow.

Passes need to know, for example, whether the axes a ``Mean`` reduces are the
trailing axes of its input.  Ranks are read from ``_output_shapes`` when the
graph carries them, from Placeholder and Const shapes, and propagated through
the common ops whose output rank follows from their inputs'.  Anything else is
reported as unknown (``None``), never guessed.
"""
from __future__ import annotations

from typing import Callable, Mapping, Optional

from .index import GraphIndex
from .vocabulary import CONTROL, parse_input

Rank = Optional[int]

#: Pseudo port: "the length of this 1-D tensor" rather than its rank.
LENGTH = -2

_SAME_AS_FIRST = frozenset("""
Identity Snapshot StopGradient PreventGradient CheckNumerics Cast Neg Abs Sign Exp Expm1 Log Log1p
Sqrt Rsqrt Square Reciprocal Inv Erf Erfc Tanh Sigmoid Relu Relu6 Elu Selu Softplus Softsign
LeakyRelu Gelu Softmax LogSoftmax Floor Ceil Round Rint Sin Cos IsNan IsFinite LogicalNot
BiasAdd BiasAddV1 Transpose Tile ZerosLike OnesLike FakeQuantWithMinMaxVars Mirror MirrorPad Pad
PadV2 Reverse ReverseV2 Roll ClipByValue Cumsum Cumprod TopKV2 LRN Dropout FusedBatchNorm
FusedBatchNormV2 FusedBatchNormV3 Slice StridedSliceGrad L2Loss EnsureShape
""".split())

_BROADCAST = frozenset("""
Add AddV2 Sub Mul Div RealDiv FloorDiv FloorMod TruncateDiv Maximum Minimum Pow SquaredDifference
Less LessEqual Greater GreaterEqual Equal NotEqual LogicalAnd LogicalOr DivNoNan MulNoNan Atan2
BatchMatMul BatchMatMulV2 BatchMatMulV3 SelectV2 AddN
""".split())

_REDUCTIONS = frozenset({"Mean", "Sum", "Max", "Min", "Prod", "All", "Any", "EuclideanNorm"})

_RANK4 = frozenset({
    "Conv2D", "DepthwiseConv2dNative", "MaxPool", "AvgPool", "Conv2DBackpropInput",
    "ResizeBilinear", "ResizeNearestNeighbor", "FusedResizeAndPadConv2D", "CropAndResize",
})


class RankInference:
    """Memoised rank lookups for the tensors of one indexed graph."""

    def __init__(self, index: GraphIndex, same_shape: Mapping[str, Mapping[int, int]] | None = None) -> None:
        self.index = index
        #: fused ops of earlier stages: output port -> the input it is shaped like
        self.same_shape = same_shape or {}
        self._memo: dict[tuple[int, int], Rank] = {}

    # -- public ---------------------------------------------------------------
    def rank(self, tensor: str) -> Rank:
        name, port = parse_input(tensor)
        i = self.index.index.get(name)
        if i is None or port == CONTROL:
            return None
        return self._rank_of((i, port))

    # -- machinery ------------------------------------------------------------
    def _rank_of(self, key: tuple[int, int]) -> Rank:
        memo = self._memo
        active: set[tuple[int, int]] = set()  # on the current path: a loop if met again
        stack: list[tuple[tuple[int, int], object]] = [(key, None)]
        while stack:
            top, rule = stack.pop()
            if top in memo:
                continue
            if rule is None:
                rule = self._rule(*top)
                deps = rule[0]  # type: ignore[index]
                if not deps:
                    memo[top] = rule[1]([])  # type: ignore[index]
                    continue
                active.add(top)
                stack.append((top, rule))
                for d in deps:
                    if d in active:
                        memo[d] = None  # a loop: its rank is unknown
                    elif d not in memo:
                        stack.append((d, None))
                continue
            active.discard(top)
            deps, combine = rule  # type: ignore[misc]
            memo[top] = combine([memo.get(d) for d in deps])
        return memo[key]

    def _data_inputs(self, i: int) -> list[tuple[int, int]]:
        return [t for t in self.index.inputs[i] if t[1] != CONTROL]

    def _const_shape(self, i: int) -> Optional[list[int]]:
        """Shape of a Const's value tensor, or the value of a 1-D int Const."""
        node = self.index.nodes[i]
        if node.op != "Const":
            return None
        return [d.size for d in node.attr["value"].tensor.tensor_shape.dim]

    def _const_ints(self, i: int) -> Optional[list[int]]:
        node = self.index.nodes[i]
        if node.op != "Const":
            return None
        t = node.attr["value"].tensor
        if t.int_val:
            return list(t.int_val)
        if t.int64_val:
            return list(t.int64_val)
        if t.tensor_content:
            import numpy as np

            dtype = np.int64 if t.dtype == 9 else np.int32
            return np.frombuffer(t.tensor_content, dtype=dtype).tolist()
        shape = [d.size for d in t.tensor_shape.dim]
        return [] if shape == [0] else None

    def _length_rule(self, i: int) -> tuple[list[tuple[int, int]], Callable[[list[Rank]], Rank]]:
        """The length of a 1-D shape vector, e.g. the shape input of a Reshape
        computed as ``ConcatV2(GatherV2(Shape(x), ...), ...)`` (Keras' Tensordot)."""
        op = self.index.ops[i]
        ins = self._data_inputs(i)
        if op == "Const":
            shape = self._const_shape(i)
            return [], (lambda _: shape[0] if shape is not None and len(shape) == 1 else None)
        if op == "Pack":
            return [], (lambda _: len(ins))
        if op == "Shape" and ins:
            return ins[:1], lambda r: r[0]
        if op == "ConcatV2" and len(ins) >= 2:
            def total(r: list[Rank]) -> Rank:
                return None if any(x is None for x in r) else sum(r)  # type: ignore[arg-type]
            return [(p, LENGTH) for p, _ in ins[:-1]], total
        if op in ("GatherV2", "Gather") and len(ins) >= 2:
            indices = self._const_shape(ins[1][0])
            return [], (lambda _: indices[0] if indices is not None and len(indices) == 1 else None)
        if op in ("Identity", "Cast") and ins:
            return [(ins[0][0], LENGTH)], lambda r: r[0]
        return [], (lambda _: None)

    def _rule(self, i: int, port: int) -> tuple[list[tuple[int, int]], Callable[[list[Rank]], Rank]]:
        if port == LENGTH:
            return self._length_rule(i)
        node = self.index.nodes[i]
        op = self.index.ops[i]
        known: Callable[[Rank], tuple[list[tuple[int, int]], Callable[[list[Rank]], Rank]]]
        known = lambda r: ([], lambda _: r)  # noqa: E731

        if "_output_shapes" in node.attr:
            shapes = node.attr["_output_shapes"].list.shape
            if port < len(shapes) and not shapes[port].unknown_rank:
                return known(len(shapes[port].dim))
        if op in ("Placeholder", "PlaceholderWithDefault", "PlaceholderV2"):
            shape = node.attr["shape"].shape if "shape" in node.attr else None
            if shape is not None and not shape.unknown_rank:
                return known(len(shape.dim))
            if op == "PlaceholderWithDefault":
                return self._data_inputs(i)[:1], lambda r: r[0]
            return known(None)
        if op == "Const":
            return known(len(self._const_shape(i) or []))
        ins = self._data_inputs(i)
        if not ins:
            return known(None)
        if op in _SAME_AS_FIRST or (op == "Select" and port == 0):
            return ins[:1], lambda r: r[0]
        source = self.same_shape.get(op, {}).get(port)
        if source is not None and source < len(ins):
            return [ins[source]], lambda r: r[0]
        if op in _BROADCAST:
            def widest(r: list[Rank]) -> Rank:
                return None if any(x is None for x in r) else max(r)  # type: ignore[type-var]
            return ins, widest
        if op == "MatMul":
            return known(2)
        if op in _RANK4:
            return known(4)
        if op in ("Reshape", "BroadcastTo") and len(ins) > 1:
            # the rank is the length of the shape vector (see _length_rule)
            return [(ins[1][0], LENGTH)], lambda r: r[0]
        if op == "Einsum":
            equation = node.attr["equation"].s.decode() if "equation" in node.attr else ""
            out = equation.partition("->")[2].strip()
            return known(len(out) if "->" in equation and "." not in out else None)
        if op == "ExpandDims":
            return ins[:1], lambda r: None if r[0] is None else r[0] + 1
        if op == "Pack":
            return ins[:1], lambda r: None if r[0] is None else r[0] + 1
        if op in ("ConcatV2", "Concat"):
            first = ins[1] if op == "Concat" else ins[0]
            return [first], lambda r: r[0]
        if op == "Squeeze":
            dims = list(node.attr["squeeze_dims"].list.i) if "squeeze_dims" in node.attr else []
            if not dims:
                return known(None)
            return ins[:1], lambda r: None if r[0] is None else r[0] - len(dims)
        if op in _REDUCTIONS and len(ins) > 1:
            keep = "keep_dims" in node.attr and node.attr["keep_dims"].b
            if keep:
                return ins[:1], lambda r: r[0]
            axes = self._const_ints(ins[1][0])
            if axes is None:
                return known(None)
            n_axes = len(set(axes))
            return ins[:1], lambda r: None if r[0] is None else r[0] - n_axes
        if op in ("GatherV2", "Gather", "ResourceGather") and len(ins) > 1:
            return ins[:2], lambda r: None if None in r else r[0] + r[1] - 1  # type: ignore[operator]
        if op in ("Shape",):
            return known(1)
        if op in ("Size", "Rank"):
            return known(0)
        return known(None)
