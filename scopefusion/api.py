"""The Python API: :func:`fuse` mirrors ``scopefusion run``, :func:`verify` ``scopefusion verify`` and
:func:`partition` ``scopefusion partition`` (the placement only: nothing is fused, nothing written; a
mixed *fusion* run is ``fuse(model, mix_compile_mode=True, ...)``)."""
from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, Union


from .core.errors import OptionError, ScopeFusionError
from .core.fusion.options import EMIT_FORMS, FusionOptions, PassList, parse_pass_list
from .core.fusion.pipeline import FusionOutcome, FusionPipeline
from .core.fusion.report import FusionReport
from .core.functions import fuse_library, join_reports, library_op_counts
from .core.functions.prune import called_functions, drop_uncalled
from .core.graph.input_shapes import declare_input_shapes, parse_shape_spec
from .core.graph.index import GraphIndex, no_gc
from .core.graph.io import LoadedModel, load_model, take_columns
from .core.graph.model_input import ModelLike, as_model
from .core.graph.output_ports import check_tensor_names
from .core.graph.vocabulary import NON_OUTPUT_SINKS
from .core.graph_fusion.base_pass import FUSION_TYPES
from .core.graph_fusion.engine import GraphFusionEngine
from .core.graph_fusion.device_passes import DEVICE_PASSES
from .core.graph_fusion.switch import FusionSwitch
from .core.parameters import ParameterError
from .core.partition import (MixedResult, MixedRun, PartitionReport, build_report, partition_request, place,
                             supported_ops_for)
from .core.partition.boundary import Tensor, default_graph_outputs
from .core.partition.errors import close_names
from .core.partition.mixed import graph_output_tensors
from .core.partition.segments import tf_calls
from .core.partition.request import InOutPairLike, SessionLike
from .core.scope.pass_manager import ScopePassManager
from .core.options import SESSION_ONLY, NpuOptions
from .core.options.render import render_value
from .core.options.gears import PLACEHOLDER_INPUTS, declared_shapes
from .core.options.record import record_options, recorded_only
from .core.verify import verify as core_verify
from .core.verify.tf_form import to_tf_runnable
from .core.version import installed_versions
from .explain.hints import add_hints
from .report.html import html_report
from .plugins.blocked import check_enabled_passes
from .plugins.registry import Registry, load_registry

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

    from .core.fusion.fused_ops import FusedOpDef
    from .core.graph.graph_scan import GraphColumns
    from .core.verify.verify import VerifyResult

SwitchLike = Union[str, "os.PathLike[str]", FusionSwitch, None]
ShapesLike = Union[str, Mapping[str, Sequence[Union[int, None]]], None]


@dataclass
class FuseResult:
    """What :func:`fuse` returns: the graph (in the requested form) and the report."""

    graph_def: "GraphDef"
    report: FusionReport
    fused_graph_def: "GraphDef"
    #: mixed computation (``mix_compile_mode``): the placement report, the standalone segments and the
    #: TensorFlow-runnable form of the partitioned graph
    partition: MixedResult | None = None
    #: the model fused: its path, or how an in-memory model was given (``<GraphDef>``, ``<Keras model m>``)
    source: str = ""

    def __iter__(self):  # allows ``graph, report = fuse(...)``
        yield self.graph_def
        yield self.report

    def __repr__(self) -> str:  # never the graph itself: a notebook shows this line
        form = "tf" if self.graph_def is not self.fused_graph_def else "fused"
        mixed = f"; {len(self.partition.segment_graphs)} segment(s)" if self.partition is not None else ""
        return f"<FuseResult {self.source or 'model'}: {self.report.summary()}{mixed}; graph in the {form} form>"

    def _repr_html_(self) -> str:
        """The run's HTML page (as ``scopefusion run --html``), for Jupyter."""
        return html_report(self.report, self.source or "model")


def load(model: ModelLike, *, signature: str | None = None) -> LoadedModel:
    """Any model :func:`fuse` takes, loaded (a SavedModel or an in-process model frozen to constants)
    with the inputs and outputs found in it, without fusing it: a ``.pb`` / ``.pbtxt`` file, a SavedModel
    directory (or a folder with one below it), a ``GraphDef``, a Keras model, a ``tf.function`` with an
    input signature, a concrete function or a ``tf.Module``."""
    return as_model(model, signature)


def load_switch(value: SwitchLike) -> FusionSwitch:
    """A fusion switch from a file path (or an already loaded one); none: every graph pass on."""
    if value is None or value == "":
        return FusionSwitch.default()
    if isinstance(value, FusionSwitch):
        return value
    return FusionSwitch.load(value)


def switch_warnings(switch: FusionSwitch, registry: Registry) -> list[str]:
    """Names in the switch file that match no registered graph pass: the reference's passes that exist
    only on its device (what they are, why none is here), others with close matches."""
    known = {t: [p.name for p in registry.graph_passes if p.fusion_type == t] for t in FUSION_TYPES}
    return switch.unknown_name_warnings(known, DEVICE_PASSES)


def _from_session(name: str, given: Any, session: Any, sources: dict[str, str]) -> Any:
    """An option given as an argument wins; else the session configuration's value if it sets the
    option; else None (the run's own default).  ``sources`` records which source set it."""
    if given is not None and given != [] and given != "":
        sources[name] = "argument"
        return given
    if session.source(name) == "set":
        sources[name] = "session configuration"
        value = getattr(session, name)
        return list(value) if isinstance(value, tuple) else value
    return None


def _input_shapes(given: ShapesLike, session: NpuOptions, sources: dict[str, str]) -> dict[str, list[int | None]]:
    """The declared input shapes: the argument's, else the configuration's ``input_shape`` when
    its dynamic inputs are placeholders (``dynamic_node_type`` 1)."""
    if given is not None and given != "" and given != {}:
        sources["input_shape"] = "argument"
        return parse_shape_spec(given)
    if session.source("input_shape") == "set" and session.dynamic_node_type == PLACEHOLDER_INPUTS:
        sources["input_shape"] = "session configuration"
        return declared_shapes(session)
    return {}


def build_pipeline(registry: Registry, options: FusionOptions, switch: FusionSwitch) -> FusionPipeline:
    """The stages of a run: scope fusion, then graph fusion, then UB fusion."""
    engines: list[Any] = [ScopePassManager(registry.passes, registry.fused_ops, options)]
    for fusion_type in FUSION_TYPES:
        engines.append(GraphFusionEngine(registry.graph_passes, registry.fused_ops, options, switch, fusion_type))
    return FusionPipeline(engines, registry.fused_ops, options)


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
    fusion_switch_file: SwitchLike = None,
    pass_timeout: float | None = None,
    mix_compile_mode: bool | None = None,
    in_out_pair: InOutPairLike = None,
    in_out_pair_flag: bool | None = None,
    supported_ops_file: str | os.PathLike[str] | None = None,
    session_options: SessionLike = None,
    config: SessionLike = None,
    strict_options: bool = False,
    input_shapes: ShapesLike = None,
    progress: Callable[[str], None] | None = None,
    hints: bool = True,
    keep_places: bool = False,
    functions: bool = True,
) -> FuseResult:
    """Fuse a model (a path or an in-memory ``GraphDef``, which is not modified).

    ``emit="fused"`` returns fused ops as nodes of their own type;
    ``emit="tf"`` returns the TensorFlow-runnable form in which every fused
    node calls its reference implementation.  ``fusion_switch_file`` turns graph
    passes on or off (a path, or a loaded :class:`FusionSwitch`); ``pass_timeout`` stops and
    reports a pass that runs longer than that many seconds.
    ``mix_compile_mode=True`` partitions the graph between the back end and TensorFlow first
    (``in_out_pair``, ``in_out_pair_flag``, ``supported_ops_file``; ``session_options``: NpuOptimizer
    options or a ConfigProto file giving them, which explicit values override), fuses inside the
    back end's segments only and cuts each segment out into a call node (see ``result.partition``).
    ``config`` (same as ``session_options``; a ``ConfigProto`` object, a file holding one, or
    :class:`~scopefusion.core.options.NpuOptions`): a session configuration whose fusion options
    (``enable_scope_fusion_passes``, ``fusion_switch_file``, ``graph_run_mode``, ``use_off_line``,
    ``input_shape``) apply unless an argument gives the same option; the options only a back end
    uses are written into the output graph (see :func:`~scopefusion.core.options.record.record_options`).
    A key outside the option table is a warning in the report (``strict_options=True``: an error).
    ``input_shapes`` (``"data:-1,128;mask:-1,128"`` or a mapping; -1 or None: dynamic) declares the
    inputs' shapes for shape inference; the fused graph's placeholders carry them.
    ``progress``, if given, hears what the run is doing (a line per step, for a progress display).
    ``hints=False`` skips trying the passes the run left out for hints (about a tenth of a run's time).
    ``keep_places=True`` records in the report the place of every fused op, refusal and near miss (the
    nodes as their stage saw them, capped; ``place`` in the JSON report), which drawings of the run need.
    ``functions=True`` also fuses inside every function of the graph's library (loop and branch
    bodies, called functions), each as a graph of its own with the same passes and checks, keeping
    its signature; ``functions=False`` leaves the library as it is.
    Invalid values raise :class:`~scopefusion.core.parameters.ParameterError` naming the parameter.
    """
    if emit not in EMIT_FORMS:
        raise ParameterError("emit", f"must be one of {', '.join(EMIT_FORMS)}, not {emit!r}")
    if config is not None and session_options is not None:
        raise ParameterError("config", "give the session configuration once: config or session_options, not both")
    configured = config if config is not None else session_options
    request = partition_request(mix_compile_mode=mix_compile_mode, in_out_pair=in_out_pair,
                                in_out_pair_flag=in_out_pair_flag, supported_ops_file=supported_ops_file,
                                session=configured, strict_options=strict_options)
    run = _settings(request, configured is not None, input_shapes=input_shapes,
                    enable_scope_fusion_passes=enable_scope_fusion_passes, emit=emit, outputs=outputs, strict=strict,
                    fusion_switch_file=fusion_switch_file, pass_timeout=pass_timeout, registry=registry,
                    block_plugins=block_plugins)
    pipeline = build_pipeline(run.registry, run.options, run.switch)
    pipeline.progress = progress
    pipeline.options.keep_places = keep_places
    loaded = as_model(model, signature)
    columns = take_columns(loaded)  # for the first index: the pipeline's, or a mixed run's placement
    check_tensor_names([loaded.graph_def], run.options.outputs, "outputs")
    if not run.options.outputs and loaded.outputs:
        pipeline.options.outputs = [o[:-2] if o.endswith(":0") else o for o in loaded.outputs]
    declared = declare_input_shapes(loaded.graph_def, run.shapes)
    if run.mixed is not None:
        pipeline.options.fusible_nodes = run.mixed.place(loaded.graph_def, columns)
        columns = None  # the placement's index holds them
    outcome = _fuse_graph_and_library(pipeline, loaded.graph_def, run, progress, functions, columns)
    report = _complete_report(outcome, run, loaded, declared)
    if hints:
        t0 = time.perf_counter()
        if progress is not None:
            progress("trying the passes left out, for hints")
        add_hints(report, outcome.graph_def, run.registry, pipeline.options, run.switch)
        report.stage_seconds["hints"] = time.perf_counter() - t0
    result = _result(outcome.graph_def, report, run, emit)
    result.source = loaded.source
    return result


def _fuse_graph_and_library(pipeline: FusionPipeline, graph_def: "GraphDef", run: "_Settings",
                            progress: Callable[[str], None] | None, functions: bool,
                            columns: "GraphColumns | None" = None) -> FusionOutcome:
    """Fuse inside the library's functions (unless ``functions`` is false), then the graph itself:
    a pass over the graph's loops (DynamicRNN) reads their bodies fused.  Functions the fusion
    left uncalled are removed; the report holds both, and the library's op counts.  ``columns``:
    the graph's nodes as read from its file (the library's fusion leaves the nodes as they are)."""
    called = called_functions(graph_def)
    library_before = library_op_counts(graph_def)
    library_report = _fuse_functions(graph_def, run, progress) if functions else None
    outcome = pipeline.run(graph_def, columns=columns)
    outcome.report.removed_functions = drop_uncalled(outcome.graph_def, called)
    if library_report is not None:
        join_reports(outcome.report, library_report)
    outcome.report.function_op_counts_before = library_before
    outcome.report.function_op_counts_after = library_op_counts(outcome.graph_def)
    return outcome


def _fuse_functions(graph_def: "GraphDef", run: "_Settings",
                    progress: Callable[[str], None] | None) -> FusionReport | None:
    """Fuse inside the library's functions with the run's passes and options (no outputs of the
    graph's own: each body's results are its outputs), before the graph itself; what was done
    is in the returned report.  A mixed run leaves them alone: the placement covers the graph's
    nodes only."""
    if not graph_def.library.function:
        return None
    report = FusionReport()
    if run.mixed is not None:
        report.warnings.append("mixed computation places the graph's own nodes only: the functions of "
                               "its library were left alone")
        return report
    options = dataclasses.replace(run.options, outputs=[], fusible_nodes=None)

    def fuse_body(body: "GraphDef") -> Any:
        return build_pipeline(run.registry, options, run.switch).run(body)

    fuse_library(graph_def, fuse_body, run.registry.fused_ops, report, progress)
    return report


@dataclass
class _Settings:
    """Everything a run was asked for, checked: what the arguments and the session
    configuration say, and which source set each option."""

    session: NpuOptions
    configured: bool
    sources: dict[str, str]
    shapes: dict[str, list[int | None]]
    options: FusionOptions
    switch: FusionSwitch
    registry: Registry
    mixed: MixedRun | None


def _settings(request: Any, configured: bool, *, input_shapes: ShapesLike, enable_scope_fusion_passes: PassList,
              emit: str, outputs: Any, strict: bool, fusion_switch_file: SwitchLike, pass_timeout: float | None,
              registry: Registry | None, block_plugins: Sequence[str]) -> _Settings:
    """The run's settings; an argument wins over the session configuration's value."""
    session = request.session
    sources: dict[str, str] = {}
    shapes = _input_shapes(input_shapes, session, sources)
    enabled = _from_session("enable_scope_fusion_passes", enable_scope_fusion_passes, session, sources)
    fusion_switch_file = _from_session("fusion_switch_file", fusion_switch_file, session, sources)
    options = FusionOptions(
        enable_scope_fusion_passes=parse_pass_list(enabled),
        emit=emit,
        outputs=parse_pass_list(outputs),
        strict=strict,
        fusion_switch_file=None if fusion_switch_file is None or isinstance(fusion_switch_file, FusionSwitch)
            else os.fspath(fusion_switch_file),
        pass_timeout=pass_timeout,
        training=_from_session("graph_run_mode", None, session, sources) == 1,
    )
    switch = load_switch(fusion_switch_file)  # a bad switch file is an error before any work
    registry = registry or load_registry(block=block_plugins, strict=strict)
    switch = switch.with_aliases(registry.aliases("graph"))  # the reference's pass names
    options.enable_scope_fusion_passes = registry.canonical_names(options.enable_scope_fusion_passes, "scope")
    if _from_session("use_off_line", None, session, sources) is False:  # the configuration fuses nothing
        registry = dataclasses.replace(registry, passes=[], graph_passes=[])
    mixed = MixedRun.for_request(request, registry.supported_ops, registry.fused_ops)
    check_enabled_passes(registry, options.enable_scope_fusion_passes)
    return _Settings(session, configured, sources, shapes, options, switch, registry, mixed)


def _complete_report(outcome: Any, run: _Settings, loaded: LoadedModel,
                     declared: Mapping[str, Sequence[int | None]]) -> FusionReport:
    """The pipeline's report with what the run adds: option sources, declared shapes, the
    options recorded for a back end (on a node of their own unless the graph is partitioned),
    plugins' overrides and errors, warnings, the graph's inputs."""
    report = outcome.report
    report.option_sources = run.sources
    report.input_shapes = {n: [-1 if d is None else d for d in dims] for n, dims in declared.items()}
    if run.configured:
        report.warnings[:0] = session_warnings(run.session)
        report.default_options = {n: render_value(n, getattr(run.session, n)) for n in run.session.defaults_filled()}
        report.unknown_options = list(run.session.unknown)
        if not run.session.use_off_line:
            report.fusion_off = "use_off_line = False in the session configuration: fusion is off, no pass ran"
        report.recorded_options = recorded_only(run.session)
        if run.mixed is None:  # a mixed run writes them on each segment's call node
            report.options_node = record_options(outcome.graph_def, run.session)
            report.nodes_after += 1
    report.overrides = list(run.registry.overrides)
    report.plugin_errors = list(run.registry.errors)
    report.warnings[:0] = switch_warnings(run.switch, run.registry)
    if not run.shapes and run.session.source("input_shape") == "set":
        report.warnings.append("input_shape describes the dataset's inputs (dynamic_node_type 0), not "
                               "placeholders: not declared for shape inference")
    report.inputs = list(loaded.inputs)
    report.versions = installed_versions()
    return report


def session_warnings(session: NpuOptions) -> list[str]:
    """What a run warns about a session configuration: its reader's warnings (keys outside the
    table, values counted as off) and the options only :class:`scopefusion.Session` acts on."""
    only = [n for n in session.given if n in SESSION_ONLY]
    lines = list(session.warnings)
    if only:
        lines.append(f"{', '.join(only)}: not acted on by a run, which writes a graph and runs nothing; "
                     "scopefusion.Session acts on them (recorded with the other options)")
    return lines


def _result(fused_graph: "GraphDef", report: FusionReport, run: _Settings, emit: str) -> FuseResult:
    """The graph in the requested form (the partition cut out in a mixed run)."""
    fused_ops = run.registry.fused_ops
    if run.mixed is not None:
        cut = run.mixed.finish(fused_graph, report.outputs, lambda g: to_tf_runnable(g, fused_ops))
        report.stage_seconds.update(cut.result.report.seconds)
        return FuseResult(cut.runnable if emit == "tf" else cut.fused, report, cut.fused, cut.result)
    graph = fused_graph
    if emit == "tf":
        t0 = time.perf_counter()
        graph = to_tf_runnable(fused_graph, fused_ops)
        report.stage_seconds["emit_tf"] = time.perf_counter() - t0
    return FuseResult(graph, report, fused_graph)


def verify(original: Any, fused: Any, *, fused_ops: Mapping[str, "FusedOpDef"] | None = None,
           registry: Registry | None = None, **options: Any) -> "VerifyResult":
    """Run ``original`` and ``fused`` in TensorFlow on the same feeds and compare every output.
    A mixed run's output in fused form runs each segment's function in its ``GeOp`` call's place.

    The fused graph's fused ops run the reference implementations of ``fused_ops``
    (default: those of ``registry``, or of the installed plugins).  Other keyword
    arguments are those of :func:`scopefusion.core.verify.verify`.
    """
    if fused_ops is None:
        fused_ops = (registry or load_registry()).fused_ops
    if isinstance(fused, (str, os.PathLike)):
        fused = load_model(fused)
    called = tf_calls(getattr(fused, "graph_def", fused))  # a mixed run's fused form: GeOp calls
    return core_verify(original, fused if called is None else called, fused_ops=fused_ops, **options)


# -- mixed computation: the placement only (``scopefusion partition``) -------------------------
def _partition_graph(model: ModelLike, signature: str | None) -> tuple["GraphDef", list[str]]:
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
    strict_options: bool = False,
) -> PartitionReport:
    """Where a mixed run would place every node of ``model`` (mixed mode is implied).

    ``in_out_pair`` (``"[[['a', 'b'], ['c']]]"`` or the lists themselves) and ``in_out_pair_flag``
    choose ranges as the session options do; ``supported_ops_file`` and the installed plugins
    say what the back end runs; ``session_options`` (NpuOptimizer options, or a ConfigProto file
    giving them) supplies whatever is not given here.  ``outputs`` are the graph's outputs (default:
    its sinks), which the report lists among the segments' results.
    """
    request = partition_request(mix_compile_mode=True, in_out_pair=in_out_pair, in_out_pair_flag=in_out_pair_flag,
                                supported_ops_file=supported_ops_file, session=session_options,
                                strict_options=strict_options)
    registry = registry or load_registry(block=block_plugins)
    supported = supported_ops_for(request, registry.supported_ops, registry.fused_ops)
    graph_def, model_outputs = _partition_graph(model, signature)
    wanted = [o.strip() for o in outputs.split(",") if o.strip()] if isinstance(outputs, str) else list(outputs or ())
    with no_gc():
        placement = place(graph_def, supported, request, registry.fused_ops)
        tensors = _outputs(placement.index, wanted or [o[:-2] if o.endswith(":0") else o for o in model_outputs])
        return build_report(placement, tensors)
