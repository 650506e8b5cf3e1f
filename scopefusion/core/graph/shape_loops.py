"""The ``Merge`` nodes of TF1 loops, for :mod:`.shape_inference`: a loop variable's ``Merge``
reads its entry (``Enter``) and its back edge (``NextIteration``), whose shape depends on the
``Merge`` itself.  As TensorFlow does, its shape starts as its entry's and is relaxed with its
back edge's (a dimension kept where both agree, the rank where both have the same) until it
settles: each round follows the loop's body from the back edge, and a round that changes the
``Merge``'s shape forgets what the body was given from it.  Relaxing only ever loses
dimensions, so it settles within a few rounds; past :data:`MAX_ROUNDS` the shape is unknown.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .shape_context import Dims, OpContext
from .shape_functions import relax
from .vocabulary import LOOP_BACK_OPS

if TYPE_CHECKING:  # pragma: no cover
    from .shape_inference import ShapeInference

#: Rounds over a loop's body before a Merge's shape is given up as unknown.
MAX_ROUNDS = 8


class LoopMerges:
    """Relaxes loop Merges over their back edges (see the module's docstring)."""

    def __init__(self, inference: "ShapeInference") -> None:
        self.inference = inference
        self._depth = 0  # Merges being relaxed (nested loops, or loop variables reading each other)
        self._nodes: list[int] = []  # nodes inferred while one is, in order
        self._tensors: list[tuple[int, int]] = []  # values worked out while one is

    def is_loop_merge(self, i: int) -> bool:
        index = self.inference.index
        return any(index.ops[p] in LOOP_BACK_OPS for p, _ in self.inference._data(i))

    def inferred(self, i: int) -> None:
        if self._depth:
            self._nodes.append(i)

    def valued(self, tensor: tuple[int, int]) -> None:
        if self._depth:
            self._tensors.append(tensor)

    def infer(self, i: int, ctx: OpContext) -> list[Dims]:
        """Merge ``i``'s shapes: its entries' relaxed with its back edges' until they settle."""
        inference = self.inference
        index = inference.index
        back = [k for k, (p, _) in enumerate(ctx.data) if index.ops[p] in LOOP_BACK_OPS]
        entries = [ctx.shape(k) for k in range(len(ctx.data)) if k not in back]
        shape: Dims = entries[0] if entries else None
        for other in entries[1:]:
            shape = relax(shape, other)
        self._depth += 1
        try:
            for _ in range(MAX_ROUNDS):
                nodes, tensors = len(self._nodes), len(self._tensors)
                inference._shapes[i] = [None if shape is None else tuple(shape), ()]  # type: ignore[list-item]
                relaxed = shape
                for k in back:
                    p, port = ctx.data[k]
                    relaxed = relax(relaxed, inference.shape(p, port))
                if relaxed == shape:
                    return [shape, []]
                self._forget(nodes, tensors)
                shape = relaxed
            self._forget(nodes, tensors)
            return [None, []]
        finally:
            self._depth -= 1
            del inference._shapes[i]
            if not self._depth:
                del self._nodes[:], self._tensors[:]

    def _forget(self, nodes: int, tensors: int) -> None:
        """Forget what was worked out since the given marks (it read a Merge's old shape)."""
        inference = self.inference
        for i in self._nodes[nodes:]:
            inference._shapes.pop(i, None)
            inference._missing.pop(i, None)
        for tensor in self._tensors[tensors:]:
            inference._values.pop(tensor, None)
            inference._value_gaps.pop(tensor, None)
        del self._nodes[nodes:], self._tensors[tensors:]
