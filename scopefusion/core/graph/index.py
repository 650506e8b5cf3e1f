"""One index over a GraphDef, built once: names, producers, consumers, ports,
control edges and a topological order, with validation.

Tensors are ``(node_index, port)`` pairs; a control edge uses port ``-1``.
"""
from __future__ import annotations

import gc
import operator
import sys
from contextlib import contextmanager
from functools import cached_property
from itertools import compress, count
from typing import TYPE_CHECKING, AbstractSet, Any, Iterable, Iterator, Sequence

from ..errors import GraphValidationError
from .edge_lists import Consumers, Inputs, consumers_of, node_ids, nodes_by_op, parse_inputs, unread
from .toposort import drop_loop_back_edges, kahn_order_by_readers, on_cycles
from .vocabulary import CONTROL

#: The attribute holding a node's colocation constraints, ``loc:@<node name>`` each.
COLOCATE = "_class"

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef

    from .graph_scan import GraphColumns

_MAX_LISTED = 5
_NAME, _OP = operator.attrgetter("name"), operator.attrgetter("op")


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building large containers."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _summarise(problems: Sequence[str]) -> str:
    shown = "; ".join(problems[:_MAX_LISTED])
    more = len(problems) - _MAX_LISTED
    return shown + (f"; and {more} more" if more > 0 else "")


def renew_wrappers(nodes: list["NodeDef"], held: Sequence["NodeDef"], which: Iterable[int]) -> None:
    """Make the wrappers ``nodes[i]`` (``i`` in ``which``) anew from the graph's node list ``held``,
    where the same messages stand.  In protobuf's upb runtime, reading the (empty) input list of a
    node without inputs leaves a placeholder on the node's wrapper, some hundreds of bytes kept
    while the wrapper lives; a new wrapper of the same message has none.  (A wrapper held
    elsewhere too is the one the runtime hands out again: no node gets two.)"""
    for i in which:
        nodes[i] = None  # the list's reference let go first, so that a new wrapper is made
        nodes[i] = held[i]


class GraphIndex:
    """Read-only index of a GraphDef.

    Build it with ``GraphIndex(graph_def)``; it validates the graph and raises
    :class:`GraphValidationError` naming the offending nodes.
    """

    def __init__(self, graph_def: "GraphDef", *, validate: bool = True,
                 columns: "GraphColumns | None" = None) -> None:
        """``columns``: the graph's names, op types and inputs as :mod:`.graph_scan` read them from
        the bytes ``graph_def`` was parsed from, unchanged since (the index takes them over)."""
        self.graph_def = graph_def
        with no_gc():
            self.nodes: list["NodeDef"] = list(graph_def.node)
            if columns is not None and len(columns) != len(self.nodes):
                columns = None  # not this graph's: read it through protobuf
            if columns is None:
                self.names: list[str] = list(map(_NAME, self.nodes))
                self.ops: list[str] = list(map(sys.intern, map(_OP, self.nodes)))  # one string per op type
                self.index: dict[str, int] = dict(zip(self.names, range(len(self.names)), strict=True))
            else:
                self.names, self.ops, self.index = columns.names, columns.ops, columns.index
            if validate and len(self.index) != len(self.names):
                self._raise_duplicates()
            if columns is None:
                self.inputs: Inputs = self._parse_inputs()
                renew_wrappers(self.nodes, graph_def.node, compress(count(), map(operator.not_, self.inputs)))
            else:  # no node's input list was read: no wrapper to renew
                self._raise_dangling(columns.dangling)
                self.inputs = columns.inputs
        self._by_op: dict[str, list[int]] | None = None
        self._order: list[int] | None = None
        self._colocated: list[int] | None = None if columns is None else columns.colocated
        #: False when no node names a device (as the columns told; None: not known).  A rewrite gives
        #: its new nodes the device of a node it removes, so a graph without devices keeps none.
        self.devices_used: bool | None = None
        if columns is not None:
            self.devices_used = columns.devices_used if columns.devices is None else any(columns.devices)
        if validate:
            self.topological_order()

    # ------------------------------------------------------------------ build
    def _raise_duplicates(self) -> None:
        seen: set[str] = set()
        dups: list[str] = []
        for name in self.names:
            if name in seen and name not in dups:
                dups.append(name)
            seen.add(name)
        raise GraphValidationError(
            f"duplicate node names: {_summarise([repr(d) for d in dups])}"
        )

    def _parse_inputs(self) -> Inputs:
        dangling: list[str] = []
        result = parse_inputs(self.nodes, self.names, self.index, dangling)
        self._raise_dangling(dangling)
        return result

    @staticmethod
    def _raise_dangling(dangling: Sequence[str]) -> None:
        if dangling:
            raise GraphValidationError(
                f"inputs that name no node in the graph: {_summarise(dangling)}"
            )

    # ---------------------------------------------------------------- queries
    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, name: object) -> bool:
        return name in self.index

    def node(self, name: str) -> "NodeDef":
        """The NodeDef called ``name`` (KeyError if there is none)."""
        return self.nodes[self.index[name]]

    @cached_property
    def consumers(self) -> Consumers:
        """Per producer: ``(consumer, producer_port, consumer_input_slot)``, by consumer then slot (built
        on first use, at the latest by :meth:`topological_order`, which follows them; later reads are
        plain attribute reads, which hot loops make by the hundred thousand)."""
        with no_gc():
            return consumers_of(self.inputs, self.node_ids())

    def node_ids(self) -> Sequence[int]:
        """The node indices in order, as the int objects the name table holds: structures built of
        them share those objects rather than making their own."""
        return node_ids(self.index, len(self.names))

    def nodes_of_type(self, op: str) -> list[int]:
        """Indices of the nodes of one op type, in graph order (one pass builds the table for every type)."""
        return self._by_op_table().get(op, [])

    def op_types(self) -> AbstractSet[str]:
        """The op types the graph holds (the keys of :meth:`nodes_of_type`'s table)."""
        return self._by_op_table().keys()

    def _by_op_table(self) -> dict[str, list[int]]:
        if self._by_op is None:
            with no_gc():
                self._by_op = nodes_by_op(self.node_ids(), self.ops)
        return self._by_op

    def colocated_nodes(self) -> list[int]:
        """Nodes holding colocation constraints (a ``_class`` attribute), in graph order (told by the
        columns the index was built from, else found on first use; an index updated after a rewrite
        carries them over)."""
        if self._colocated is None:
            self._colocated = [i for i, node in enumerate(self.nodes) if COLOCATE in node.attr]
        return self._colocated

    def data_input(self, node_index: int, slot: int) -> tuple[int, int]:
        """The tensor feeding data input ``slot`` of a node."""
        ins = self.inputs[node_index]
        if slot >= len(ins) or ins[slot][1] == CONTROL:
            raise IndexError(f"{self.names[node_index]!r} has no data input {slot}")
        return ins[slot]

    def sinks(self) -> list[int]:
        """Nodes whose outputs nobody consumes, in graph order (read off the consumers once built)."""
        return unread(self.inputs, len(self.nodes), self.__dict__.get("consumers"))

    def topological_order(self) -> list[int]:
        """Kahn order (stable by graph position); loop back edges are ignored.

        Raises :class:`GraphValidationError` naming nodes on a cycle.
        """
        if self._order is not None:
            return self._order
        with no_gc():
            # the edges the order follows, loop back edges taken out below
            readers: list[Sequence[tuple[int, int, int]]] = list(self.consumers)
            indegree = list(map(len, self.inputs))
            self._drop_loop_back_edges(readers, indegree)
            order = kahn_order_by_readers(indegree, readers, self.node_ids())
        if len(order) != len(self.nodes):
            succ = [[c for c, _, _ in edges] for edges in readers]
            stuck = [self.names[i] for i in on_cycles(indegree, succ)]
            raise GraphValidationError(
                f"the graph has a cycle through {len(stuck)} node(s): "
                f"{_summarise([repr(s) for s in stuck])}"
            )
        self._order = order
        return order

    def _drop_loop_back_edges(self, readers: list[Sequence[tuple[int, int, int]]], indegree: list[int]) -> None:
        """Count a loop's ``Merge`` ready once its control inputs and any one data input are, as
        TensorFlow's import does (:func:`~.toposort.drop_loop_back_edges`).  ``readers`` is left as it is."""
        drop_loop_back_edges(self.ops, readers, self.inputs, indegree)

    def release_tables(self, *, keep_consumers: bool = False) -> None:
        """Let go of the tables built on use (consumers, op table, order, positions); a later
        query builds them again.  ``keep_consumers``: all but the consumers."""
        self.__dict__.pop("position", None)
        if not keep_consumers:
            self.__dict__.pop("consumers", None)
        self._by_op = None
        self._order = None

    @cached_property
    def position(self) -> list[int]:
        """Position of every node in :meth:`topological_order`."""
        pos = [0] * len(self.nodes)
        for k, i in zip(self.node_ids(), self.topological_order(), strict=True):
            pos[i] = k
        return pos

    def attr(self, name: str, key: str, default: Any = None) -> Any:
        """The raw AttrValue ``key`` of node ``name``, or ``default``."""
        node = self.node(name)
        return node.attr.get(key, default)
