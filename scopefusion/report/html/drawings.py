"""What ``scopefusion run --html`` draws, from the places a run kept (see
:mod:`scopefusion.core.fusion.places`): per fused op the subgraph it replaced and the fused
node in its stead; per refusal or near miss the place, with the nodes its reason names
(the step that failed) highlighted."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .svg import Drawing

if TYPE_CHECKING:  # pragma: no cover
    from ...core.fusion.places import Place, PlaceNode
    from ...core.fusion.report import FusedRecord, Refusal

_QUOTED = re.compile(r"'([^']+)'")
#: an op type a scope pattern's feature names: "exactly 2 Mean node(s)", "Mean directly in the scope with"
_FEATURE_OP = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*) (?:node\(s\)|directly in the scope with)")


def node_name(tensor: str) -> str:
    name = tensor.lstrip("^")
    head, _, port = name.rpartition(":")
    return head if head and port.isdigit() else name


def _left_out(place: "Place") -> list[str]:
    notes = []
    for what, shown, count in (("nodes", len(place.members), place.member_count),
                               ("outside inputs", len(place.producers), place.producer_count),
                               ("outside readers", len(place.consumers), place.consumer_count)):
        if count > shown:
            notes.append(f"{shown} of {count} {what} shown")
    return notes


def _add_neighbours(drawing: Drawing, place: "Place", inside: set[str], highlighted: set[str]) -> None:
    """The outside producers and readers of ``place`` around its nodes already in ``drawing``."""
    for p in place.producers:
        drawing.add(p.name, p.op, "failing" if p.name in highlighted else "outside")
    for m in place.members:
        for name in m.inputs:
            if name in inside or any(p.name == name for p in place.producers):
                drawing.connect(name, m.name)
    for c in place.consumers:
        drawing.add(c.name, c.op, "failing" if c.name in highlighted else "outside")
        for name in c.inputs:
            drawing.connect(name, c.name)


def replaced(record: "FusedRecord") -> Drawing:
    """The nodes ``record`` replaced, with the outside nodes they read and the ones reading them."""
    place = record.place
    drawing = Drawing(f"replaced by {record.name}")
    if place is None:
        return drawing
    for m in place.members:
        drawing.add(m.name, m.op, "member")
    _add_neighbours(drawing, place, {m.name for m in place.members}, set())
    drawing.notes = _left_out(place)
    return drawing


def fused(record: "FusedRecord") -> Drawing:
    """The fused node with the nodes feeding its inputs and the outside nodes reading it."""
    place = record.place
    drawing = Drawing(f"{record.type} {record.name}")
    if place is None:
        return drawing
    ops = {n.name: n.op for n in [*place.members, *place.producers, *place.consumers]}
    inputs = list(dict.fromkeys(node_name(t) for t in place.fused_inputs))
    # a fused op may take over the name of a node it reads or that reads it: tell the two apart
    me = record.name if record.name not in {*inputs, *(c.name for c in place.consumers)} else \
        f"{record.name} (fused)"
    for name in inputs:
        drawing.add(name, ops.get(name, "?"), "outside")
        drawing.connect(name, me)
    drawing.add(me, record.type, "fused")
    for c in place.consumers:
        drawing.add(c.name, c.op, "outside")
        drawing.connect(me, c.name)
    return drawing


def highlighted(refusal: "Refusal") -> set[str]:
    """The nodes of the place the refusal names (its ``nodes``, and those its reason quotes), else
    those of the op type of the scope feature that failed."""
    place = refusal.place
    if place is None:
        return set()
    nodes: list["PlaceNode"] = [*place.members, *place.producers, *place.consumers]
    names = {n.name for n in nodes}
    quoted = ({node_name(q) for q in _QUOTED.findall(refusal.reason)} | set(refusal.nodes)) & names
    if quoted:
        return quoted
    ops = set(_FEATURE_OP.findall(refusal.reason))
    return {m.name for m in place.members if m.op in ops}


def place(refusal: "Refusal", title: str) -> Drawing:
    """The place of a refusal or near miss, the nodes its reason names highlighted."""
    drawing = Drawing(title)
    where = refusal.place
    if where is None:
        return drawing
    marked = highlighted(refusal)
    for m in where.members:
        drawing.add(m.name, m.op, "failing" if m.name in marked else "place")
    _add_neighbours(drawing, where, {m.name for m in where.members}, marked)
    drawing.notes = _left_out(where)
    return drawing
