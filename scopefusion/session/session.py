"""``scopefusion.Session``: a drop-in for ``tf.compat.v1.Session`` in online
inference that fuses its graph as the NpuOptimizer entry of its ``ConfigProto`` says::

    config = tf.compat.v1.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["use_off_line"].b = True
    custom_op.parameter_map["enable_scope_fusion_passes"].s = tf.compat.as_bytes("ScopeDecodeBboxV2Pass")
    config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
    with scopefusion.Session(config=config) as sess:
        boxes = sess.run("Postprocessor/Decode", feeds)   # a fused op, fetched by its name

The options are read and checked when the session is built: a bad one is one
:class:`~scopefusion.core.options.SessionOptionError`, before any other work.
The first ``run`` fuses the graph; runs execute its TensorFlow-runnable form
(each fused op runs its reference implementation) in a TensorFlow session of
its own, configured by the same ``ConfigProto`` less its NpuOptimizer entries.

Decisions:

* **Configuration.** ``config=None`` means every option at the reference's
  default (``graph_run_mode`` 1 among them: pass ``graph_run_mode=0`` for
  inference).  A ``ConfigProto`` without an NpuOptimizer entry is an error
  rather than a session that silently fuses nothing: the entry's name is most
  likely misspelt.
* **Graph.** ``graph=None`` is the default graph at construction.  ``sess.graph``
  is the user's graph, unfused: fetches and feeds name its tensors and ops (a
  ``tf.Tensor``, an op, a variable, a name), and code that builds more ops on it
  (a ``Saver``, a ``tf.identity``) keeps working.  A name the graph does not
  have may be a fused op's: it fetches that op's output 0 (``name:k`` fetches
  output k).
* **Fusing again.**  Every tensor any run has fetched stays a graph output of
  the fusion, and every node any run has fed or run as a target (and every
  placeholder) stays out of it.  A run that asks for what the current fused
  graph lacks (a tensor fused away, an op absorbed), or a run after ops were
  added to the graph (``graph.version`` changed), fuses the graph again with
  everything asked for so far, and variable values carry over to the new
  TensorFlow session.  So any fetch of the original graph works, at the cost of
  one more fusion the first time it is asked for.
* **Variables.**  Variables, their initialisers and the nodes a ``Saver`` saves
  and restores with never take part in a fusion and keep their names, so
  ``global_variables_initializer()``, ``saver.save`` and ``saver.restore`` work
  on the fused graph (they run by name).
* **Steps.**  Dump and overflow steps count the runs that execute a fused op
  (runs that only initialise, save or restore variables do not count, as on the
  device, where those are graphs of their own).  Profiles are named by the
  run's number, counting every run.
* ``close()`` closes the TensorFlow sessions (a run afterwards raises
  ``RuntimeError``); ``with scopefusion.Session(...) as sess`` makes the session
  and its graph the defaults and closes it at the end.  ``use_off_line=False``
  runs the user's graph unfused, in a plain TensorFlow session.

* **Mixed computation.**  ``mix_compile_mode``, ``in_out_pair`` and
  ``in_out_pair_flag`` place the graph exactly as a mixed ``scopefusion run`` and
  ``fuse()`` do (the same :class:`~scopefusion.core.partition.mixed.MixedRun`):
  only the nodes placed on the device are fused, the host nodes run as they are
  (``report.placement`` says where each went and why).

What each option does here is in :data:`SESSION_ACTS_ON`; any other option the
configuration gives is validated and recorded (``report.not_acted_on``).  A key
outside the option table is a warning (``report.warnings``, and a Python
``UserWarning``) and is otherwise ignored; ``strict_options=True`` makes it an error.
Runs are serialised: one at a time per session.
"""
from __future__ import annotations

import os
import threading
import warnings
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

from ..core.errors import ScopeFusionError
from ..core.fusion.report import FusionReport
from ..core.parameters import ParameterError
from ..core.options import OPTION_NAMES, NpuOptions, npu_options, npu_options_from_config
from ..core.options.render import render_value
from ..core.partition import PartitionReport, PartitionRequest
from ..core.partition.mixed import MixedRun
from .dump import arrays_of, step_chosen, write_npz
from .overflow import OverflowRecord, find_overflows
from .probes import FusedNode, executed_nodes
from .requests import Request, node_of
from .step_stats import profile, write_profile
from .variables import read_variables, write_variables
from ..plugins.registry import Registry, load_registry
from .graph import FusedSessionGraph, Wanted, fuse_session_graph
from .setup import SessionOutputs, check_session_passes, session_switch, tensorflow_config

#: The options this session acts on (when the configuration gives them).
SESSION_ACTS_ON = frozenset({
    "use_off_line", "enable_scope_fusion_passes", "fusion_switch_file", "graph_run_mode", "enable_dump",
    "dump_path", "dump_step", "dump_mode", "enable_dump_debug", "dump_debug_mode", "profiling_mode",
    "profiling_options", "mix_compile_mode", "in_out_pair", "in_out_pair_flag",
})


@dataclass
class SessionReport:
    """What the session was told and what it did."""

    options: NpuOptions
    #: Options the configuration gave that this session acts on.
    acted_on: list[str]
    #: Options the configuration gave that are validated and recorded only.
    not_acted_on: list[str]
    notes: list[str] = field(default_factory=list)
    #: What reading the configuration warned about (keys outside the option table, values counted as off).
    warnings: list[str] = field(default_factory=list)
    #: Options left unset whose seed default was filled in: option -> value.
    default_options: dict[str, str] = field(default_factory=dict)
    #: Mixed computation: where the current fusion's graph was placed (None otherwise).
    placement: PartitionReport | None = None
    #: The report of the current fusion (None before the first run, or without fusion).
    fusion: FusionReport | None = None
    fusions: int = 0
    #: Fused op name -> type: the fused ops of the current fused graph.
    fused_ops: dict[str, str] = field(default_factory=dict)
    #: Graph passes skipped because ``graph_run_mode`` is 1 (training) and they are not safe for it.
    training_skipped: list[str] = field(default_factory=list)
    #: Fused ops inside while loops, whose tensors cannot be fetched: not dumped or checked.
    in_loops: list[str] = field(default_factory=list)
    dumps: list[str] = field(default_factory=list)
    overflows: list[OverflowRecord] = field(default_factory=list)
    #: The inputs and outputs of the fused ops that overflowed, one file per op and step.
    overflow_dumps: list[str] = field(default_factory=list)
    profiles: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k not in ("options", "fusion", "placement")}
        out["given"] = dict(self.options.given)
        out["placement"] = self.placement.to_dict() if self.placement is not None else None
        out["fusion"] = self.fusion.to_dict() if self.fusion is not None else None
        return out


@lru_cache(maxsize=None)
def _with_session_interface(cls: type) -> type:
    """``cls`` with TensorFlow's ``SessionInterface`` as a base too (``Saver`` checks
    for it); made at the first construction, so that importing scopefusion does not
    import TensorFlow."""
    from tensorflow.python.client.session import SessionInterface  # deferred: TensorFlow costs seconds to import

    if issubclass(cls, SessionInterface):
        return cls
    return type(cls.__name__, (cls, SessionInterface), {"__module__": cls.__module__,
                                                        "__qualname__": cls.__qualname__, "__doc__": cls.__doc__})


class Session:
    """A ``tf.compat.v1.Session`` that fuses its graph per the NpuOptimizer options
    of ``config`` (see the module docstring).  ``registry``: the passes and fused
    ops (default: the built-ins and installed plugins)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Session:
        # a class is hashable; mypy checks the instances' __hash__ against Hashable instead
        return super().__new__(_with_session_interface(cls))  # type: ignore[arg-type]

    def __init__(self, target: str = "", graph: Any = None, config: Any = None, *,
                 registry: Registry | None = None, strict_options: bool = False) -> None:
        import tensorflow as tf  # deferred: TensorFlow costs seconds to import

        if target:
            raise ParameterError("target", f"{target!r}: only the local target '' is supported")
        if graph is not None and not isinstance(graph, tf.Graph):
            raise ParameterError("graph", f"a {type(graph).__name__} is not a tf.Graph")
        self._options = npu_options() if config is None else npu_options_from_config(config, strict=strict_options)
        self._outputs = SessionOutputs.of(self._options)
        self._registry = registry or load_registry()
        self._switch = session_switch(self._options).with_aliases(self._registry.aliases("graph"))
        check_session_passes(self._registry, self._options)
        self._mixed = MixedRun.for_request(PartitionRequest(self._options), self._registry.supported_ops,
                                           self._registry.fused_ops)
        self._graph = graph if graph is not None else tf.compat.v1.get_default_graph()
        self._config = tensorflow_config(config)
        given = self._options.given
        self.report = SessionReport(self._options, [n for n in OPTION_NAMES if n in given and n in SESSION_ACTS_ON],
                                    [n for n in OPTION_NAMES if n in given and n not in SESSION_ACTS_ON])
        self.report.warnings = list(self._options.warnings)
        self.report.default_options = {n: render_value(n, getattr(self._options, n))
                                       for n in self._options.defaults_filled()}
        for line in self.report.warnings:
            warnings.warn(line, UserWarning, stacklevel=2)
        if not self._options.use_off_line:
            self.report.notes.append("use_off_line = False: the graph runs unfused")
        self._lock = threading.RLock()
        self._closed = False
        self._plain: Any = None
        self._fused: FusedSessionGraph | None = None
        self._wanted = Wanted()
        self._runs = 0
        self._step = 0
        self._contexts: list[Any] = []

    # ------------------------------------------------------------ tf.Session's interface
    @property
    def graph(self) -> Any:
        """The user's graph (unfused)."""
        return self._graph

    @property
    def graph_def(self) -> Any:
        return self._graph.as_graph_def()

    @property
    def sess_str(self) -> str:
        return ""

    @property
    def options(self) -> NpuOptions:
        """The validated NpuOptimizer options."""
        return self._options

    @property
    def fused_graph_def(self) -> Any:
        """The current fused graph (fused form); None before the first run or without fusion."""
        return self._fused.fused_graph_def if self._fused is not None else None

    def run(self, fetches: Any, feed_dict: Mapping[Any, Any] | None = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        """Run as ``tf.compat.v1.Session.run`` does, on the fused graph."""
        with self._lock:
            if self._closed:
                raise RuntimeError("Attempted to use a closed Session.")
            options, run_metadata = self._tracing(options, run_metadata)
            if not self._options.use_off_line:
                return self._run_plain(fetches, feed_dict, options, run_metadata)
            request = Request(self._graph, fetches, feed_dict)
            fused = self._prepared(request)
            request.resolve_fused(fused.fused_outputs)
            return self._run_fused(fused, request, options, run_metadata)

    def make_callable(self, fetches: Any, feed_list: Sequence[Any] | None = None,
                      accept_options: bool = False) -> Callable[..., Any]:
        """A function running ``fetches`` with its arguments fed to ``feed_list``."""
        feeds = list(feed_list or [])

        def call(*args: Any, **kwargs: Any) -> Any:
            extra = {k: kwargs[k] for k in ("options", "run_metadata") if accept_options and k in kwargs}
            return self.run(fetches, dict(zip(feeds, args, strict=True)), **extra)
        return call

    def partial_run_setup(self, fetches: Any, feeds: Any = None) -> Any:
        raise NotImplementedError("scopefusion.Session does not support partial runs")

    def partial_run(self, handle: Any, fetches: Any, feed_dict: Any = None) -> Any:
        raise NotImplementedError("scopefusion.Session does not support partial runs")

    def as_default(self) -> Any:
        """A context manager making this the default session (for ``Tensor.eval()``)."""
        from tensorflow.python.framework import stack  # deferred: TensorFlow costs seconds to import

        return stack.default_session(self)

    def close(self) -> None:
        """Close the TensorFlow sessions; closing twice is harmless."""
        with self._lock:
            for inner in (self._fused, self._plain):
                if inner is not None:
                    inner.close()
            self._fused = self._plain = None
            self._closed = True

    def __enter__(self) -> Session:
        self._contexts = [self._graph.as_default(), self.as_default()]
        for context in self._contexts:
            context.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        for context in reversed(self._contexts):
            context.__exit__(*exc_info)
        self._contexts = []
        self.close()

    # ------------------------------------------------------------------------ runs
    def _tracing(self, options: Any, run_metadata: Any) -> tuple[Any, Any]:
        if self._outputs.profiles is None:
            return options, run_metadata
        import tensorflow as tf  # deferred: TensorFlow costs seconds to import

        traced = tf.compat.v1.RunOptions()
        if options is not None:
            traced.CopyFrom(options)
        traced.trace_level = tf.compat.v1.RunOptions.FULL_TRACE
        return traced, run_metadata if run_metadata is not None else tf.compat.v1.RunMetadata()

    def _run_plain(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> Any:
        import tensorflow as tf  # deferred: TensorFlow costs seconds to import

        if self._plain is None:
            self._plain = tf.compat.v1.Session(graph=self._graph, config=self._config)
        result = self._plain.run(fetches, feed_dict, options, run_metadata)
        if self._outputs.profiles is not None:
            ops = {op.name: op.type for op in self._graph.get_operations()}
            self._write_profile(run_metadata, None, ops, {})
        self._runs += 1
        return result

    def _prepared(self, request: Request) -> FusedSessionGraph:
        """The fused graph for ``request``: the current one when it serves, else a new fusion."""
        current = self._fused
        if current is not None and current.version == self._graph.version and not current.missing(request):
            return current
        self._wanted.add(request)
        fresh = fuse_session_graph(self._graph, self._registry, self._switch, self._options, self._wanted,
                                   self._config, self._mixed)
        if current is not None:
            write_variables(fresh.session, read_variables(current.session))
            current.close()
        self._fused = fresh
        self.report.fusion, self.report.fusions = fresh.report, self.report.fusions + 1
        self.report.fused_ops = dict(fresh.fused)
        self.report.placement = fresh.placement
        self.report.training_skipped, self.report.in_loops = fresh.training_skipped, list(fresh.in_loops)
        missing = fresh.missing(request)
        if missing:
            raise ScopeFusionError(f"{missing[0]!r} is not in the fused graph although fusion was told to keep it")
        return fresh

    def _run_fused(self, fused: FusedSessionGraph, request: Request, options: Any, run_metadata: Any) -> Any:
        fetched = request.fetched_tensors()
        targets = request.of_kind("op")
        executed = executed_nodes(fused.graph_def, {node_of(t) for t in fetched} | set(targets), request.feeds)
        step = self._step if any(name in executed for name in fused.fused) else None
        watched = [n for n in fused.watchable if n.name in executed] if step is not None else []
        names = list(dict.fromkeys(fetched + self._probe_tensors(watched, step)))
        results = fused.session.run(names + targets, request.feeds, options=options, run_metadata=run_metadata)
        values = dict(zip(names, results, strict=False))  # the targets' results (None) come last
        if step is not None:
            self._after_step(fused, watched, step, values)
            self._step += 1
        if self._outputs.profiles is not None:
            self._write_profile(run_metadata, step, fused.node_ops, fused.fused)
        self._runs += 1
        return request.pack(values)

    def _probe_tensors(self, watched: Sequence[FusedNode], step: int | None) -> list[str]:
        if step is None:
            return []
        tensors = self._outputs.dump.tensors(watched, step) if self._outputs.dump is not None else []
        if self._outputs.overflow is not None:
            tensors += [t for node in watched for t in node.tensors("all")]
        return tensors

    def _after_step(self, fused: FusedSessionGraph, watched: Sequence[FusedNode], step: int,
                    values: Mapping[str, Any]) -> None:
        dump = self._outputs.dump
        if dump is not None and step_chosen(dump.steps, step):
            self.report.dumps += dump.write(watched, fused.stems, step, values)
        if self._outputs.overflow is None:
            return
        records = find_overflows(watched, step, values)
        if records:
            os.makedirs(self._outputs.overflow, exist_ok=True)
        for node in watched:
            if any(r.op == node.name for r in records):
                arrays = arrays_of(node, node.tensors("all"), values)
                self.report.overflow_dumps.append(write_npz(self._outputs.overflow, fused.stems[node.name], step,
                                                            arrays))
        self.report.overflows += records

    def _write_profile(self, run_metadata: Any, step: int | None, node_ops: Mapping[str, str],
                       fused: Mapping[str, str]) -> None:
        times = profile(run_metadata.step_stats, self._runs, step, node_ops, fused)
        self.report.profiles += write_profile(str(self._outputs.profiles), times)
