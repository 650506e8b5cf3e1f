"""Session options written into a graph for a back end to read.

The reference copies every NpuOptimizer option onto its device call node as an
attribute ``_<option>`` (text; ``"1"``/``"0"`` for booleans, ``""`` when unset),
with ``_NpuOptimizer`` naming the optimizer.  Here the seed's defaults filled in
are named by ``_default_options`` (comma-separated), and keys outside the option
table are kept as ``_<key>`` too, named by ``_unknown_options``.  A mixed run writes them on each
segment's call node; a run that fuses the whole graph writes them on one
``NoOp`` node, :data:`RECORD_NODE`, which nothing reads and TensorFlow runs as
it runs any ``NoOp`` (attributes starting with ``_`` are left alone by
TensorFlow's importer).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .options import NpuOptions
from .render import render_value
from .table import ACTED_ON, OPTION_NAMES

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

OPTIMIZER_ATTR = "_NpuOptimizer"
#: The options whose recorded value is the seed's default (the configuration left them unset).
DEFAULTS_ATTR = "_default_options"
#: The configuration's keys outside the option table.
UNKNOWN_ATTR = "_unknown_options"
#: The node that carries the options of a run without segments (``NpuOptimizer_1`` ... if taken).
RECORD_NODE = "NpuOptimizer"


def session_attrs(session: NpuOptions) -> dict[str, str]:
    """``_<option>`` -> text for every session option, as the reference copies them."""
    out = {}
    for name, value in session.items():
        if isinstance(value, bool):
            text = "1" if value else "0"
        elif value is None or value == ():
            text = ""
        else:
            text = render_value(name, value)
        out[f"_{name}"] = text
    for name, value in session.unknown.items():
        out.setdefault(f"_{name}", "1" if value is True else "0" if value is False else
                       "" if value is None else str(value))
    out[OPTIMIZER_ATTR] = "NpuOptimizer"
    out[DEFAULTS_ATTR] = ",".join(session.defaults_filled())
    if session.unknown:
        out[UNKNOWN_ATTR] = ",".join(session.unknown)
    return out


def recorded_only(session: NpuOptions) -> list[str]:
    """The options the configuration sets that this project does not act on (a back end's), in
    the table's order."""
    return [name for name in OPTION_NAMES if name in session.given and name not in ACTED_ON]


def record_options(graph_def: "GraphDef", session: NpuOptions) -> str:
    """Append the ``NoOp`` carrying every option as ``_<option>`` to ``graph_def``; its name."""
    taken = {node.name for node in graph_def.node}
    name, k = RECORD_NODE, 0
    while name in taken:
        k += 1
        name = f"{RECORD_NODE}_{k}"
    node = graph_def.node.add()
    node.name = name
    node.op = "NoOp"
    for key, text in session_attrs(session).items():
        node.attr[key].s = text.encode("utf-8")
    return name
