"""Why a node stays on the host: one code per node and the detail its sentence needs.

The partitioner keeps two flat lists over the graph (``why`` codes and ``detail``
values) so that placing 200k nodes allocates nothing per node beyond them; sentences are
written only for the report.
"""
from __future__ import annotations

from enum import IntEnum
from typing import Any, Sequence


class Why(IntEnum):
    """The placement of a node: on the device (``DEVICE``) or on the host, and why."""

    DEVICE = 0
    INPUT = 1           # a graph input; detail: op
    UNSUPPORTED = 2     # detail: the supported-ops table's phrase
    FUNCTION = 3        # detail: (function, node, op, phrase) of the culprit in its body
    RESOURCE = 4        # detail: (producer index or -1 for an output, op)
    MARKED = 5          # attribute _without_npu_compile
    EDGE = 6            # detail: (kind, node index it shares the edge with)
    LOOP = 7            # detail: (loop name, culprit node index)
    OUTSIDE_RANGE = 8   # in_out_pair_flag True; detail: None
    INSIDE_RANGE = 9    # in_out_pair_flag False; detail: pair number
    CONST = 10          # a constant no device node reads
    GRAPH = 11          # a graph-level rule; detail: the phrase
    DROPPED = 12        # a lone NoOp/Identity segment; detail: op


#: Short names of the codes, as the JSON report writes them.
CODE_NAMES = {
    Why.DEVICE: "device", Why.INPUT: "graph input", Why.UNSUPPORTED: "unsupported op",
    Why.FUNCTION: "unsupported function body", Why.RESOURCE: "resource", Why.MARKED: "marked",
    Why.EDGE: "edge", Why.LOOP: "loop", Why.OUTSIDE_RANGE: "outside the in/out range",
    Why.INSIDE_RANGE: "inside the in/out range", Why.CONST: "constant", Why.GRAPH: "graph rule",
    Why.DROPPED: "dropped segment",
}


def describe(code: int, detail: Any, names: Sequence[str], ops: Sequence[str]) -> str:
    """The sentence of one host node's reason."""
    why = Why(code)
    if why is Why.INPUT:
        return f"graph input ({detail}): the host feeds it"
    if why is Why.UNSUPPORTED:
        return str(detail)
    if why is Why.FUNCTION:
        function, node, op, phrase = detail
        return f"calls function {function}, whose node {node!r} ({op}) the back end does not run: {phrase}"
    if why is Why.RESOURCE:
        producer, op = detail
        if producer < 0:
            return f"outputs a resource ({op}); on the back end only VarHandleOp may"
        return f"reads a resource from {names[producer]!r} ({ops[producer]}), which is not a VarHandleOp"
    if why is Why.MARKED:
        return "marked _without_npu_compile"
    if why is Why.EDGE:
        kind, other = detail
        return f"{kind} edge with host node {names[other]!r} ({ops[other]})"
    if why is Why.LOOP:
        loop, culprit = detail
        return f"in while loop {loop!r}, which holds host node {names[culprit]!r} ({ops[culprit]})"
    if why is Why.OUTSIDE_RANGE:
        return "outside the in/out range (in_out_pair_flag True)"
    if why is Why.INSIDE_RANGE:
        return f"inside the in/out range of pair {detail} (in_out_pair_flag False)"
    if why is Why.CONST:
        return "constant read by no device node"
    if why is Why.GRAPH:
        return str(detail)
    if why is Why.DROPPED:
        return f"a lone {detail} segment is not worth a call (the reference drops it)"
    return "device"
