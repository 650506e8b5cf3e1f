"""Inputs for running a graph: which Placeholders it needs, what shape and
values to feed them.

Only the Placeholders that a fetched output depends on need values: they are
found by walking back from the fetched tensors through data and control
inputs.  Unknown dimensions come from an ``input_shapes`` spec such as
``"ids:1,128;mask:1,128"`` (the ``name:dims;name:dims`` syntax of the session
options, where a scalar is written ``0``); otherwise they default to
:data:`DEFAULT_DIM`, and the defaulting is reported per input.

Errors name the API parameter (``input_shapes``, ``feeds``, ``int_range``);
the command line names its option.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

import numpy as np

from ..graph.input_shapes import parse_shape_spec
from ..graph.vocabulary import parse_input
from ..parameters import ParameterError

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

#: Size used for a dimension the graph leaves unknown and no spec gives.
DEFAULT_DIM = 2
INPUT_OPS = frozenset({"Placeholder", "PlaceholderV2"})


@dataclass
class InputSpec:
    """One graph input: tensor name, dtype enum and (possibly partial) shape."""

    name: str
    dtype: int
    shape: list[int | None] | None  # None: unknown rank


def parse_input_shapes(spec: str | Mapping[str, Sequence[int]] | None) -> dict[str, list[int]]:
    """``"a:1,2;b:-1,3"`` -> ``{"a": [1, 2], "b": [-1, 3]}`` (-1: the graph's dimension or the
    default); ``"s:0"`` is a scalar."""
    return {name: [-1 if d is None else d for d in dims] for name, dims in parse_shape_spec(spec).items()}


def graph_inputs(graph_def: "GraphDef") -> list[InputSpec]:
    """The Placeholders of a graph, in graph order."""
    specs = []
    for node in graph_def.node:
        if node.op not in INPUT_OPS:
            continue
        dtype = node.attr["dtype"].type if "dtype" in node.attr else 1
        shape: list[int | None] | None = None
        if "shape" in node.attr and not node.attr["shape"].shape.unknown_rank:
            shape = [d.size if d.size >= 0 else None for d in node.attr["shape"].shape.dim]
        specs.append(InputSpec(node.name, dtype, shape))
    return specs


def needed_inputs(graph_def: "GraphDef", fetches: Iterable[str]) -> set[str]:
    """The Placeholders that the tensors ``fetches`` depend on, through data and
    control inputs (inside the graph; function bodies read only their arguments)."""
    inputs = {node.name: node.input for node in graph_def.node}
    ops = {node.name: node.op for node in graph_def.node}
    seen: set[str] = set()
    todo = [parse_input(t)[0] for t in fetches]
    while todo:
        name = todo.pop()
        if name in seen or name not in inputs:
            continue
        seen.add(name)
        todo.extend(parse_input(i)[0] for i in inputs[name])
    return {name for name in seen if ops[name] in INPUT_OPS}


@dataclass
class FeedPlan:
    """Concrete shapes per input and the notes on what was defaulted."""

    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, int]
    notes: list[str] = field(default_factory=list)


def plan_feeds(inputs: Sequence[InputSpec], input_shapes: Mapping[str, Sequence[int]],
               needed: Iterable[str] | None = None) -> FeedPlan:
    """Decide the shape of every input in ``needed`` (default: all of ``inputs``)."""
    known = {i.name for i in inputs}
    unknown = [n for n in input_shapes if n not in known]
    if unknown:
        raise ParameterError("input_shapes", f"{', '.join(unknown)} is not an input of the graph; "
                             f"inputs: {', '.join(sorted(known)) or 'none'}")
    wanted = known if needed is None else set(needed)
    plan = FeedPlan({}, {})
    for spec in inputs:
        if spec.name in wanted:
            plan.dtypes[spec.name] = spec.dtype
            plan.shapes[spec.name] = _input_shape(spec, input_shapes.get(spec.name), plan.notes)
    return plan


def _input_shape(spec: InputSpec, given: Sequence[int] | None, notes: list[str]) -> tuple[int, ...]:
    if given is not None:
        if spec.shape is not None and len(spec.shape) != len(given):
            raise ParameterError("input_shapes", f"gives {spec.name} rank {len(given)}, the graph says "
                                 f"{len(spec.shape)}")
        for g, s in zip(given, spec.shape or given, strict=True):
            if s is not None and g != -1 and s != g:
                raise ParameterError("input_shapes", f"{spec.name}:{list(given)} contradicts the graph's shape "
                                     f"{spec.shape}")
        if -1 in given:  # dynamic: the graph's dimension if it has one, else the default
            dims = tuple((s if s is not None else DEFAULT_DIM) if g == -1 else g
                         for g, s in zip(given, spec.shape or [None] * len(given), strict=True))
            notes.append(f"input {spec.name}: dynamic dimensions (-1) set to {DEFAULT_DIM}: {list(dims)}")
            return dims
        return tuple(given)
    if spec.shape is None:
        raise ParameterError("input_shapes", f"input {spec.name!r} has unknown rank: give its shape "
                             f"({spec.name}:d1,d2,...)")
    if any(d is None for d in spec.shape):
        dims = tuple(DEFAULT_DIM if d is None else d for d in spec.shape)
        notes.append(f"input {spec.name}: unknown dimensions set to {DEFAULT_DIM}: {list(dims)} "
                     f"(graph shape {['?' if d is None else d for d in spec.shape]}; choose them for verification "
                     "with --verify-shape, or input_shapes= of scopefusion.verify)")
        return dims
    return tuple(spec.shape)  # type: ignore[arg-type]


def check_int_range(int_range: Sequence[int]) -> tuple[int, int]:
    """``(lo, hi)`` with ``lo < hi``: integer inputs are drawn from ``[lo, hi)``."""
    try:
        lo, hi = (int(v) for v in int_range)
    except (TypeError, ValueError):
        raise ParameterError("int_range", f"must be two integers (lo, hi), not {int_range!r}") from None
    if hi <= lo:
        raise ParameterError("int_range", f"({lo}, {hi}): HI must be greater than LO (values are drawn "
                             "from [LO, HI))")
    return lo, hi


def make_feeds(plan: FeedPlan, seed: int, int_range: tuple[int, int] = (0, 10)) -> dict[str, "np.ndarray"]:
    """Random values for every input: floats normal(0, 1), ints in ``int_range``, bools 50/50."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    rng = np.random.default_rng(seed)
    feeds = {}
    for name, shape in plan.shapes.items():
        dtype = tf.dtypes.as_dtype(plan.dtypes[name])
        if dtype.is_floating:
            value = rng.standard_normal(shape).astype(dtype.as_numpy_dtype)
        elif dtype.is_integer:
            lo, hi = int_range
            value = rng.integers(lo, hi, size=shape).astype(dtype.as_numpy_dtype)
        elif dtype.is_bool:
            value = rng.random(shape) < 0.5
        else:
            raise ParameterError("feeds", f"input {name!r} has dtype {dtype.name}, for which no random values "
                                 "are made: give real values (a .npz file whose keys are input names)")
        feeds[f"{name}:0"] = value
    return feeds


def load_npz_feeds(path: str) -> dict[str, "np.ndarray"]:
    """Feeds from an ``.npz`` file whose keys are input names (``:0`` optional)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
    except OSError as exc:
        raise ParameterError("feeds", f"{path}: cannot read feeds ({exc.strerror or exc})") from None
    if not head.startswith(b"PK"):  # anything else numpy would try as a pickle or a text array
        raise ParameterError("feeds", f"{path}: not an .npz file (a zip archive of .npy arrays, as numpy.savez "
                             "writes; keys are input names)")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {(k if ":" in k else f"{k}:0"): data[k] for k in data.files}
    except Exception as exc:  # noqa: BLE001 - a broken archive (zipfile, zlib, numpy's own errors)
        text = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ParameterError("feeds", f"{path}: cannot read feeds, the .npz file is damaged or truncated "
                             f"({type(exc).__name__}: {text})") from None


def check_feed_keys(feeds: Mapping[str, "np.ndarray"], inputs: Sequence[InputSpec],
                    needed: Iterable[str]) -> dict[str, "np.ndarray"]:
    """The given feeds of the ``needed`` inputs; a key naming no input, or a
    needed input without a value, is an error listing the inputs it needs."""
    placeholders = {i.name for i in inputs}
    need = sorted(needed)
    listed = f"the inputs it needs: {', '.join(need) or 'none'}"
    wrong = [k for k in feeds if k.rsplit(":", 1)[0] not in placeholders or not k.endswith(":0")]
    if wrong:
        raise ParameterError("feeds", f"{', '.join(repr(k) for k in wrong)} "
                             f"{'is not an input' if len(wrong) == 1 else 'are not inputs'} of the graph; {listed}")
    missing = [n for n in need if f"{n}:0" not in feeds]
    if missing:
        raise ParameterError("feeds", f"no value for {', '.join(missing)}; {listed}")
    return {f"{n}:0": feeds[f"{n}:0"] for n in need}
