"""``dynamic_rnn``'s ``sequence_length`` in its loop: the copy-through, read for both loop forms.

Given ``sequence_length``, ``dynamic_rnn`` runs its cells every step and then keeps, per
sequence, the old value where the sequence has ended::

    done   = GreaterEqual(time, lengths)              lengths: [batch] int32, unchanged by the loop
    out    = Select(done, zeros, cell's h)            the step's output, written to the output list
    state' = Select(done, state, cell's new state)    every carried state (each layer's h, c / h)

(``Select`` with a [batch] condition picks whole rows; a broadcasting ``SelectV2`` would not.)
Outside the loop it bounds its time by ``Minimum(steps, Maximum(1, Max(lengths)))``, so the
loop may stop before the last step: the rows it does not write are zero in the stacked output,
and every sequence has ended by then, which is what the fused op computes there too.  The
readers of a body (:mod:`.body`) and of a TF1 frame (:mod:`.tf1_loop`) read the copy-through with
the pieces here, then see each carried value through it (:meth:`CopyThrough.new_of`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generic, Hashable, Mapping, TypeVar

from ....core.fusion.refusal import fail

#: the ops of a copy-through (a loop body holding any of them is read as one)
COPY_OPS = frozenset({"Select", "SelectV2", "GreaterEqual"})

Ref = TypeVar("Ref", bound=Hashable)


@dataclass
class CopyThrough(Generic[Ref]):
    """The ``Select`` nodes of one loop's copy-through: output -> (kept value, new value)."""

    #: the loop's input holding the lengths (a position among the loop's inputs)
    lengths: int
    selects: dict[Ref, tuple[Ref, Ref]]
    #: the position of the input the output is zero from, once :meth:`output_of` has read it
    zeros: int | None = None
    used: set[Ref] = field(default_factory=set)

    def new_of(self, carried: Ref, kept: Ref) -> Ref | None:
        """The new value ``carried`` (a value the loop carries) keeps ``kept`` against, or None
        when it is no Select of the copy-through keeping ``kept``."""
        pair = self.selects.get(carried)
        if pair is None or pair[0] != kept or carried in self.used:
            return None
        self.used.add(carried)
        return pair[1]

    def check_all_used(self, name_of: Callable[[Ref], str]) -> None:
        unused = [name_of(r) for r in self.selects if r not in self.used]
        if unused:
            fail(f"Select {unused[0]!r} chooses by time >= sequence_length but is no copy-through of "
                 "the cells' state or the step's output")


def select_nodes(ops: Mapping[Ref, str], data: Callable[[Ref], list[Ref]], done: Ref,
                 name_of: Callable[[Ref], str]) -> dict[Ref, tuple[Ref, Ref]]:
    """``{Select output: (kept, new)}`` of the Selects among ``ops`` (node key -> op), each choosing
    by ``done``; ``data(key)`` gives a node's data inputs, ``name_of(key)`` its name."""
    found: dict[Ref, tuple[Ref, Ref]] = {}
    for key, op in ops.items():
        if op == "SelectV2":
            fail(f"{name_of(key)!r} (SelectV2) broadcasts its condition over the last axis: not "
                 "dynamic_rnn's sequence_length copy-through (a Select picking rows)")
        if op != "Select":
            continue
        cond, kept, new = data(key)
        if cond != done:
            fail(f"Select {name_of(key)!r} does not choose by the loop's time >= sequence_length")
        found[key] = (kept, new)
    return found


def one_compare(ops: Mapping[Ref, str]) -> Ref:
    """The one GreaterEqual among ``ops`` (node key -> op) of a copy-through."""
    compares = [key for key, op in ops.items() if op == "GreaterEqual"]
    if len(compares) != 1:
        fail(f"the loop holds {len(compares)} GreaterEqual nodes: dynamic_rnn's sequence_length "
             "compares its time with the lengths once")
    return compares[0]
