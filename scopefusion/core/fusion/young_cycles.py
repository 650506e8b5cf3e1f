"""Collecting the reference cycles a block of work leaves, without sweeping the rest of the heap.

A run pauses the cyclic garbage collector (see ``no_gc``), so every object it makes
stays in the youngest generation until the run ends.  Matching leaves reference
cycles behind (a graph view and the helpers it hands its own methods to, matchers and
the failure messages that close over them), and those cycles hold the stage's graph
index: a million small containers at 200k nodes, which refcounting cannot free.
The first collection after the run then walks all of them, close to a second per
200k nodes.

:func:`young_cycles_collected` collects, at the end of a block, only what the block
made: it freezes every older object first (:func:`gc.freeze`), collects the youngest
generation, then thaws them again (they stay in the oldest generation, where the
collector left long-lived objects anyway).  What a cycle of the block held (the index)
is then freed by refcounting as soon as nothing else holds it.  The pipeline's block spans a
whole stage (matching, checks, rewrite): the collection walks what is still alive, and by the
stage's end its candidates and plans (some seven objects each, by the ten thousand) are gone,
while the index the cycles hold is in use until then anyway.  A process that froze
objects of its own (``gc.get_freeze_count()`` not zero) is left alone: thawing would
undo its freeze.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


#: how many blocks are open: a block inside another leaves the collection to the outer one (and
#: must not ask ``gc.get_freeze_count()``, which walks every frozen object: the whole heap there)
_open = [0]


@contextmanager
def young_cycles_collected() -> Iterator[None]:
    """Collect the garbage cycles made in the block when it ends (also when it raises),
    traversing only the objects made in it.  Inside another such block it does nothing: the
    outer block collects them."""
    if _open[0] or gc.get_freeze_count():  # an outer block's freeze, or the process's own
        yield
        return
    gc.freeze()
    _open[0] += 1
    try:
        yield
    finally:
        _open[0] -= 1
        try:
            gc.collect(0)
        finally:
            gc.unfreeze()
