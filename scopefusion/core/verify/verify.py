"""Verification: run the original and the fused graph in stock TensorFlow on
the same feeds and compare every output tensor.

A fused graph in its fused form is first turned into its TensorFlow-runnable
form, in which every fused node runs its reference implementation; so what is
checked is the port maps and attributes a back end would rely on.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..errors import ScopeFusionError
from ..graph.index import GraphIndex
from ..graph.io import LoadedModel, load_model
from ..graph.tf_ops import is_tensorflow_op
from ..graph.vocabulary import NON_OUTPUT_SINKS
from .tf_form import to_tf_runnable
from .feeds import FeedPlan, graph_inputs, load_npz_feeds, make_feeds, parse_input_shapes, plan_feeds

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
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
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)

    def assert_ok(self) -> None:
        """Raise ``AssertionError`` with the table when any output differs."""
        if not self.passed:
            raise AssertionError(f"fused graph differs from the original:\n{self.table()}")

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "runs": self.runs, "notes": self.notes,
                "outputs": [asdict(o) for o in self.outputs]}


class _Runner:
    """One imported graph with an open session, reused across runs."""

    def __init__(self, graph_def: "GraphDef", label: str) -> None:
        import tensorflow as tf

        from .execute import session_config

        self.graph = tf.Graph()
        try:
            with self.graph.as_default():
                tf.compat.v1.import_graph_def(graph_def, name="")
        except Exception as exc:
            raise ScopeFusionError(f"the {label} graph does not import into TensorFlow: {exc}") from exc
        self.session = tf.compat.v1.Session(graph=self.graph, config=session_config())
        self.label = label

    def has(self, tensor: str) -> bool:
        try:
            self.graph.get_tensor_by_name(tensor)
        except (KeyError, ValueError):
            return False
        return True

    def run(self, fetches: Sequence[str], feeds: Mapping[str, "np.ndarray"]) -> list["np.ndarray"]:
        try:
            return list(self.session.run(list(fetches), dict(feeds)))
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ScopeFusionError(f"running the {self.label} graph failed: {first}") from exc

    def close(self) -> None:
        self.session.close()


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


def _check_ops_known(graph: "GraphDef", fused_ops: Mapping[str, "FusedOpDef"]) -> None:
    """Every op of the fused graph is a TensorFlow op or a declared fused op."""
    functions = {f.signature.name for f in graph.library.function}  # called by name
    unknown: dict[str, str] = {}
    for node in graph.node:
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
) -> VerifyResult:
    """Compare ``fused`` with ``original`` (paths, GraphDefs or loaded models).

    ``fused_ops`` is the table of declared fused ops (``Registry.fused_ops``): the
    fused graph's fused nodes run their reference implementations from it.

    Tolerances default by dtype (:data:`DEFAULT_TOLERANCES`); an element
    passes when ``|fused - original| <= atol + rtol * |original|``.
    """
    if runs < 1:
        raise ScopeFusionError("runs must be at least 1")
    original_graph = _as_graph(original)
    fused_graph = _as_graph(fused)
    _check_ops_known(fused_graph, fused_ops)
    if any(n.op in fused_ops for n in fused_graph.node):
        fused_graph = to_tf_runnable(fused_graph, fused_ops)
    result = VerifyResult()
    wanted = _wanted_outputs(original_graph, fused_graph, outputs)
    feed_runs = _feed_runs(original_graph, result, feeds, input_shapes, runs, seed, int_range)
    result.runs = len(feed_runs)
    result.outputs = _compare_runs(original_graph, fused_graph, wanted, feed_runs, atol, rtol)
    return result


def _wanted_outputs(original: "GraphDef", fused: "GraphDef", outputs: Sequence[str] | str | None) -> list[str]:
    """The tensors to compare: those asked for, else every sink of either graph."""
    if isinstance(outputs, str):
        outputs = [o.strip() for o in outputs.split(",") if o.strip()]
    if outputs:
        return [o if ":" in o else f"{o}:0" for o in outputs]
    first = default_outputs(original)
    return first + [o for o in default_outputs(fused) if o not in first]


def _feed_runs(graph: "GraphDef", result: VerifyResult, feeds: str | Mapping[str, "np.ndarray"] | None,
               input_shapes: str | Mapping[str, Sequence[int]] | None, runs: int, seed: int,
               int_range: tuple[int, int]) -> list[dict[str, "np.ndarray"]]:
    """The given feeds, or ``runs`` seeded random ones (notes on defaulted shapes go to ``result``)."""
    if feeds is not None:
        fixed = load_npz_feeds(feeds) if isinstance(feeds, str) else {
            (k if ":" in k else f"{k}:0"): v for k, v in feeds.items()}
        return [fixed]
    plan: FeedPlan = plan_feeds(graph_inputs(graph), parse_input_shapes(input_shapes))
    result.notes.extend(plan.notes)
    return [make_feeds(plan, seed + k, int_range) for k in range(runs)]


def _compare_runs(original: "GraphDef", fused: "GraphDef", wanted: Sequence[str],
                  feed_runs: Sequence[Mapping[str, "np.ndarray"]], atol: float | None,
                  rtol: float | None) -> list[TensorComparison]:
    """Run both graphs on every feed and compare the wanted tensors."""
    import numpy as np
    import tensorflow as tf

    a = _Runner(original, "original")
    b = _Runner(fused, "fused")
    try:
        comparisons = {name: TensorComparison(name) for name in wanted}
        present = []
        for name, comp in comparisons.items():
            in_a, in_b = a.has(name), b.has(name)
            if in_a and in_b:
                present.append(name)
            else:
                comp.passed = False
                comp.note = "only in the fused graph" if in_b else (
                    "only in the original graph" if in_a else "in neither graph")
        for feed in feed_runs:
            if not present:
                break
            want = a.run(present, feed)
            got = b.run(present, feed)
            for name, x, y in zip(present, want, got):
                _compare(comparisons[name], np.asarray(x), np.asarray(y), atol, rtol, tf)
        return list(comparisons.values())
    finally:
        a.close()
        b.close()


def _compare(comp: TensorComparison, x: "np.ndarray", y: "np.ndarray", atol: float | None,
             rtol: float | None, tf: Any) -> None:
    import numpy as np

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
        xf, yf = x.astype(np.float64), y.astype(np.float64)
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

