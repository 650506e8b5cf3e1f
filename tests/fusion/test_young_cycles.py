"""young_cycles_collected: the garbage cycles a block makes go at its end, with the collector
paused or not, and the process's generations and frozen objects are as they were."""
from __future__ import annotations

import gc
import weakref

import pytest

from scopefusion.core.fusion.young_cycles import young_cycles_collected
from scopefusion.core.graph.index import no_gc


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: refcounting alone never frees it
        self.payload = [object() for _ in range(10)]


def _cycle() -> "weakref.ref[_Node]":
    return weakref.ref(_Node())


def test_a_cycle_made_in_the_block_is_collected_at_its_end() -> None:
    with no_gc():  # as in a run: the collector paused
        with young_cycles_collected():
            made = _cycle()
        assert made() is None, "the block's cycle outlived the block"


def test_an_older_cycle_is_left_to_the_collector() -> None:
    """Only what the block made is collected: a cycle made before it is still there after it."""
    with no_gc():
        older = _cycle()
        with young_cycles_collected():
            made = _cycle()
        assert made() is None
        assert older() is not None, "a cycle made before the block was collected by it"
    gc.collect()
    assert older() is None


def test_nothing_stays_frozen_and_a_frozen_process_is_left_alone() -> None:
    assert gc.get_freeze_count() == 0
    with young_cycles_collected():
        assert gc.get_freeze_count() > 0  # the older objects, while the block runs
    assert gc.get_freeze_count() == 0
    keep = [object() for _ in range(3)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with no_gc(), young_cycles_collected():
            made = _cycle()
        assert gc.get_freeze_count() == frozen  # the process's freeze is not undone
        assert made() is not None  # and nothing was collected on its behalf
    finally:
        gc.unfreeze()
    del keep
    gc.collect()
    assert made() is None


def test_the_block_raising_still_thaws() -> None:
    with no_gc(), pytest.raises(ValueError), young_cycles_collected():
        made = _cycle()
        raise ValueError("boom")
    assert gc.get_freeze_count() == 0
    assert made() is None


def test_a_block_inside_another_leaves_the_collection_to_it(monkeypatch) -> None:
    """The inner block neither freezes nor asks how many objects are frozen (a walk over all of
    them); the outer one collects what both made."""
    asked: list[int] = []
    real = gc.get_freeze_count
    monkeypatch.setattr(gc, "get_freeze_count", lambda: asked.append(1) or real())
    with no_gc(), young_cycles_collected():
        with young_cycles_collected():
            inner = _cycle()
        assert inner() is not None  # not yet: the outer block's end collects it
        assert len(asked) == 1
    assert inner() is None
    assert real() == 0


class _CyclingEngine:
    """An engine whose matching leaves a reference cycle holding the stage's index, and which
    looks, while its stage is still applying, at whether that cycle is alive."""

    stage = "graph"

    def __init__(self) -> None:
        self.left: "weakref.ref[_Node] | None" = None

    def active(self) -> bool:
        return True

    def propose(self, context) -> list:
        holder = _Node()
        holder.payload.append(context.index)  # the cycle holds the index, as a graph view's do
        self.left = weakref.ref(holder)
        return []

    def skipped(self, report) -> None:  # pragma: no cover - always active
        raise AssertionError("the stage is active")


def test_a_stage_collects_the_cycles_its_matching_left() -> None:
    """The cycles go with the stage that made them (not with the run's end), the collector paused."""
    from scopefusion.core.fusion.pipeline import FusionPipeline
    from tests.helpers.graph_helpers import make_graph

    graph = make_graph([("x", "Placeholder", []), ("y", "Relu", ["x"])])
    first, second = _CyclingEngine(), _CyclingEngine()
    seen: list[bool] = []
    real_propose = second.propose

    def propose_after_the_first_stage(context) -> list:
        assert first.left is not None
        seen.append(first.left() is None)  # the first stage ended before this one matches
        return real_propose(context)

    second.propose = propose_after_the_first_stage  # type: ignore[method-assign]
    with no_gc():  # no collection but the stages' own
        FusionPipeline([first, second], {}).run(graph)
        assert seen == [True], "the first stage's cycle outlived the stage"
        assert second.left is not None and second.left() is None, "the last stage's cycle outlived the run"
