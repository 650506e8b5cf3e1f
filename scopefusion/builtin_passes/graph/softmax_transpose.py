"""SoftmaxTransposeFusionPass: a softmax over one axis other than the last -> Transpose, Softmax, Transpose.

"Fusion by partition": one operation split into several that the back end runs.  TensorFlow's
``Softmax`` op, like the reference system's ``SoftmaxV2`` kernels, normalizes over the last
axis.  A softmax over axis ``k`` of a rank-``r`` tensor, written out as
``exp(x - max(x, k)) / sum(exp(...), k)`` (tf_keras' ``activations.softmax`` with a tuple
axis, GPT-2's ``softmax()`` with another axis, the documented form without the maximum), is the
same softmax of ``x`` with axes ``k`` and ``r - 1`` swapped, swapped back: it becomes
``Transpose(perm)``, ``Softmax``, ``Transpose(perm)`` (``perm`` swaps the two axes and undoes
itself), as the reference's ``SoftmaxFusionPass`` rewrites its ``SoftmaxV2`` for the shapes its
kernels do not take.  The reference does so for two hard-coded shapes only; this pass does it
for any rank and axis it can tell.

Off by default: the two transposes move every element twice, which a back end that knows its
data layout may not want; a switch file turns it on (``"SoftmaxTransposeFusionPass": "on"`` or
``"ALL": "on"``).  The reference's name ``SoftmaxFusionPass`` is taken by the pass that makes the
stock ``Softmax`` of a softmax over the last axis (:mod:`.softmax`), which refuses these.

Refused with the reason: a softmax over the last axis (the stock op's, no transposes needed),
over several axes, the maximum over another axis than the sum, a tensor of unknown rank; and,
as for the stock op, a complex softmax or one whose parts are read elsewhere.
"""
from __future__ import annotations

import numpy as np

from ...core.fusion.refusal import fail
from ...core.graph.matching import PatternMatch
from ...core.graph.pattern import OpPattern
from ...core.graph.vocabulary import DT_INT32
from ...core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass, fused_input, inner_node
from .conv_batchnorm.folding import const_attrs
from .softmax import SOFTMAX, check_softmax_parts, softmax_axes


class SoftmaxTransposeFusionPass(PatternFusionBasePass):
    """A softmax over one axis but the last -> Transpose + Softmax over the last axis + Transpose."""

    name = "SoftmaxTransposeFusionPass"
    fusion_type = "GraphFusion"
    default_on = False
    description = ("softmax over one axis but the last -> Transpose, stock Softmax, Transpose back (fusion by "
                   "partition, the reference's SoftmaxFusionPass rewrite); off by default")

    def define_patterns(self) -> list[OpPattern]:
        return [SOFTMAX]

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        dtype = check_softmax_parts(match)
        axis, rank = _axis(match)
        perm = list(range(rank))
        perm[axis], perm[-1] = perm[-1], perm[axis]
        prefix, _, last = match.root_name.rpartition("/")
        swap, before, softmax = (f"{last}/{part}" for part in ("perm", "transpose", "Softmax"))
        transposed = {"T": dtype, "Tperm": DT_INT32}
        nodes = [
            inner_node(swap, "Const", [], const_attrs(np.array(perm), DT_INT32, np.int32)),
            inner_node(before, "Transpose", [fused_input(0), swap], transposed),
            inner_node(softmax, "Softmax", [before], {"T": dtype}),
            inner_node(last, "Transpose", [softmax, swap], transposed),  # the softmax's output keeps its name
        ]
        form = "max subtracted" if "max" in match.nodes else "no max subtracted"
        return FusedOp("Softmax", inputs=["x"], name=prefix or None, inner_nodes=nodes, inner_outputs={0: last},
                       description=f"Transpose {perm}, Softmax over the last axis, Transpose back: a softmax over "
                                   f"axis {axis} of a rank-{rank} tensor ({form})")


def _axis(match: PatternMatch) -> tuple[int, int]:
    """The one axis the softmax normalizes over, not the last, and the rank; refuses others."""
    sum_raw, max_raw, rank = softmax_axes(match)
    if rank is None:
        fail(f"cannot tell the rank of {match.tensor_name('x')!r}, to place axes {sum_raw} last")
    sum_axes = sorted({a % rank for a in sum_raw}) if rank else sum_raw
    max_axes = sorted({a % rank for a in max_raw}) if rank else max_raw
    if sum_axes != max_axes:
        fail(f"the maximum is taken over axes {max_axes} but the sum over axes {sum_axes}: not a softmax")
    if len(sum_axes) != 1:
        fail(f"a softmax over axes {sum_axes} of a rank-{rank} tensor: one Softmax normalizes over one axis")
    if sum_axes[0] == rank - 1:
        fail(f"a softmax over the last axis ({rank - 1}): the stock Softmax, no transposes needed")
    return sum_axes[0], rank
