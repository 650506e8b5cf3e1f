"""One fusion of a session's graph, imported into TensorFlow and ready to run.

:func:`fuse_session_graph` fuses the user's graph as the session options say,
keeping what the session's runs need: every tensor fetched so far stays a
graph output; every node fed or run as a target so far, every placeholder and
every variable-related node (see :mod:`scopefusion.session.graph_state`)
is left out of every fusion.  With ``mix_compile_mode`` the graph is placed first
by the same :class:`~scopefusion.core.partition.mixed.MixedRun` a mixed ``run`` and
``fuse()`` use (``in_out_pair``, ``in_out_pair_flag``, the registry's supported ops),
and only the nodes placed on the device may be fused; the host nodes run as they
are.  The TensorFlow-runnable form of the result runs
in a TensorFlow session of its own (:class:`FusedSessionGraph`).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..api import build_pipeline
from ..core.fusion.options import FusionOptions
from ..core.fusion.report import FusionReport
from ..core.graph.index import GraphIndex
from ..core.graph.vocabulary import parse_input
from ..core.graph_fusion.engine import TRAINING_SKIP
from ..core.graph_fusion.switch import FusionSwitch
from ..core.partition import PartitionReport, build_report
from ..core.partition.mixed import MixedRun, graph_output_tensors
from .dump import file_stems
from .graph_state import move_out_of_scopes, restore_names, sink_outputs, state_nodes
from ..core.options.options import NpuOptions
from .probes import FusedNode, fused_nodes, loop_nodes, stock_fused_nodes
from .requests import Request, node_of
from ..core.verify.tf_form import ORIGINAL_OP_ATTR, to_tf_runnable
from ..plugins.registry import Registry

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

PLACEHOLDER_OPS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})


@dataclass
class Wanted:
    """What the session's runs have asked for so far."""

    #: Fetched tensors (``name:port``): graph outputs of every fusion.
    outputs: set[str] = field(default_factory=set)
    #: Fed nodes and target ops: left out of every fusion.
    protected: set[str] = field(default_factory=set)

    def add(self, request: Request) -> None:
        self.outputs.update(request.of_kind("tensor"))
        self.protected.update(node_of(t) for t in request.feeds)
        self.protected.update(request.of_kind("op"))


def full_name(tensor: str) -> str:
    """``a`` -> ``a:0``; ``a:1`` stays."""
    name, port = parse_input(tensor)
    return f"{name}:{port}"


class FusedSessionGraph:
    """A fused graph in its runnable form, imported into a graph and session of its own."""

    def __init__(self, runnable: "GraphDef", fused: "GraphDef", report: FusionReport, version: int,
                 outputs: Iterable[str], original_ops: dict[str, str], config: Any,
                 placement: PartitionReport | None = None) -> None:
        import tensorflow as tf  # deferred: TensorFlow costs seconds to import

        self.graph_def = runnable
        self.fused_graph_def = fused
        self.report = report
        #: Mixed computation: where the graph's nodes were placed (None otherwise).
        self.placement = placement
        self.version = version
        self.outputs = {full_name(t) for t in outputs}
        self.unchanged = {n.name for n in fused.node if original_ops.get(n.name) == n.op}
        self.graph = tf.Graph()
        with self.graph.as_default():
            tf.compat.v1.import_graph_def(runnable, name="")
        stock = stock_fused_nodes(self.graph, runnable, ((f.name, f.type) for f in report.fused), ORIGINAL_OP_ATTR)
        nodes = fused_nodes(runnable, ORIGINAL_OP_ATTR) + stock
        loops = loop_nodes(runnable)
        #: Fused op name -> its type.
        self.fused = {n.name: n.type for n in nodes}
        #: Fused op name -> its (fetchable) output tensors.
        self.fused_outputs = {n.name: n.outputs for n in nodes}
        #: The fused ops whose tensors a run can fetch (not those inside while loops).
        self.watchable: list[FusedNode] = [n for n in nodes if n.name not in loops]
        self.in_loops = [n.name for n in nodes if n.name in loops]
        #: Fused op name -> the ``<type>.<name>`` its dump files are named by.
        self.stems = file_stems(self.watchable)
        #: Node name -> op type, a fused op's type for fused ops (for profiles).
        self.node_ops = {n.name: self.fused.get(n.name, n.op) for n in runnable.node}
        self.session = tf.compat.v1.Session(graph=self.graph, config=config)

    def missing(self, request: Request) -> list[str]:
        """What ``request`` names that this fused graph does not hold as the user's graph has it."""
        out = [t for t in request.of_kind("tensor") if t not in self.outputs and node_of(t) not in self.unchanged]
        out += [op for op in request.of_kind("op") if op not in self.unchanged]
        return out + [t for t in request.feeds if node_of(t) not in self.unchanged]

    @property
    def training_skipped(self) -> list[str]:
        return [p.name for p in self.report.passes if p.switch == TRAINING_SKIP]

    def close(self) -> None:
        self.session.close()


def fuse_session_graph(graph: Any, registry: Registry, switch: FusionSwitch, options: NpuOptions,
                       wanted: Wanted, config: Any, mixed: MixedRun | None = None) -> FusedSessionGraph:
    """Fuse the user's ``graph`` as it is now (with ``mixed``, inside its device nodes only); see
    the module docstring."""
    from tensorflow.core.framework import graph_pb2  # deferred: TensorFlow costs seconds to import

    version = graph.version
    original = graph.as_graph_def()
    index = GraphIndex(original)
    state = state_nodes(index)
    placeholders = {name for name, op in zip(index.names, index.ops, strict=True) if op in PLACEHOLDER_OPS}
    outputs = sorted({full_name(t) for t in sink_outputs(index, state)} | wanted.outputs)
    work = graph_pb2.GraphDef()
    work.CopyFrom(original)
    originals = move_out_of_scopes(work, state)
    moved = {old: new for new, old in originals.items()}

    def renamed(tensor: str) -> str:
        name, port = parse_input(tensor)
        return f"{moved.get(name, name)}:{port}"

    protected = {moved.get(n, n) for n in wanted.protected | placeholders} | set(originals)
    fusible = frozenset(n.name for n in work.node)
    placement = None
    if mixed is not None:
        fusible = frozenset(moved.get(n, n) for n in mixed.place(original))
        assert mixed.placement is not None
        placement = build_report(mixed.placement, graph_output_tensors(mixed.placement.index, outputs))
    fusion_options = FusionOptions(
        enable_scope_fusion_passes=list(options.enable_scope_fusion_passes),
        outputs=[renamed(t) for t in outputs],
        fusion_switch_file=options.fusion_switch_file,
        fusible_nodes=fusible - protected,
        training=options.graph_run_mode == 1,
    )
    outcome = build_pipeline(registry, fusion_options, switch).run(work)
    restore_names(outcome.graph_def, originals)
    report = outcome.report
    report.outputs = outputs
    report.overrides = list(registry.overrides)
    report.plugin_errors = list(registry.errors)
    runnable = to_tf_runnable(outcome.graph_def, registry.fused_ops)
    original_ops = {n.name: n.op for n in original.node}
    return FusedSessionGraph(runnable, outcome.graph_def, report, version, outputs, original_ops, config,
                             placement)
