"""Steps every form shares: the output node, gamma and beta, their shapes, the axes."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from ....core.fusion.refusal import fail
from .algebra import PASS_THROUGH, Evaluator, Poly, Tensor, add, data_consumers, has_no_consumers, mul, render, symbol

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.instances import ScopePart
    from ....core.scope.scope_graph import Scope, ScopeGraph

#: Symbols of the normalised part of the output (everything else is an atom).
NORMALISED = frozenset({"x", "mean", "rstd", "xhat"})
#: Ops whose output has the shape of their first input.
SHAPE_KEEPING = PASS_THROUGH | {"ReadVariableOp", "Cast"}
VARIABLE_OPS = frozenset({"VarHandleOp", "VariableV2", "Variable"})


@dataclass
class LayerNormMatch:
    """A layer norm found in a scope, described in the fused op's terms."""

    x: Tensor
    gamma: Tensor
    beta: Tensor
    output: str  # output 0 of this node is y
    mean: str | None  # the node whose output 0 is the op's mean output, if the form has one
    variance: str | None
    epsilon: float
    begin_norm_axis: int
    begin_params_axis: int
    dtype: int
    description: str
    #: a Cast from the float32 result down to half or bfloat16 (a Keras mixed-precision or
    #: low-precision layer computes in float32 between two casts): its output is the one
    #: read outside, and it stays a Cast after the LayerNorm
    output_cast: str | None = None


DT_FLOAT = 1
#: DT_HALF, DT_BFLOAT16: the types a layer norm is computed in float32 for
LOW_PRECISION = frozenset({19, 14})


def precision_cast(sg: "ScopeGraph", inside: set[str], name: str, *, up: bool) -> bool:
    """Is ``name`` a Cast in the scope from half/bfloat16 up to float32 (``up``), or
    from float32 down to half/bfloat16?"""
    if name not in inside or sg.op_of(name) != "Cast":
        return False
    attrs = sg.node(name).attr
    src, dst = attrs["SrcT"].type, attrs["DstT"].type
    return (src in LOW_PRECISION and dst == DT_FLOAT) if up else (src == DT_FLOAT and dst in LOW_PRECISION)


def tensor_name(t: Tensor) -> str:
    return t[0] if t[1] == 0 else f"{t[0]}:{t[1]}"


def result_node(scope: "Scope | ScopePart", inside: set[str], evaluator: Evaluator, statistics: Sequence[str]) -> str:
    """The one node whose normalised value leaves the scope (read outside, or a graph sink)."""
    sg = scope.graph
    leaving = []
    for name in scope.node_names():
        if name in statistics:
            continue
        consumers = data_consumers(sg, name)
        if (any(c not in inside for c, _ in consumers) or has_no_consumers(sg, name)) and evaluator.depends((name, 0)):
            leaving.append(name)
    if not leaving:
        fail("no normalised tensor leaves the scope")
    if len(leaving) > 1:
        shown = ", ".join(scope.suffix_of(n) for n in leaving[:4])
        if _read_by_gradient(sg, leaving, inside):
            fail(f"its inner tensors ({shown}) are read by its gradient (a training graph): "
                 "ScopeLayerNormGradPass fuses the gradient, and the graph stage's LayerNormFusionPass then this "
                 "layer norm")
        fail(f"{len(leaving)} normalised tensors leave the scope ({shown}); LayerNorm has one output y")
    out = leaving[0]
    ports = sorted({p for c, p in data_consumers(sg, out) if c not in inside and p != 0})
    if ports:
        fail(f"output {ports[0]} of {out!r} is read outside the scope; LayerNorm has one output y")
    return out


#: The scope component under which tf.gradients and GradientTape put an op's gradient.
GRADIENT_ROOT = re.compile(r"gradients(_[0-9]+)?|gradient_tape")


def _read_by_gradient(sg: "ScopeGraph", leaving: Sequence[str], inside: set[str]) -> bool:
    """Do the tensors leaving the scope, but one (y), go only to nodes of a gradient scope?"""
    def in_gradient(name: str) -> bool:
        return any(GRADIENT_ROOT.fullmatch(part) for part in name.split("/")[:-1])

    outside = [[c for c, _ in data_consumers(sg, n) if c not in inside] for n in leaving]
    return sum(1 for readers in outside if readers and all(in_gradient(c) for c in readers)) >= len(leaving) - 1


def strip_output_cast(sg: "ScopeGraph", inside: set[str], out: str) -> tuple[str, str | None]:
    """``(y, cast)``: when ``out`` casts a float32 result down to half or bfloat16 and
    nothing else reads that result, the layer norm ends at the result and ``out`` is the
    cast after it; otherwise ``(out, None)``."""
    if not precision_cast(sg, inside, out, up=False):
        return out, None
    y = sg.producer(out, 0)
    if y[1] != 0 or y[0] not in inside or [c for c, _ in data_consumers(sg, y[0])] != [out]:
        return out, None
    return y[0], out


def _close(a: Poly, b: Poly) -> bool:
    return a.keys() == b.keys() and all(math.isclose(a[k], b[k], rel_tol=1e-6, abs_tol=1e-9) for k in a)


def scale_and_offset(scope: "Scope | ScopePart", evaluator: Evaluator, poly: Poly, lead: str,
                     base: Poly) -> tuple[Tensor, Tensor]:
    """gamma and beta of ``poly == base * gamma + beta``; ``lead`` is the symbol gamma must scale."""
    names = {key: _short(scope, t) for key, t in evaluator.atoms.items()}
    text = render(poly, names)
    if lead == "x" and not any(n == "mean" for mono in poly for n, _ in mono):
        fail(
            f"the output is {text}: it does not subtract the mean (RMS-style scaling), not a layer norm")
    leading = [mono for mono in poly if any(n == lead for n, _ in mono)]
    if len(leading) != 1:
        fail(f"the output is {text}, not a layer norm's (x - mean) * rsqrt(variance + epsilon) * gamma + beta")
    atoms = [(n, e) for n, e in leading[0] if n not in NORMALISED]
    if not atoms:
        if not [mono for mono in poly if not any(n in NORMALISED for n, _ in mono)]:
            fail("no gamma and no beta (scale=False, center=False): LayerNorm needs both")
        fail("no gamma (scale=False): LayerNorm needs a scale input")
    if len(atoms) != 1 or atoms[0][1] != 1:
        fail(f"the output is {text}: the normalised input is not scaled by one gamma tensor")
    gamma = atoms[0][0]
    offsets = [mono for mono in poly if not any(n in NORMALISED for n, _ in mono)]
    if not offsets:
        fail("no beta (center=False): LayerNorm needs an offset input")
    beta_mono = offsets[0]
    if len(offsets) != 1 or len(beta_mono) != 1 or beta_mono[0][1] != 1 or beta_mono[0][0] == gamma:
        fail(f"the output is {text}: it is not shifted by one beta tensor")
    beta = beta_mono[0][0]
    expected = add(mul(base, symbol(gamma)), symbol(beta))
    if not _close(poly, expected):
        names.update({gamma: "gamma", beta: "beta"})
        fail(f"the output computes {render(poly, names)}, not {render(expected, names)}")
    return evaluator.atoms[gamma], evaluator.atoms[beta]


def _short(scope: "Scope | ScopePart", t: Tensor) -> str:
    name = tensor_name(t)
    prefix = scope.name + "/"
    return name[len(prefix):] if name.startswith(prefix) else name


# -- shapes -----------------------------------------------------------------------------


def static_shape(sg: "ScopeGraph", tensor: Tensor) -> list[int | None] | None:
    """The static shape of a tensor as far as the graph tells it (None: unknown rank)."""
    name, port = tensor
    for _ in range(64):
        node = sg.node(name)
        op = node.op
        if "_output_shapes" in node.attr:
            shapes = node.attr["_output_shapes"].list.shape
            if port < len(shapes) and not shapes[port].unknown_rank:
                return [d.size if d.size >= 0 else None for d in shapes[port].dim]
        if op == "Const" and port == 0:
            return [d.size for d in node.attr["value"].tensor.tensor_shape.dim]
        if (op in ("Placeholder", "PlaceholderV2", "PlaceholderWithDefault") or op in VARIABLE_OPS) \
                and "shape" in node.attr and not node.attr["shape"].shape.unknown_rank:
            return [d.size if d.size >= 0 else None for d in node.attr["shape"].shape.dim]
        if op == "Reshape" and port == 0:
            target = sg.const_value(sg.producer(name, 1)[0])
            if target is not None and target.ndim <= 1:
                return [int(d) if d >= 0 else None for d in target.reshape(-1)]
        if op in SHAPE_KEEPING and port == 0 and sg.input_names(name):
            name, port = sg.producer(name, 0)
            continue
        break
    rank = rank_of(sg, (name, port))
    return None if rank is None else [None] * rank


#: Elementwise ops whose output rank is the widest of their inputs'.
BROADCASTING = frozenset({"Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "Maximum", "Minimum", "SquaredDifference"})
UNARY = SHAPE_KEEPING | {"BiasAdd", "Relu", "Relu6", "Elu", "Selu", "Gelu", "Tanh", "Sigmoid", "Erf", "Neg", "Square",
                         "Sqrt", "Rsqrt", "Exp", "Softplus", "Softmax", "LeakyRelu"}


def rank_of(sg: "ScopeGraph", tensor: Tensor) -> int | None:
    """The rank of a tensor, as the scope graph infers it."""
    return sg.rank(tensor_name(tensor))


def see_through_reshape(sg: "ScopeGraph", inside: set[str], tensor: Tensor) -> Tensor:
    """The input of an inner ``Reshape`` that only prepends 1s (Keras broadcasting gamma
    and beta to the input's rank); otherwise ``tensor`` itself."""
    name, port = tensor
    if port != 0 or name not in inside or sg.op_of(name) != "Reshape":
        return tensor
    target = sg.const_value(sg.producer(name, 1)[0])
    source = sg.producer(name, 0)
    shape = static_shape(sg, source)
    if target is None or target.ndim != 1 or shape is None or None in shape:
        return tensor
    dims = [int(d) for d in target]
    k = len(dims) - len(shape)
    if k > 0 and all(d == 1 for d in dims[:k]) and dims[k:] == shape:
        return source
    return tensor


def _show(shape: Sequence[int | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def params_axis(sg: "ScopeGraph", x: Tensor, gamma: Tensor, beta: Tensor) -> int:
    """``begin_params_axis``: gamma and beta must have the shape of x's trailing axes."""
    gs = static_shape(sg, gamma)
    if gs is None or None in gs:
        fail(f"cannot tell how many axes gamma {tensor_name(gamma)!r} spans: its shape is unknown")
    if not gs:
        fail(f"gamma {tensor_name(gamma)!r} is a scalar; LayerNorm needs one of x's trailing shape")
    bs = static_shape(sg, beta)
    if bs is None or None in bs:
        fail(f"cannot tell the shape of beta {tensor_name(beta)!r}")
    if bs != gs:
        fail(f"beta of shape {_show(bs)} and gamma of shape {_show(gs)} differ")
    k = len(gs)
    xs = static_shape(sg, x)
    if xs is not None and len(xs) < k:
        fail(f"gamma of shape {_show(gs)} has more axes than x (rank {len(xs)})")
    trailing = xs[-k:] if xs is not None else [None] * k
    for g, d in zip(gs, trailing, strict=False):  # a scalar gamma: k == 0, and xs[-0:] is all of xs
        # where x's size is unknown, broadcasting against x makes it g, unless g is 1
        if (d is None and g == 1) or (d is not None and d != g):
            fail(
                f"gamma of shape {_show(gs)} does not span the trailing axes of x (x.shape[-{k}:] is "
                f"{_show(trailing)}); LayerNorm needs gamma of shape x.shape[begin_params_axis:]")
    return -k


def norm_axis(sg: "ScopeGraph", x: Tensor, axes: list[int]) -> int:
    """``begin_norm_axis`` of reduction ``axes``: they must be x's trailing axes."""
    if not axes or axes != list(range(axes[0], axes[0] + len(axes))):
        fail(f"reduction axes {axes} are not contiguous")
    if axes[-1] == -1:
        return axes[0]
    if axes[0] < 0:
        fail(f"reduction axes {axes} mix signs or do not end at the last axis")
    rank = rank_of(sg, x)
    if rank is None:
        fail(
            f"cannot tell the rank of {tensor_name(x)!r} to check that axes {axes} are the trailing axes")
    if axes[-1] != rank - 1:
        fail(f"reduction axes {axes} are not the trailing axes of a rank-{rank} input")
    return axes[0]
