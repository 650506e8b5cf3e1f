"""The parts of a detection stage, read by the passes that fuse each part on its own.

A stage pass (RPN proposals, Faster R-CNN predictions) fuses a scope made of OD API parts the
other detection passes know one by one (a ``Decode`` scope, a ``BatchMultiClassNonMaxSuppression``
scope, ``ToNormalizedCoordinates`` scopes) and the few ops that wire them.  Each part is checked by
its own pass's :meth:`generate_fusion_result` on a scratch result, which refuses it with that pass's
reason; the part's fused inputs and outputs are then tensors of the graph the stage's wiring is
matched against.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...core.fusion.refusal import Refused, fail
from ...core.graph.vocabulary import CONTROL
from ...core.scope.base_pass import ScopeBasePass
from ...core.scope.patterns import PatternSet, ScopePattern
from ...core.scope.results import FusionScopesResult

if TYPE_CHECKING:  # pragma: no cover
    from ...core.scope.scope_graph import Scope

Tensor = tuple[int, int]


@dataclass
class Part:
    """One part of a stage: its scope, attributes, and fused inputs and outputs as graph tensors."""

    scope: "Scope"
    attrs: dict[str, Any]
    inputs: dict[int, Tensor]
    outputs: dict[int, Tensor]


def read_part(pass_type: type[ScopeBasePass], scope: "Scope") -> Part:
    """Check ``scope`` with ``pass_type``'s own analysis; its refusal refuses the stage, naming the part."""
    scratch = FusionScopesResult(scope.name, [scope])
    try:
        pass_type().generate_fusion_result([scope], scratch)
    except Refused as why:
        fail(f"{scope.name} is not what {pass_type.name} fuses: {why.reason}", *why.nodes)
    index = scope.graph.index
    inputs: dict[int, Tensor] = {}
    for key, slots in scratch.input_map.items():
        node = index.index[scope.full_name(key)]
        data = [t for t in index.inputs[node] if t[1] != CONTROL]
        for slot, fused in enumerate(slots):
            if fused is not None:
                inputs.setdefault(fused, data[slot])
    outputs: dict[int, Tensor] = {}
    for key, ports in scratch.output_map.items():
        node = index.index[scope.full_name(key)]
        for port, fused in enumerate(ports):
            if fused is not None:
                outputs[fused] = (node, port)
    return Part(scope, dict(scratch.attrs), inputs, outputs)


def sub_scopes(scope: "Scope", name: str) -> list["Scope"]:
    """The scopes below ``scope`` named ``name`` (or ``name_<k>``), outermost only."""
    found: list["Scope"] = []
    for sub in scope.all_sub_scopes():
        base, _, tail = sub.last_name.rpartition("_")
        named = sub.last_name == name or (base == name and tail.isdigit())
        if named and not any(f.is_ancestor_of(sub) for f in found):
            found.append(sub)
    return found


def stage_patterns(name: str, scope_suffix: str) -> list[PatternSet]:
    """The scope of a detection post-processing stage (``scope_suffix``, its result called ``name``):
    one score softmax, the box decode's two Exp, at most one TopKV2."""
    pattern = (
        ScopePattern(name)
        .add_scope_feature(suffix=scope_suffix)
        .add_node_op_type_feature("Softmax", 1)
        .add_node_op_type_feature("Exp", 2)
        .add_node_op_type_feature("TopKV2", 0, 1)
    )
    return [[[pattern]]]
