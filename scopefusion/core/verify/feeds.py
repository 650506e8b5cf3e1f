"""Inputs for running a graph: which Placeholders it has, what shape and
values to feed them.

Unknown dimensions come from an ``--input_shape`` spec such as
``"ids:1,128;mask:1,128"`` (the ``name:dims;name:dims`` syntax of the session
options, where a scalar is written ``0``); otherwise they default to
:data:`DEFAULT_DIM`, and the defaulting is reported per input.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Sequence

from ..errors import OptionError, ScopeFusionError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
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
    """``"a:1,2;b:3"`` -> ``{"a": [1, 2], "b": [3]}``; ``"s:0"`` is a scalar."""
    if spec is None or spec == "":
        return {}
    if not isinstance(spec, str):
        return {k.split(":")[0]: list(v) for k, v in spec.items()}
    shapes: dict[str, list[int]] = {}
    for item in spec.split(";"):
        item = item.strip()
        if not item:
            continue
        name, sep, dims = item.rpartition(":")
        if not sep or not name:
            raise OptionError(f"--input_shape item {item!r} is not name:d1,d2,...")
        try:
            values = [int(d) for d in dims.split(",") if d.strip() != ""]
        except ValueError:
            raise OptionError(f"--input_shape item {item!r}: dimensions must be integers") from None
        if values == [0]:
            values = []
        if any(v < 1 for v in values):
            raise OptionError(f"--input_shape item {item!r}: dimensions must be positive (dynamic -1 needs a value)")
        shapes[name.strip()] = values
    return shapes


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


@dataclass
class FeedPlan:
    """Concrete shapes per input and the notes on what was defaulted."""

    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, int]
    notes: list[str] = field(default_factory=list)


def plan_feeds(inputs: Sequence[InputSpec], input_shapes: Mapping[str, Sequence[int]]) -> FeedPlan:
    """Decide the shape of every input."""
    known = {i.name for i in inputs}
    unknown = [n for n in input_shapes if n not in known]
    if unknown:
        raise OptionError(
            f"--input_shape names {', '.join(unknown)}, which is not an input; inputs: {', '.join(sorted(known))}"
        )
    plan = FeedPlan({}, {})
    for spec in inputs:
        plan.dtypes[spec.name] = spec.dtype
        given = input_shapes.get(spec.name)
        if given is not None:
            if spec.shape is not None and len(spec.shape) != len(given):
                raise OptionError(f"--input_shape gives {spec.name} rank {len(given)}, the graph says {len(spec.shape)}")
            for g, s in zip(given, spec.shape or given):
                if s is not None and s != g:
                    raise OptionError(f"--input_shape {spec.name}:{given} contradicts the graph's shape {spec.shape}")
            plan.shapes[spec.name] = tuple(given)
            continue
        if spec.shape is None:
            raise OptionError(f"input {spec.name!r} has unknown rank; give its shape with --input_shape")
        if any(d is None for d in spec.shape):
            dims = tuple(DEFAULT_DIM if d is None else d for d in spec.shape)
            plan.notes.append(
                f"input {spec.name}: unknown dimensions set to {DEFAULT_DIM}: {list(dims)} "
                f"(graph shape {['?' if d is None else d for d in spec.shape]}; use --input_shape to choose)"
            )
            plan.shapes[spec.name] = dims
        else:
            plan.shapes[spec.name] = tuple(spec.shape)  # type: ignore[arg-type]
    return plan


def make_feeds(plan: FeedPlan, seed: int, int_range: tuple[int, int] = (0, 10)) -> dict[str, "np.ndarray"]:
    """Random values for every input: floats normal(0, 1), ints in ``int_range``, bools 50/50."""
    import numpy as np
    import tensorflow as tf

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
            raise ScopeFusionError(f"input {name!r} has dtype {dtype.name}; give its values with --feeds file.npz")
        feeds[f"{name}:0"] = value
    return feeds


def load_npz_feeds(path: str) -> dict[str, "np.ndarray"]:
    """Feeds from an ``.npz`` file whose keys are input names (``:0`` optional)."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as data:
            return {(k if ":" in k else f"{k}:0"): data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise ScopeFusionError(f"{path}: cannot read feeds ({exc})") from exc
