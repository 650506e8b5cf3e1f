"""The Python API of mixed computation: :func:`partition` mirrors ``scopefusion partition``
(the placement only: nothing is fused, nothing written).  A mixed *fusion* run is
``scopefusion.fuse(model, mix_compile_mode=True, ...)``."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Sequence, Union

from .core.errors import OptionError, ScopeFusionError
from .core.graph.index import GraphIndex, no_gc
from .core.graph.io import LoadedModel, load_model
from .core.graph.vocabulary import NON_OUTPUT_SINKS
from .core.partition import PartitionReport, build_report, partition_request, place, supported_ops_for
from .core.partition.boundary import Tensor, default_graph_outputs
from .core.partition.errors import close_names
from .core.partition.mixed import graph_output_tensors
from .core.partition.request import InOutPairLike, SessionLike
from .plugins.registry import Registry, load_registry

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

ModelLike = Union[str, "os.PathLike[str]", "GraphDef", LoadedModel]


def _graph(model: ModelLike, signature: str | None) -> tuple["GraphDef", list[str]]:
    if isinstance(model, LoadedModel):
        return model.graph_def, list(model.outputs)
    if isinstance(model, (str, os.PathLike)):
        loaded = load_model(model, signature)
        return loaded.graph_def, list(loaded.outputs)
    if hasattr(model, "node") and hasattr(model, "library"):
        return model, []
    raise ScopeFusionError(f"cannot partition a {type(model).__name__}; give a path or a GraphDef")


def _outputs(index: GraphIndex, outputs: Sequence[str]) -> list[Tensor]:
    if not outputs:
        return default_graph_outputs(index, NON_OUTPUT_SINKS)
    missing = [t for t in outputs if t.rsplit(":", 1)[0] not in index.index]
    if missing:
        hints = [f"{t!r} (close: {', '.join(map(repr, close_names(t.rsplit(':', 1)[0], index.names)))})"
                 for t in missing]
        raise OptionError(f"outputs: no node for {'; '.join(hints)}; allowed: tensors of the graph (node or node:port)")
    return graph_output_tensors(index, outputs)


def partition(
    model: ModelLike,
    *,
    in_out_pair: InOutPairLike = None,
    in_out_pair_flag: bool | str | None = None,
    supported_ops_file: str | os.PathLike[str] | None = None,
    session_options: SessionLike = None,
    outputs: Sequence[str] | str | None = None,
    registry: Registry | None = None,
    block_plugins: Sequence[str] = (),
    signature: str | None = None,
) -> PartitionReport:
    """Where a mixed run would place every node of ``model`` (mixed mode is implied).

    ``in_out_pair`` (``"[[['a', 'b'], ['c']]]"`` or the lists themselves) and ``in_out_pair_flag``
    choose ranges as the session options do; ``supported_ops_file`` and the installed plugins
    say what the back end runs; ``session_options`` (NpuOptimizer options, or a ConfigProto file
    giving them) supplies whatever is not given here.  ``outputs`` are the graph's outputs (default:
    its sinks), which the report lists among the segments' results.
    """
    request = partition_request(mix_compile_mode=True, in_out_pair=in_out_pair, in_out_pair_flag=in_out_pair_flag,
                                supported_ops_file=supported_ops_file, session=session_options)
    registry = registry or load_registry(block=block_plugins)
    supported = supported_ops_for(request, registry.supported_ops, registry.fused_ops)
    graph_def, model_outputs = _graph(model, signature)
    wanted = [o.strip() for o in outputs.split(",") if o.strip()] if isinstance(outputs, str) else list(outputs or ())
    with no_gc():
        placement = place(graph_def, supported, request, registry.fused_ops)
        tensors = _outputs(placement.index, wanted or [o[:-2] if o.endswith(":0") else o for o in model_outputs])
        return build_report(placement, tensors)
