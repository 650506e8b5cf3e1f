"""The Python API: :func:`fuse` mirrors ``scopefusion run``."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence, Union

from .core.errors import ScopeFusionError
from .core.graph_io import LoadedModel, load_model
from .core.options import FusionOptions, PassList, parse_pass_list
from .core.pass_manager import ScopePassManager
from .core.report import FusionReport
from .plugins.registry import Registry, load_registry

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

ModelLike = Union[str, "os.PathLike[str]", "GraphDef", LoadedModel]


@dataclass
class FuseResult:
    """What :func:`fuse` returns: the graph (in the requested form) and the report."""

    graph_def: "GraphDef"
    report: FusionReport
    fused_graph_def: "GraphDef"

    def __iter__(self):  # allows ``graph, report = fuse(...)``
        yield self.graph_def
        yield self.report


def _as_model(model: ModelLike, signature: str | None) -> LoadedModel:
    if isinstance(model, LoadedModel):
        return model
    if isinstance(model, (str, os.PathLike)):
        return load_model(model, signature)
    from tensorflow.core.framework import graph_pb2

    if isinstance(model, graph_pb2.GraphDef):
        copy = graph_pb2.GraphDef()
        copy.CopyFrom(model)  # never change the caller's graph
        return LoadedModel(copy, "<GraphDef>", "graph_def")
    raise ScopeFusionError(f"cannot fuse a {type(model).__name__}; give a path or a GraphDef")


def fuse(
    model: ModelLike,
    *,
    enable_scope_fusion_passes: PassList = None,
    emit: str = "fused",
    outputs: Sequence[str] | str | None = None,
    strict: bool = False,
    registry: Registry | None = None,
    block_plugins: Sequence[str] = (),
    signature: str | None = None,
) -> FuseResult:
    """Fuse a model (a path or an in-memory ``GraphDef``, which is not modified).

    ``emit="fused"`` returns fused ops as nodes of their own type;
    ``emit="tf"`` returns the TensorFlow-runnable form in which every fused
    node calls its reference implementation.
    """
    options = FusionOptions(
        enable_scope_fusion_passes=parse_pass_list(enable_scope_fusion_passes),
        emit=emit,
        outputs=parse_pass_list(outputs),
        strict=strict,
    )
    registry = registry or load_registry(block=block_plugins, strict=strict)
    loaded = _as_model(model, signature)
    if not options.outputs and loaded.outputs:
        options.outputs = [o[:-2] if o.endswith(":0") else o for o in loaded.outputs]
    manager = ScopePassManager(registry.passes, registry.fused_ops, options)
    outcome = manager.run(loaded.graph_def)
    report = outcome.report
    report.overrides = list(registry.overrides)
    report.plugin_errors = list(registry.errors)
    report.inputs = list(loaded.inputs)
    fused_graph = outcome.graph_def
    graph = fused_graph
    if emit == "tf":
        from .core.tf_form import to_tf_runnable

        t0 = time.perf_counter()
        graph = to_tf_runnable(fused_graph, registry.fused_ops)
        report.stage_seconds["emit_tf"] = time.perf_counter() - t0
    return FuseResult(graph, report, fused_graph)
