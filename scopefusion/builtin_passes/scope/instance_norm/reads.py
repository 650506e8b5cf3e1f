"""Reading an instance normalization's wiring: the kind of refusal that says the moments are
another normalization's, and the small graph queries the analysis steps share."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ....core.fusion.refusal import Refused, fail
from .op import NCHW, NHWC

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope, ScopeGraph


#: The ``kind`` of a refusal whose moments belong to some other normalization (batch norm, layer
#: norm): not a candidate.  Other refusals are of an instance normalization the op cannot take.
OTHER_NORMALIZATION = "other normalization"


def _tensor(t: tuple[str, int]) -> str:
    return t[0] if t[1] == 0 else f"{t[0]}:{t[1]}"


def _data_consumers(sg: "ScopeGraph", name: str, ops: Sequence[str]) -> list[str]:
    """Nodes of ``ops`` that read output 0 of ``name`` as data."""
    out = []
    for c in dict.fromkeys(sg.consumer_names(name)):
        if sg.op_of(c) in ops and (name, 0) in _inputs(sg, c):
            out.append(c)
    return out


def _inputs(sg: "ScopeGraph", node: str) -> list[tuple[str, int]]:
    return [sg.producer(node, k) for k in range(len(sg.input_names(node)))]


def _other_input(sg: "ScopeGraph", node: str, known: tuple[str, int]) -> tuple[int, tuple[str, int]]:
    ins = _inputs(sg, node)
    if len(ins) != 2:
        fail(f"{node!r} does not have two inputs")
    if ins[0] == known:
        return 1, ins[1]
    if ins[1] == known:
        return 0, ins[0]
    fail(f"{node!r} does not read {_tensor(known)!r}")


def _reduction_axes(sg: "ScopeGraph", mean: str) -> list[int]:
    value = sg.const_value(sg.producer(mean, 1)[0])
    if value is None:
        fail(f"the reduction indices of {mean!r} are not constant")
    return [int(a) for a in value.reshape(-1)]


def _spatial_layout(axes: list[int], rank: int | None, x: str) -> tuple[str, list[int]]:
    """(data_format, normalised axes) for moments over ``axes`` of a rank-``rank`` input."""
    if rank is None:
        if any(a == 0 for a in axes):
            fail(f"the moments reduce axes {axes}, including the batch axis 0", kind=OTHER_NORMALIZATION)
        fail(f"cannot tell the rank of {x!r}, so whether axes {axes} are its spatial axes", kind=OTHER_NORMALIZATION)
    if any(not -rank <= a < rank for a in axes):
        fail(f"reduction axes {axes} are out of range for a rank-{rank} input", kind=OTHER_NORMALIZATION)
    norm = sorted({a % rank for a in axes})
    if len(norm) != len(axes):
        fail(f"reduction axes {axes} repeat an axis", kind=OTHER_NORMALIZATION)
    if 0 in norm:
        fail(f"the moments reduce axes {norm}, including the batch axis 0", kind=OTHER_NORMALIZATION)
    if rank < 3:
        fail(f"a rank-{rank} input has no spatial axes", kind=OTHER_NORMALIZATION)
    if norm == list(range(1, rank - 1)):
        return NHWC, norm
    if norm == list(range(2, rank)):
        return NCHW, norm
    fail(
        f"the moments reduce axes {norm} of a rank-{rank} input, not its spatial axes "
        f"({list(range(1, rank - 1))} for NHWC, {list(range(2, rank))} for NCHW)",
        kind=OTHER_NORMALIZATION,
    )


def _within(scope: "Scope", node_scope: "Scope") -> bool:
    return node_scope is scope or scope.is_ancestor_of(node_scope)


def _other_input_or(sg: "ScopeGraph", node: str, known: tuple[str, int]) -> tuple[int, tuple[str, int] | None]:
    try:
        return _other_input(sg, node, known)
    except Refused:
        return -1, None
