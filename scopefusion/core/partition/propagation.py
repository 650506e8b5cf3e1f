"""Spreading host placement until it is stable (the reference's default path, mixed mode).

From every host node, as the reference does:

* a candidate reading a string, a resource or a ref from it goes to the host (an
  ``Assert`` reading a string or a resource stays: the reference exempts it);
* a candidate feeding it a string, a resource or a ref, or feeding a ref input of it,
  goes to the host;
* a TF1 while loop holding it goes to the host whole, with every loop nested in it and
  every loop around it (:mod:`.frames`).

Constants are neither moved nor spread from (the reference exempts constant producers;
constants follow their readers afterwards).  Each node enters the work list at most once
and each loop is excluded at most once, so the cost is linear in the graph's size.

The reference excludes loops once, before spreading along edges, so an edge can still
split a loop afterwards; here a loop reached by spreading is excluded too, because a loop
split between the host and a back end cannot run.
"""
from __future__ import annotations

from typing import Any

from ..graph.index import GraphIndex
from ..graph.vocabulary import CONST_OPS, CONTROL
from .edges import REF, EdgeTypes
from .frames import ROOT, LoopFrames
from .reasons import Why

_DEVICE = int(Why.DEVICE)


class Propagation:
    """One run of the spreading over ``why``/``detail`` (changed in place)."""

    def __init__(self, index: GraphIndex, edges: EdgeTypes, frames: LoopFrames, why: list[int],
                 detail: list[Any], *, loops: bool) -> None:
        self.index = index
        self.edges = edges
        self.frames = frames
        self.why = why
        self.detail = detail
        self.loops = loops and frames.count > 0
        self.const = bytearray(op in CONST_OPS for op in index.ops)
        self.excluded: set[int] = set()
        self.work: list[int] = []

    def run(self) -> None:
        why, const = self.why, self.const
        self.work = [i for i in range(len(why)) if why[i] != _DEVICE and not const[i]]
        consumers, inputs, work = self.index.consumers, self.index.inputs, self.work
        while work:
            u = work.pop()
            if self.loops and self.frames.top[u] != ROOT:
                self._exclude_loop(self.frames.top[u], u)
            for c, port, slot in consumers[u]:
                if port != CONTROL and why[c] == _DEVICE and not const[c]:
                    self._edge(u, port, c, slot, c, u)
            for slot, (p, port) in enumerate(inputs[u]):
                if port != CONTROL and why[p] == _DEVICE and not const[p]:
                    self._edge(p, port, u, slot, p, u)

    def _edge(self, producer: int, port: int, consumer: int, slot: int, moved: int, host: int) -> None:
        kind = self.edges.special(producer, port, consumer, slot)
        if kind is None or (kind != REF and moved == consumer and self.index.ops[consumer] == "Assert"):
            return
        self.why[moved] = int(Why.EDGE)
        self.detail[moved] = (kind, host)
        self.work.append(moved)

    def _exclude_loop(self, top: int, culprit: int) -> None:
        if top in self.excluded:
            return
        self.excluded.add(top)
        name = self.frames.names[top]
        for m in self.frames.members(top):
            if self.why[m] == _DEVICE:
                self.why[m] = int(Why.LOOP)
                self.detail[m] = (name, culprit)
                if not self.const[m]:
                    self.work.append(m)


def propagate(index: GraphIndex, edges: EdgeTypes, frames: LoopFrames, why: list[int], detail: list[Any],
              *, loops: bool = True) -> None:
    """Spread host placement along string, resource and ref edges (and to whole loops)."""
    Propagation(index, edges, frames, why, detail, loops=loops).run()
