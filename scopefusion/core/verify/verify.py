"""Verification: run the original and the fused graph in stock TensorFlow on
the same feeds and compare every output tensor.

A fused graph in its fused form is first turned into its TensorFlow-runnable
form, in which every fused node runs its reference implementation; so what is
checked is the port maps and attributes a back end would rely on.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from ..errors import ScopeFusionError
from ..graph.index import GraphIndex
from ..graph.io import LoadedModel, load_model
from ..graph.output_ports import check_tensor_names
from ..graph.tf_ops import is_tensorflow_op
from ..graph.vocabulary import NON_OUTPUT_SINKS
from ..parameters import ParameterError
from .execute import GraphRunner
from .feeds import (
    FeedPlan,
    InputSpec,
    check_feed_keys,
    check_int_range,
    graph_inputs,
    load_npz_feeds,
    make_feeds,
    needed_inputs,
    parse_input_shapes,
    plan_feeds,
)
from .tf_form import to_tf_runnable

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

    from ..fusion.fused_ops import FusedOpDef

#: (atol, rtol) per dtype name; integers and bools compare exactly.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "float64": (1e-6, 1e-6),
    "float16": (1e-2, 1e-2),
    "bfloat16": (1e-2, 1e-2),
}


@dataclass
class TensorComparison:
    """How one output tensor compares across all runs."""

    name: str
    shape: list[int] | None = None
    dtype: str = ""
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    atol: float = 0.0
    rtol: float = 0.0
    passed: bool = True
    note: str = ""


@dataclass
class VerifyResult:
    """The outcome of :func:`verify`; usable directly in tests."""

    outputs: list[TensorComparison] = field(default_factory=list)
    runs: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.outputs) and all(o.passed for o in self.outputs)

    @property
    def failures(self) -> list[TensorComparison]:
        return [o for o in self.outputs if not o.passed]

    def __bool__(self) -> bool:
        return self.passed

    def output(self, name: str) -> TensorComparison:
        for o in self.outputs:
            if o.name == name or o.name == f"{name}:0":
                return o
        raise KeyError(name)

    def table(self) -> str:
        """A plain-text table, one row per output."""
        rows = [("output", "shape", "dtype", "max abs err", "max rel err", "result")]
        for o in self.outputs:
            rows.append((
                o.name, "?" if o.shape is None else str(tuple(o.shape)), o.dtype or "?",
                f"{o.max_abs_error:.3g}", f"{o.max_rel_error:.3g}",
                ("pass" if o.passed else "FAIL") + (f" ({o.note})" if o.note else ""),
            ))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)

    def assert_ok(self) -> None:
        """Raise ``AssertionError`` with the table when any output differs."""
        if not self.passed:
            raise AssertionError(f"fused graph differs from the original:\n{self.table()}")

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "runs": self.runs, "notes": self.notes,
                "outputs": [asdict(o) for o in self.outputs]}


def default_outputs(graph_def: "GraphDef") -> list[str]:
    """Port 0 of every sink that is not a constant, placeholder or no-op."""
    index = GraphIndex(graph_def, validate=False)
    return [f"{index.names[i]}:0" for i in index.sinks() if index.ops[i] not in NON_OUTPUT_SINKS]


def _as_graph(model: Any) -> "GraphDef":
    if isinstance(model, LoadedModel):
        return model.graph_def
    if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
        return load_model(model).graph_def
    return model


def _tolerance(dtype: Any, atol: float | None, rtol: float | None) -> tuple[float, float]:
    base = DEFAULT_TOLERANCES.get(dtype.name, (0.0, 0.0))
    return (base[0] if atol is None else atol, base[1] if rtol is None else rtol)


def _all_nodes(graph: "GraphDef") -> Iterator[Any]:
    """The graph's nodes, then those of its library's function bodies."""
    yield from graph.node
    for function in graph.library.function:
        yield from function.node_def


def _check_ops_known(graph: "GraphDef", fused_ops: Mapping[str, "FusedOpDef"]) -> None:
    """Every op of the fused graph is a TensorFlow op or a declared fused op."""
    functions = {f.signature.name for f in graph.library.function}  # called by name
    unknown: dict[str, str] = {}
    for node in _all_nodes(graph):
        op = node.op
        if op not in fused_ops and op not in unknown and op not in functions and not is_tensorflow_op(op):
            unknown[node.op] = node.name
    if unknown:
        ops = ", ".join(f"{op} (node {name!r})" for op, name in unknown.items())
        raise ScopeFusionError(
            f"the fused graph has ops that are neither TensorFlow ops nor declared fused ops: {ops}; "
            "is the plugin that declares them installed (scopefusion list --plugins)?")


def verify(
    original: Any,
    fused: Any,
    *,
    input_shapes: str | Mapping[str, Sequence[int]] | None = None,
    outputs: Sequence[str] | str | None = None,
    runs: int = 3,
    seed: int = 0,
    atol: float | None = None,
    rtol: float | None = None,
    int_range: tuple[int, int] = (0, 10),
    feeds: str | Mapping[str, "np.ndarray"] | None = None,
    fused_ops: Mapping[str, "FusedOpDef"],
    progress: Callable[[str], None] | None = None,
) -> VerifyResult:
    """Compare ``fused`` with ``original`` (paths, GraphDefs or loaded models).

    ``fused_ops`` is the table of declared fused ops (``Registry.fused_ops``): the
    fused graph's fused nodes run their reference implementations from it.
    ``progress``, if given, hears what is being done (``"verification run 2 of 3"``).

    Tolerances default by dtype (:data:`DEFAULT_TOLERANCES`); an element
    passes when ``|fused - original| <= atol + rtol * |original|``.  Only the
    Placeholders the compared outputs depend on are fed.  Invalid values raise
    :class:`~scopefusion.core.parameters.ParameterError` naming the parameter.
    """
    check_verify_parameters(runs=runs, atol=atol, rtol=rtol, int_range=int_range)
    original_graph = _as_graph(original)
    fused_graph = _as_graph(fused)
    _check_ops_known(fused_graph, fused_ops)
    if any(n.op in fused_ops for n in _all_nodes(fused_graph)):
        fused_graph = to_tf_runnable(fused_graph, fused_ops)
    result = VerifyResult()
    wanted = _wanted_outputs(original_graph, fused_graph, outputs)
    comparisons, present = _presence(original_graph, fused_graph, wanted)
    feed_runs = _feed_runs(original_graph, fused_graph, present, result, feeds, input_shapes, runs, seed,
                           (int_range[0], int_range[1]))
    result.runs = len(feed_runs)
    _compare_runs(original_graph, fused_graph, comparisons, present, feed_runs, atol, rtol, progress)
    result.outputs = list(comparisons.values())
    return result


def check_verify_parameters(*, runs: int = 3, atol: float | None = None, rtol: float | None = None,
                            int_range: Sequence[int] = (0, 10)) -> None:
    """Raise :class:`ParameterError` for a run count below 1, a negative or
    non-finite tolerance, or an empty integer range."""
    if isinstance(runs, bool) or not isinstance(runs, numbers.Integral) or runs < 1:
        raise ParameterError("runs", f"must be a whole number of at least 1, not {runs!r}")
    for name, value in (("atol", atol), ("rtol", rtol)):
        if value is not None and not (isinstance(value, numbers.Real) and math.isfinite(value) and value >= 0):
            raise ParameterError(name, f"a tolerance must be a finite number >= 0, not {value!r}")
    check_int_range(int_range)


def _wanted_outputs(original: "GraphDef", fused: "GraphDef", outputs: Sequence[str] | str | None) -> list[str]:
    """The tensors to compare: those asked for (each must name an output port of
    a node of either graph), else every sink of either graph."""
    if isinstance(outputs, str):
        outputs = [o.strip() for o in outputs.split(",") if o.strip()]
    if outputs:
        return list(dict.fromkeys(check_tensor_names([original, fused], list(outputs), "outputs")))
    first = default_outputs(original)
    return first + [o for o in default_outputs(fused) if o not in first]


def _presence(original: "GraphDef", fused: "GraphDef",
              wanted: Sequence[str]) -> tuple[dict[str, TensorComparison], list[str]]:
    """A comparison per wanted tensor; those of a node missing from one graph fail
    at once.  Returns the comparisons and the tensors both graphs have."""
    in_a = {n.name for n in original.node}
    in_b = {n.name for n in fused.node}
    comparisons = {name: TensorComparison(name) for name in wanted}
    present = []
    for name, comp in comparisons.items():
        node = name.rsplit(":", 1)[0]
        if node in in_a and node in in_b:
            present.append(name)
        else:
            comp.passed = False
            comp.note = "only in the fused graph" if node in in_b else "only in the original graph"
    return comparisons, present


def _feed_runs(original: "GraphDef", fused: "GraphDef", fetches: Sequence[str], result: VerifyResult,
               feeds: str | Mapping[str, "np.ndarray"] | None,
               input_shapes: str | Mapping[str, Sequence[int]] | None, runs: int, seed: int,
               int_range: tuple[int, int]) -> list[dict[str, "np.ndarray"]]:
    """The given feeds, or ``runs`` seeded random ones, for the inputs the fetched
    tensors depend on in either graph (notes on defaulted shapes go to ``result``)."""
    inputs = _inputs_of(original, fused)
    needed = needed_inputs(original, fetches) | needed_inputs(fused, fetches)
    if feeds is not None:
        given = load_npz_feeds(feeds) if isinstance(feeds, str) else {
            (k if ":" in k else f"{k}:0"): v for k, v in feeds.items()}
        return [check_feed_keys(given, inputs, needed)]
    plan: FeedPlan = plan_feeds(inputs, parse_input_shapes(input_shapes), needed)
    result.notes.extend(plan.notes)
    return [make_feeds(plan, seed + k, int_range) for k in range(runs)]


def _inputs_of(original: "GraphDef", fused: "GraphDef") -> list[InputSpec]:
    """The Placeholders of the original graph, then those only the fused graph has."""
    inputs = graph_inputs(original)
    names = {i.name for i in inputs}
    return inputs + [i for i in graph_inputs(fused) if i.name not in names]


def _compare_runs(original: "GraphDef", fused: "GraphDef", comparisons: Mapping[str, TensorComparison],
                  present: Sequence[str], feed_runs: Sequence[Mapping[str, "np.ndarray"]], atol: float | None,
                  rtol: float | None, progress: Callable[[str], None] | None = None) -> None:
    """Run both graphs on every feed and compare the tensors both have."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    if not present:
        return
    a = b = None
    try:
        a, b = GraphRunner(original, "original"), GraphRunner(fused, "fused")
        for k, feed in enumerate(feed_runs, start=1):
            if progress is not None:
                progress(f"verification run {k} of {len(feed_runs)}: {len(present)} output(s)")
            try:
                want = a.run(present, feed)
            except ScopeFusionError:
                if k > 1 or not _runs_in_a_default_session(original, present, feed):
                    raise
                # verify's session failed where a default one runs: both graphs run as a default one does
                a.close()
                b.close()
                a, b = GraphRunner(original, "original", stock=True), GraphRunner(fused, "fused", stock=True)
                want = a.run(present, feed)
            got = b.run(present, feed)
            for name, x, y in zip(present, want, got, strict=True):
                _compare(comparisons[name], np.asarray(x), np.asarray(y), atol, rtol, tf)
    finally:
        for runner in (a, b):
            if runner is not None:
                runner.close()


def _runs_in_a_default_session(original: "GraphDef", present: Sequence[str], feed: Mapping[str, "np.ndarray"]) -> bool:
    """Verify's own session turns Grappler's remapper off, so that TensorFlow's own fusions do not
    change the numbers compared.  When the original fails there: whether a default session runs
    it (then both graphs are run as a default session runs them); when that fails too, the error
    says so, the original itself does not run on these feeds."""
    stock = GraphRunner(original, "original", stock=True)
    try:
        stock.run(present, feed)
    except ScopeFusionError as exc:
        raise ScopeFusionError(f"{exc}; a default TensorFlow session fails the same way, so the original "
                               "graph itself does not run on these feeds") from None
    finally:
        stock.close()
    return True


def _compare(comp: TensorComparison, x: "np.ndarray", y: "np.ndarray", atol: float | None,
             rtol: float | None, tf: Any) -> None:
    comp.shape = list(x.shape)
    dtype = tf.dtypes.as_dtype(x.dtype) if x.dtype != object else tf.string
    comp.dtype = dtype.name
    comp.atol, comp.rtol = _tolerance(dtype, atol, rtol)
    if x.shape != y.shape or x.dtype != y.dtype:
        comp.passed = False
        comp.note = f"fused gives {y.dtype} {tuple(y.shape)}"
        return
    if x.size == 0:
        return
    if dtype.is_floating or dtype.is_complex:  # bfloat16 too, which numpy sees as kind 'V'
        wide = np.complex128 if dtype.is_complex else np.float64  # keep the imaginary part
        xf, yf = x.astype(wide), y.astype(wide)
        both_nan = np.isnan(xf) & np.isnan(yf)
        diff = np.where(both_nan, 0.0, np.abs(xf - yf))
        diff = np.where(np.isnan(diff), np.inf, diff)
        rel = diff / np.maximum(np.abs(xf), np.finfo(np.float64).tiny)
        ok = diff <= comp.atol + comp.rtol * np.abs(np.nan_to_num(xf))
    else:
        diff = (x != y).astype(np.float64)
        rel = diff
        ok = x == y
    comp.max_abs_error = max(comp.max_abs_error, float(np.max(diff)))
    comp.max_rel_error = max(comp.max_rel_error, float(np.max(rel)))
    if not bool(np.all(ok)):
        comp.passed = False
        bad = int(np.size(ok) - np.count_nonzero(ok))
        comp.note = f"{bad} of {x.size} elements outside tolerance"

