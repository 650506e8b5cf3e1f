"""Each node's data inputs against what its op takes (:mod:`.op_typing`): as many as it takes,
each carrying the dtype it takes there.

Made for a whole graph at once and linear in its edges: the dtypes every input must carry are
laid end to end, the dtype each input carries is looked up by the input's text, and the two
lists are compared at C speed; only the inputs that differ (or read a port other than 0) are
looked at one by one.  A node whose op is unknown, or whose dtypes cannot be told, is taken as
it is.
"""
from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate, chain, compress, repeat
from operator import ne
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from .op_typing import NodeTypes
from .vocabulary import dtype_name, parse_input

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.node_def_pb2 import NodeDef


def _first_output(types: NodeTypes) -> int:
    return types.outputs[0] if types.outputs else 0


def _text(text: str) -> str:
    return repr(text if len(text) <= 80 else f"{text[:40]}...{text[-40:]}")


def check_edges(nodes: Sequence["NodeDef"], names: Sequence[str], types: Sequence[NodeTypes],
                counts: Sequence[int], flat: Sequence[str], report: Callable[[int, str], None],
                index: Mapping[str, int] | None = None) -> None:
    """Report (``report(node position, problem)``) every node with another number of data
    inputs than its op takes, and every data input carrying another dtype than the op takes
    there.  ``types``: each node's :class:`NodeTypes`; ``counts``: each node's number of inputs
    (control inputs too); ``flat``: every node's inputs, end to end; ``index``: the position of
    each name (a repeated name: its last node's), when the caller holds it."""
    # the few distinct NodeTypes looked up by identity: hashing a NamedTuple hashes all it holds
    keys = list(map(id, types))
    distinct = {key: t for key, t in zip(keys, types, strict=True)}
    length_of = {key: (len(t.inputs) if t.inputs is not None else -1) for key, t in distinct.items()}
    per_node: list[tuple[int, ...] | None] = [t.inputs for t in types]
    # nodes whose input count is not the plain one: control inputs, unknown ops, wrong counts
    for i in compress(range(len(nodes)), map(ne, counts, map(length_of.__getitem__, keys))):
        wanted = per_node[i]
        if wanted is None:
            per_node[i] = (0,) * counts[i]
            continue
        data = sum(1 for text in nodes[i].input if text[:1] != "^")
        if data != len(wanted):
            report(i, f"it has {data} data input(s), its op {nodes[i].op} takes {len(wanted)}")
        per_node[i] = (wanted + (0,) * counts[i])[:counts[i]]
    expected = list(chain.from_iterable(per_node))  # type: ignore[arg-type]  # each None replaced above
    if len(expected) != len(flat):  # not the inputs of these nodes: nothing to compare
        return
    first = {key: _first_output(t) for key, t in distinct.items()}
    if index is None:
        carried = dict(zip(names, map(first.__getitem__, keys), strict=True))
        actual = list(map(carried.get, flat))
    else:  # the same through the name table at hand (a repeated name: its last node, as in a dict)
        firsts: list[int | None] = list(map(first.__getitem__, keys))
        firsts.append(None)  # what an input naming no node carries
        actual = list(map(firsts.__getitem__, map(index.get, flat, repeat(len(names)))))
    odd = list(compress(range(len(flat)), map(ne, actual, expected)))
    if not odd:
        return
    table = index
    ends = list(accumulate(counts))
    for k in odd:
        want, got = expected[k], actual[k]
        if not want:
            continue
        text = flat[k]
        if got is None:  # a port other than 0, or no node's name
            if text[:1] == "^":
                continue
            if table is None:
                table = dict(zip(names, range(len(names)), strict=True))
            name, port = parse_input(text)
            producer = table.get(name)
            outputs = types[producer].outputs if producer is not None else None
            got = outputs[port] if outputs is not None and 0 <= port < len(outputs) else 0
        if got and got != want:
            i = bisect_right(ends, k)
            slot = k - (ends[i - 1] if i else 0)
            report(i, f"input {slot} {_text(text)} carries {dtype_name(got)}, its op {nodes[i].op} "
                      f"takes {dtype_name(want)} there")


__all__ = ["check_edges"]
