"""Static rank inference over a GraphDef, without TensorFlow.

Passes need to know, for example, whether the axes a ``Mean`` reduces are the
trailing axes of its input.  Ranks are read from ``_output_shapes`` when the
graph carries them, from Placeholder and Const shapes, and propagated through
the common ops whose output rank follows from their inputs'.  Anything else is
reported as unknown (``None``), never guessed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

import numpy as np

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
""".split())  # noqa: SIM905 - an op table reads best as a block of names

_BROADCAST = frozenset("""
Add AddV2 Sub Mul Div RealDiv FloorDiv FloorMod TruncateDiv Maximum Minimum Pow SquaredDifference
Less LessEqual Greater GreaterEqual Equal NotEqual LogicalAnd LogicalOr DivNoNan MulNoNan Atan2
BatchMatMul BatchMatMulV2 BatchMatMulV3 SelectV2 AddN
""".split())  # noqa: SIM905

_REDUCTIONS = frozenset({"Mean", "Sum", "Max", "Min", "Prod", "All", "Any", "EuclideanNorm"})

_RANK4 = frozenset({
    "Conv2D", "DepthwiseConv2dNative", "MaxPool", "AvgPool", "Conv2DBackpropInput",
    "ResizeBilinear", "ResizeNearestNeighbor", "FusedResizeAndPadConv2D", "CropAndResize",
})


#: How a tensor's rank follows from the ranks of the tensors its rule reads (see ``Rule``).
KNOWN, SHIFT, WIDEST, TOTAL, GATHER = range(5)

#: ``(kind, deps, arg)``: KNOWN: ``arg`` (no deps); SHIFT: the one dep's rank plus ``arg``;
#: WIDEST: the largest of the deps' ranks; TOTAL: their sum; GATHER: params' + indices' - 1.
#: Unknown (None) when a dep's rank is unknown.
Rule = tuple[int, tuple[tuple[int, int], ...], Rank]

_UNKNOWN: Rule = (KNOWN, (), None)
_UNTOLD = object()
#: Ops whose rank is read from their own attributes.
_SOURCES = frozenset({"Const", "Placeholder", "PlaceholderWithDefault", "PlaceholderV2"})
#: Op types whose output 0 has the rank of input 0 (SHIFT) or the widest input's (WIDEST).
_KIND = {**{op: SHIFT for op in _SAME_AS_FIRST}, **{op: WIDEST for op in _BROADCAST}}


def _combine(kind: int, ranks: list[Rank], arg: Rank) -> Rank:
    if None in ranks:
        return None
    if kind == SHIFT:
        return ranks[0] + arg  # type: ignore[operator]
    if kind == WIDEST:
        return max(ranks)  # type: ignore[type-var]
    if kind == TOTAL:
        return sum(ranks)  # type: ignore[arg-type]
    return ranks[0] + ranks[1] - 1  # type: ignore[operator]  # GATHER


@dataclass(frozen=True)
class Closure:
    """Ranks that follow from the ranks of a boundary (see :meth:`RankInference.closure_ranks`)."""

    boundary: dict[tuple[int, int], Rank]  # the outer tensors read, with their ranks
    inner: tuple[tuple[int, int], ...]  # the inner tensors the ranks follow from
    ranks: dict[tuple[int, int], Rank]  # of the targets


class RankInference:
    """Memoised rank lookups for the tensors of one indexed graph: each tensor's rank is
    inferred once, from its producer's rule and the ranks that rule reads."""

    def __init__(self, index: GraphIndex, same_shape: Mapping[str, Mapping[int, int]] | None = None,
                 const_value: Callable[[int], "np.ndarray | None"] | None = None) -> None:
        self.index = index
        #: fused ops of earlier stages: output port -> the input it is shaped like
        self.same_shape = same_shape or {}
        #: a Const node's decoded value, when the graph view keeps them (a shape vector read here,
        #: for its length, is read for its items by the passes that ask its Reshape's rank)
        self._const_value = const_value
        self._memo: dict[tuple[int, int], Rank] = {}
        self._value_reads: list[int] | None = None  # nodes whose values rules read, while noted

    # -- public ---------------------------------------------------------------
    def rank(self, tensor: str) -> Rank:
        name, port = parse_input(tensor)
        i = self.index.index.get(name)
        if i is None or port == CONTROL:
            return None
        return self.rank_at(i, port)

    def rank_at(self, i: int, port: int) -> Rank:
        """The rank of output ``port`` of node ``i`` (LENGTH: the length of a 1-D tensor)."""
        key = (i, port)
        memo = self._memo
        known = memo.get(key, _UNTOLD)
        if known is not _UNTOLD:
            return known  # type: ignore[return-value]
        rule_of = self._rule
        active: set[tuple[int, int]] = set()  # on the current path: a loop if met again
        stack: list[tuple[tuple[int, int], Rule | None]] = [(key, None)]
        pop, push = stack.pop, stack.append
        while stack:
            top, rule = pop()
            if top in memo:
                continue
            if rule is None:
                rule = rule_of(top[0], top[1])
                deps = rule[1]
                if not deps:
                    memo[top] = rule[2]
                    continue
                active.add(top)
                push((top, rule))
                for d in deps:
                    if d in active:
                        memo[d] = None  # a loop: its rank is unknown
                    elif d not in memo:
                        push((d, None))
                continue
            active.discard(top)
            kind, deps, arg = rule
            if kind == SHIFT:  # one dep
                rank = memo[deps[0]]
                memo[top] = None if rank is None else rank + arg  # type: ignore[operator]
            else:
                memo[top] = _combine(kind, [memo[d] for d in deps], arg)
        return memo[key]

    def inferred(self, i: int, port: int) -> tuple[bool, Rank]:
        """``(True, rank)`` when the rank of output ``port`` of node ``i`` is inferred already."""
        key = (i, port)
        memo = self._memo
        return (True, memo[key]) if key in memo else (False, None)

    def none_inferred(self, tensors: list[tuple[int, int]]) -> bool:
        """True when no rank of ``tensors`` is inferred yet."""
        return self._memo.keys().isdisjoint(tensors)

    def settle(self, ranks: Mapping[tuple[int, int], Rank]) -> None:
        """Take ``ranks`` as inferred (each as :meth:`closure_ranks` found it for alike tensors)."""
        self._memo.update(ranks)

    def closure_ranks(self, targets: list[tuple[int, int]], inside: Callable[[int], bool],
                      value_known: Callable[[int], bool]) -> "Closure | None":
        """The ranks of ``targets``, tensors of nodes where ``inside`` holds, as their rules give
        them from the inferred ranks of the tensors of other nodes they read (the boundary); with
        the tensors of inner nodes they follow from.  None when the rules loop, read the length of
        an outer tensor or an outer tensor not inferred yet, or read the value of a node for which
        ``value_known`` does not hold: then the ranks would not follow from the boundary and the
        inner nodes alone."""
        found = self._closure_rules(targets, inside)
        if found is None:
            return None
        rules, order, boundary, reads = found
        if not all(map(value_known, reads)):
            return None
        ranks: dict[tuple[int, int], Rank] = dict(boundary)
        for top in order:
            kind, deps, arg = rules[top]
            ranks[top] = _combine(kind, [ranks[d] for d in deps], arg) if deps else arg
        return Closure(boundary, tuple(order), {t: ranks[t] for t in targets})

    def _closure_rules(self, targets: list[tuple[int, int]], inside: Callable[[int], bool]) -> tuple[
            dict[tuple[int, int], Rule], list[tuple[int, int]], dict[tuple[int, int], Rank], list[int]] | None:
        """The rules of the inner tensors ``targets`` follow from, in an order where each comes
        after those it reads, the boundary's ranks and the nodes whose values the rules read."""
        memo = self._memo
        rules: dict[tuple[int, int], Rule] = {}
        state: dict[tuple[int, int], bool] = {}  # False: on the current path, True: done
        order: list[tuple[int, int]] = []
        boundary: dict[tuple[int, int], Rank] = {}
        stack: list[tuple[tuple[int, int], bool]] = [(t, False) for t in targets]
        reads = self._value_reads = []
        try:
            while stack:
                top, expanded = stack.pop()
                if expanded:
                    state[top] = True
                    order.append(top)
                    continue
                done = state.get(top)
                if done is not None:
                    if not done:
                        return None  # a loop
                    continue
                i, port = top
                if not inside(i):
                    if port < 0 or top not in memo:
                        return None
                    boundary[top] = memo[top]
                    state[top] = True
                    continue
                rule = rules[top] = self._rule(i, port)
                state[top] = False
                stack.append((top, True))
                stack.extend((d, False) for d in rule[1])
        finally:
            self._value_reads = None
        return rules, order, boundary, reads

    # -- machinery ------------------------------------------------------------
    def _data_inputs(self, i: int) -> list[tuple[int, int]]:
        return [t for t in self.index.inputs[i] if t[1] != CONTROL]

    def _const_shape(self, i: int) -> Optional[list[int]]:
        """Shape of a Const's value tensor, or the value of a 1-D int Const."""
        if self.index.ops[i] != "Const":
            return None
        return [d.size for d in self.index.nodes[i].attr["value"].tensor.tensor_shape.dim]

    def _const_ints(self, i: int) -> Optional[list[int]]:
        if self._value_reads is not None:
            self._value_reads.append(i)
        if self.index.ops[i] != "Const":
            return None
        t = self.index.nodes[i].attr["value"].tensor
        if t.int_val:
            return list(t.int_val)
        if t.int64_val:
            return list(t.int64_val)
        if t.tensor_content:
            dtype = np.int64 if t.dtype == 9 else np.int32
            return np.frombuffer(t.tensor_content, dtype=dtype).tolist()
        shape = [d.size for d in t.tensor_shape.dim]
        return [] if shape == [0] else None

    def _length_rule(self, i: int) -> Rule:
        """The length of a 1-D shape vector, e.g. the shape input of a Reshape
        computed as ``ConcatV2(GatherV2(Shape(x), ...), ...)`` (Keras' Tensordot)."""
        op = self.index.ops[i]
        if op == "Const":
            value = None if self._const_value is None else self._const_value(i)
            if value is not None:  # decoded: its shape is the declared one
                return (KNOWN, (), value.shape[0] if value.ndim == 1 else None)
            dims = self.index.nodes[i].attr["value"].tensor.tensor_shape.dim
            return (KNOWN, (), dims[0].size if len(dims) == 1 else None)
        ins = self._data_inputs(i)
        if op == "Pack":
            return (KNOWN, (), len(ins))
        if op == "Shape" and ins:
            return (SHIFT, (ins[0],), 0)
        if op == "ConcatV2" and len(ins) >= 2:
            return (TOTAL, tuple((p, LENGTH) for p, _ in ins[:-1]), None)
        if op in ("GatherV2", "Gather") and len(ins) >= 2:
            indices = self._const_shape(ins[1][0])
            return (KNOWN, (), indices[0] if indices is not None and len(indices) == 1 else None)
        if op in ("Identity", "Cast") and ins:
            return (SHIFT, ((ins[0][0], LENGTH),), 0)
        return _UNKNOWN

    def _rule(self, i: int, port: int) -> Rule:
        if port == LENGTH:
            return self._length_rule(i)
        index = self.index
        op = index.ops[i]
        attrs = index.nodes[i].attr
        if "_output_shapes" in attrs:
            shapes = attrs["_output_shapes"].list.shape
            if port < len(shapes) and not shapes[port].unknown_rank:
                return (KNOWN, (), len(shapes[port].dim))
        kind = _KIND.get(op)
        if kind is not None or op not in _SOURCES:
            ins = [t for t in index.inputs[i] if t[1] != CONTROL]
            if not ins:
                return _UNKNOWN
            if kind == SHIFT or (op == "Select" and port == 0):
                return (SHIFT, (ins[0],), 0)
            rules = self.same_shape.get(op)
            source = None if rules is None else rules.get(port)
            if source is not None and source < len(ins):
                return (SHIFT, (ins[source],), 0)
            if kind == WIDEST:
                return (WIDEST, tuple(ins), None)
            return self._op_rule(attrs, op, ins)
        if op == "Const":
            return (KNOWN, (), len(attrs["value"].tensor.tensor_shape.dim))
        shape = attrs["shape"].shape if "shape" in attrs else None  # a placeholder
        if shape is not None and not shape.unknown_rank:
            return (KNOWN, (), len(shape.dim))
        ins = self._data_inputs(i)
        return (SHIFT, (ins[0],), 0) if op == "PlaceholderWithDefault" and ins else _UNKNOWN

    def _op_rule(self, attrs: Any, op: str, ins: list[tuple[int, int]]) -> Rule:
        """The rule of an op whose output rank follows from its type, its attributes (``attrs``,
        the node's attribute map) or its constant inputs (matrix products, reshapes, reductions, ...)."""
        if op == "MatMul":
            return (KNOWN, (), 2)
        if op in _RANK4:
            return (KNOWN, (), 4)
        if op in ("Reshape", "BroadcastTo") and len(ins) > 1:
            # the rank is the length of the shape vector (see _length_rule)
            return (SHIFT, ((ins[1][0], LENGTH),), 0)
        if op == "Einsum":
            equation = attrs["equation"].s.decode() if "equation" in attrs else ""
            out = equation.partition("->")[2].strip()
            return (KNOWN, (), len(out) if "->" in equation and "." not in out else None)
        if op in ("ExpandDims", "Pack"):
            return (SHIFT, (ins[0],), 1)
        if op in ("ConcatV2", "Concat"):
            return (SHIFT, (ins[1] if op == "Concat" else ins[0],), 0)
        if op == "Squeeze":
            dims = list(attrs["squeeze_dims"].list.i) if "squeeze_dims" in attrs else []
            return (SHIFT, (ins[0],), -len(dims)) if dims else _UNKNOWN
        if op in _REDUCTIONS and len(ins) > 1:
            if "keep_dims" in attrs and attrs["keep_dims"].b:
                return (SHIFT, (ins[0],), 0)
            axes = self._const_ints(ins[1][0])
            return _UNKNOWN if axes is None else (SHIFT, (ins[0],), -len(set(axes)))
        if op in ("GatherV2", "Gather", "ResourceGather") and len(ins) > 1:
            return (GATHER, (ins[0], ins[1]), None)
        if op == "Shape":
            return (KNOWN, (), 1)
        if op in ("Size", "Rank"):
            return (KNOWN, (), 0)
        return _UNKNOWN
