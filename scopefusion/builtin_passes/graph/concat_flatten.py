"""ConcatFlattenFusionPass: a ConcatV2 of ConcatV2s along the same axis -> one ConcatV2.

``concat([a, concat([b, c]), d])`` is ``concat([a, b, c, d])`` when both concatenate
along the same axis, so the inner concat need not exist.  Real graphs have it:
tf_slim's Inception v3 concatenates branches that are themselves concats of two
convolutions (``Mixed_7b``, ``Mixed_7c``), and a Keras ``Concatenate`` of
``Concatenate``s does the same.

An inner concat is spliced in, its inputs in order, when its axis is a constant equal to
the outer one (``-1`` and ``rank - 1`` are the same axis; the rank comes from
``GraphView.rank``) and nothing but the outer concat reads it.  Others stay as they are
(DenseNet's concats, read by the next layer too, are an example); a match none of
whose inner concats can be spliced in is refused with the reasons.

The op-pattern language has no variadic inputs, so the patterns are written out for
outer and inner concats of up to :data:`MAX_INPUTS` inputs each, and one level of
nesting: a chain ``concat(concat(concat(...)))`` loses one level per run.
"""
from __future__ import annotations

from functools import cache, lru_cache
from ...core.fusion.refusal import fail
from ...core.graph.matching import PatternMatch
from ...core.graph.pattern import Alt, Const, OpPattern, const, one_of, op
from ...core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass

#: The most inputs (axis not counted) of an outer or inner concat the patterns are written out for.
MAX_INPUTS = 12


def _axis(label: str) -> Const:
    return const(where=lambda v: v.dtype.kind == "i" and v.size == 1, label=label, description="a constant axis")


@cache
def _inner(slot: int) -> Alt:
    """A ConcatV2 of 2 to MAX_INPUTS inputs at input ``slot`` of the outer concat."""
    return one_of(*(op("ConcatV2", *(f"$in{slot}_{j}" for j in range(n)), _axis(f"axis{slot}"),
                       label=f"inner{slot}") for n in range(2, MAX_INPUTS + 1)))


def _outer(n: int) -> OpPattern:
    """A ConcatV2 of ``n`` inputs at least one of which is a ConcatV2: alternative ``p`` has
    its first one at input ``p`` (the inputs before it matched no inner concat)."""
    alternatives = []
    for p in range(n):
        slots = [f"$in{k}" for k in range(p)] + [_inner(p)]
        slots += [one_of(_inner(k), f"$in{k}") for k in range(p + 1, n)]
        alternatives.append(op("ConcatV2", *slots, _axis("axis"), label="concat"))
    return OpPattern(f"NestedConcat{n}", one_of(*alternatives))


@lru_cache(maxsize=1)
def nested_concat_patterns() -> tuple[OpPattern, ...]:
    """One pattern per number of outer inputs (built once: patterns are immutable)."""
    return tuple(_outer(n) for n in range(2, MAX_INPUTS + 1))


class ConcatFlattenFusionPass(PatternFusionBasePass):
    """ConcatV2 whose inputs include ConcatV2s on the same constant axis, read by it alone ->
    one ConcatV2 of all their inputs, in order."""

    name = "ConcatFlattenFusionPass"
    aliases = ("ZConcatv2dFusionPass",)  # the reference's pass that flattens nested concats
    fusion_type = "GraphFusion"
    description = "ConcatV2 of ConcatV2s on the same constant axis, read only by it -> one ConcatV2"

    def define_patterns(self) -> list[OpPattern]:
        return list(nested_concat_patterns())

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        concat = match.node("concat")
        inputs: list[str] = []
        spliced, reasons = 0, []
        for k in range(concat.attr["N"].i):
            if f"inner{k}" not in match.nodes:
                inputs.append(f"in{k}")
                continue
            problem = _inner_problem(match, k)
            if problem is not None:
                reasons.append(problem)
                inputs.append(f"inner{k}")  # the inner concat stays and feeds the new one
                continue
            inputs.extend(f"in{k}_{j}" for j in range(match.node(f"inner{k}").attr["N"].i))
            spliced += 1
        if not spliced:
            fail("; ".join(reasons))
        attrs = {"N": len(inputs), "T": concat.attr["T"].type, "Tidx": concat.attr["Tidx"].type}
        return FusedOp("ConcatV2", inputs=[*inputs, "axis"], attrs=attrs,
                       description=f"ConcatV2 with {spliced} inner concat(s) spliced in")


def _axis_value(match: PatternMatch, label: str) -> int:
    return int(match.consts[label].reshape(-1)[0])


def _inner_problem(match: PatternMatch, k: int) -> str | None:
    """Why the inner concat at input ``k`` cannot be spliced in (None when it can)."""
    name = match.name(f"inner{k}")
    index = match.view.index
    readers = sorted({index.names[c] for c, port, _ in index.consumers[match.nodes[f"inner{k}"]]
                      if c != match.root or port < 0})
    if readers:
        return f"the inner concat {name!r} is also read by {readers[0]!r}"
    inner, outer = _axis_value(match, f"axis{k}"), _axis_value(match, "axis")
    if inner == outer:
        return None
    rank = match.view.rank(match.root_name)  # concats keep the rank of their inputs
    if rank is None and (inner < 0) != (outer < 0):
        return f"cannot tell the rank of {name!r}, to compare its axis {inner} with the outer axis {outer}"
    if rank is not None:
        inner, outer = inner % rank, outer % rank
    if inner != outer:
        return f"the inner concat {name!r} joins along axis {inner}, the outer one along axis {outer}"
    return None
