"""The variables of a TF1 while loop's frame, read by structure.

Each loop variable is ``Merge(Enter(init), NextIteration(next))`` (either order), steered by one
``Switch`` whose port 1 the body reads and whose port 0 an ``Exit`` may take after the loop.  A
library may put any chain of ``Identity`` nodes between those (a lowered functional ``While``
reads each argument through ``Func/while/body/_1/input/_k`` and returns it through
``.../output/_k``): every tensor is seen through its Identity chain.  A variable whose ``next`` is
its own body read is unchanged by the loop (a bound, a step size, the input list of a lowered
``While``): the body reads its ``init``, as it reads a tensor an ``Enter`` brings in.  A variable
the body never reads is one the loop only overwrites (``snt.dynamic_unroll``'s last output).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ....core.fusion.refusal import fail
from ....core.graph.vocabulary import ADD_OPS
from .plumbing import Tensor, data_inputs, readers_of, value_of

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope, ScopeGraph

_ROUTES = frozenset({"Identity", "NextIteration"})


@dataclass
class Var:
    """One loop variable: its Merge and Switch, its value before the loop, its next value (seen
    through Identity chains), its Exit and whether the body reads it."""

    merge: int
    switch: int
    init: Tensor  # the tensor its Enter reads
    next: Tensor
    exit: int | None
    read: bool = False

    @property
    def current(self) -> Tensor:
        """The variable's value in the body: its Switch's port 1."""
        return (self.switch, 1)

    @property
    def invariant(self) -> bool:
        return self.next == self.current


class Frame:
    """A TF1 loop's frame (the nodes of ``scope``) and its variables."""

    def __init__(self, sg: "ScopeGraph", scope: "Scope") -> None:
        self.sg, self.index = sg, sg.index
        self.nodes = set(scope.all_node_indices())
        self.variables = self._variables()
        self._by_current = {v.current: k for k, v in enumerate(self.variables)}
        self._by_merge = {(v.merge, 0): k for k, v in enumerate(self.variables)}
        for i in self.nodes:
            if self.index.ops[i] not in _ROUTES:
                for t in data_inputs(self.index, i):
                    k = self._by_current.get(self.resolve(t))
                    if k is not None:
                        self.variables[k].read = True

    def resolve(self, tensor: Tensor) -> Tensor:
        """The tensor an Identity chain reads (``tensor`` itself when no Identity gives it)."""
        index = self.index
        while index.ops[tensor[0]] == "Identity":
            tensor = data_inputs(index, tensor[0])[0]
        return tensor

    def _variables(self) -> list[Var]:
        index = self.index
        found = []
        for m in sorted(i for i in self.nodes if index.ops[i] == "Merge"):
            ins = [self.resolve(t) for t in data_inputs(index, m)]
            by_op = {index.ops[t[0]]: t[0] for t in ins}
            enter, nxt = by_op.get("Enter"), by_op.get("NextIteration")
            if len(ins) != 2 or enter is None or nxt is None:
                fail(f"the TF1 loop's {index.names[m]!r} is not Merge(Enter, NextIteration)")
            switches = [c for c in readers_of(index, m, 0) if index.ops[c] == "Switch"]
            if len(switches) != 1:
                fail(f"the TF1 loop variable {index.names[m]!r} is steered by {len(switches)} Switch nodes, "
                     "not one")
            exits = [c for c in readers_of(index, switches[0], 0) if index.ops[c] == "Exit"]
            found.append(Var(m, switches[0], data_inputs(index, enter)[0],
                             self.resolve(data_inputs(index, nxt)[0]), exits[0] if exits else None))
        return found

    def var(self, tensor: Tensor) -> int | None:
        """The variable whose value in the body ``tensor`` is (through Identity chains), or None."""
        return self._by_current.get(self.resolve(tensor))

    def merged(self, tensor: Tensor) -> int | None:
        """The variable whose Merge ``tensor`` is (the condition reads the Merge), or None."""
        return self._by_merge.get(self.resolve(tensor))

    def outer(self, tensor: Tensor, what: str) -> Tensor:
        """The tensor from outside the loop that ``tensor`` in the body is (as the ``Enter``
        reads it): one an ``Enter`` brings in, or the value of a variable the loop leaves
        unchanged; refused (:func:`fail`)."""
        tensor = self.resolve(tensor)
        if self.index.ops[tensor[0]] == "Enter":
            return data_inputs(self.index, tensor[0])[0]
        k = self._by_current.get(tensor, self._by_merge.get(tensor))
        if k is not None and self.variables[k].invariant:
            return self.variables[k].init
        fail(f"the TF1 loop's {what} {self.index.names[tensor[0]]!r} is not brought in from outside the loop "
             "(by an Enter or a loop variable it leaves unchanged)")

    def value(self, tensor: Tensor) -> Any:
        """The constant value of ``tensor`` in the body or outside (None when it is none)."""
        tensor = self.resolve(tensor)
        if self.index.ops[tensor[0]] == "Enter" or self._by_current.get(tensor) is not None:
            k = self._by_current.get(tensor)
            if k is not None and not self.variables[k].invariant:
                return None
            tensor = self.resolve(self.outer(tensor, "value"))
        return value_of(self.sg, tensor)

    def increments(self, k: int) -> bool:
        """Variable ``k`` advances by one per step: its next value adds 1 to it (in either order,
        the 1 a constant, brought in or kept in an unchanged variable)."""
        node = self.variables[k].next[0]
        if self.index.ops[node] not in ADD_OPS or self.variables[k].next[1] != 0:
            return False
        ins = data_inputs(self.index, node)
        return len(ins) == 2 and any(self.var(a) == k and _is_one(self.value(b)) for a, b in (ins, ins[::-1]))

    def one(self, ops: tuple[str, ...]) -> int:
        found = [i for i in self.nodes if self.index.ops[i] in ops]
        if len(found) != 1:
            fail(f"the TF1 loop holds {len(found)} {' / '.join(ops)} nodes, not one")
        return found[0]


def _is_one(value: Any) -> bool:
    return value is not None and getattr(value, "size", 1) == 1 and float(value.reshape(-1)[0]) == 1.0
