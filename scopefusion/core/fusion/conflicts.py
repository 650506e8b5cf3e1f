"""Choosing among the plans of one stage: non-convex ones out first, then overlaps.

Rules: within a pass the outermost scope already won during matching.  Across
results, one whose nodes strictly contain another's subsumes it; of two that
overlap partially (or hold the same nodes) the earlier-registered pass wins.
Every dropped result gets a reason; one that lost to another result gets a
:class:`Conflict`, a reason that also names the winner.
"""
from __future__ import annotations

from operator import attrgetter
from typing import Callable, Sequence

from ..graph.index import GraphIndex
from .cycles import find_cycle, plans_on_cycle
from .plan import FusionPlan, new_node_names


class Conflict(str):
    """The reason a result lost a conflict; ``winner`` is the result that stays, as
    ``"name (pass)"``."""

    winner: str = ""

    def __new__(cls, reason: str, winner: FusionPlan) -> "Conflict":
        self = super().__new__(cls, reason)
        self.winner = f"{winner.label} ({winner.pass_name})"
        return self


def resolve_conflicts(
    plans: Sequence[FusionPlan], drop: Callable[[FusionPlan, str], None]
) -> list[FusionPlan]:
    """Return the accepted plans (in priority order); ``drop`` is told the rest."""
    owner: dict[int, FusionPlan] = {}
    accepted: dict[int, FusionPlan] = {}
    for plan in sorted(plans, key=_ORDER):
        if owner.keys().isdisjoint(plan.members):  # no rival
            _accept(plan, owner, accepted)
            continue
        rivals: dict[int, FusionPlan] = {}
        for m in plan.members:
            other = owner.get(m)
            if other is not None:
                rivals[id(other)] = other
        container = next((r for r in rivals.values() if plan.members < r.members), None)
        if container is not None:
            drop(plan, Conflict(f"subsumed by {container.name!r} of pass {container.pass_name} (contains it)",
                                container))
            continue
        if all(r.members < plan.members for r in rivals.values()):
            for r in rivals.values():
                drop(r, Conflict(f"subsumed by {plan.name!r} of pass {plan.pass_name} (contains it)", plan))
                del accepted[id(r)]
                for m in r.members:
                    if owner.get(m) is r:
                        del owner[m]
            _accept(plan, owner, accepted)
            continue
        # the rivals it merely contains are not what stops it
        blocking = [r for r in rivals.values() if not r.members < plan.members]
        first = min(blocking, key=lambda r: r.order)
        drop(plan, Conflict(f"overlaps {first.name!r} of pass {first.pass_name}, which comes first in the run "
                            "order", first))
    return sorted(accepted.values(), key=_ORDER)


#: a plan's priority: lower wins
_ORDER = attrgetter("order")


def _accept(plan: FusionPlan, owner: dict[int, FusionPlan], accepted: dict[int, FusionPlan]) -> None:
    accepted[id(plan)] = plan
    for m in plan.members:
        owner[m] = plan


def select_plans(
    index: GraphIndex, plans: Sequence[FusionPlan], drop: Callable[[FusionPlan, str], None]
) -> list[FusionPlan]:
    """The plans of one stage that can be applied together; ``drop`` is told the rest.

    A plan that cannot be applied on its own (not convex) is refused before
    conflicts are resolved, so that it cannot push aside a valid plan it contains
    or overlaps.  Then overlaps are settled, new names must be unique, and plans
    that would feed each other once contracted are dropped, latest first.
    """
    applicable: list[FusionPlan] = []
    for plan in plans:
        cycle = find_cycle(index, plan)
        if cycle is not None:
            drop(plan, cycle)
        else:
            applicable.append(plan)
    accepted: list[FusionPlan] = []
    names: dict[str, FusionPlan] = {}
    for plan in resolve_conflicts(applicable, drop):
        new_names = new_node_names(plan.candidate) if plan.candidate.inner_nodes else (plan.candidate.name,)
        clash = None if names.keys().isdisjoint(new_names) else next(n for n in new_names if n in names)
        if clash is not None:
            drop(plan, Conflict(f"new node name {clash!r} is also produced by {names[clash].name!r}", names[clash]))
            continue
        for n in new_names:
            names[n] = plan
        accepted.append(plan)
    while len(accepted) > 1:
        looped = plans_on_cycle(index, accepted)
        if not looped:
            break
        last = max(looped, key=lambda p: p.order)
        rivals = [p for p in looped if p is not last]
        others = ", ".join(repr(p.name) for p in rivals)
        drop(last, Conflict(f"fusing it together with {others} would create a cycle", rivals[0]))
        accepted.remove(last)
    return accepted
