"""A layer norm's gradient in a training graph, found from its ``RsqrtGrad`` by the wiring.

``tf.gradients`` and ``tf.GradientTape`` name the gradient of an op ``<scope>/op`` under
``gradients/<scope>/...`` (``gradients_1/...``) and ``gradient_tape/<scope>/...``, and put the sums
of several contributions to one tensor (``AddN``) outside that scope.  So the gradient of the
layer norm in scope ``S`` is every node under ``<gradient root>/S/``, plus the ``AddN`` nodes that
only sum its tensors, and the ``AddN`` that sums its contributions to ``dx``.  The analysis:

* the forward statistics from the ``Rsqrt`` the ``RsqrtGrad`` reads: ``variance + epsilon``, the
  variance a ``Mean`` of squared differences from the ``Mean`` of ``x`` (as the forward pass reads
  them), and the forward output ``y``, which must be ``(x - mean) * rsqrt(variance + epsilon) *
  gamma + beta`` (the forward pass's algebra);
* the tensors entering the gradient from outside: ``x``, ``gamma`` (as the gradient reads it),
  forward statistics, constants and exactly one other tensor, ``dy``;
* the tensors leaving it, told apart by what they depend on: on ``dy`` alone, ``dbeta``; on ``dy``
  and the forward statistics but not gamma, ``dgamma``; on gamma too, a contribution to ``dx``
  (several of them summed by one ``AddN``, which may add other contributions to ``x``'s gradient,
  a residual connection's).

Anything else is refused with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ....core.fusion.refusal import fail
from ....core.graph.vocabulary import CONTROL
from ..layer_norm.algebra import Evaluator, Poly, add, mul, symbol
from ..layer_norm.common import (
    GRADIENT_ROOT, Tensor, norm_axis, scale_and_offset, see_through_reshape, static_shape,
)
from ..layer_norm.moments import _axes, _keeps_dims, _mean_and_input, _variance_plus_epsilon
from .calls import forward_call, gradient_call

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.instances import ScopePart
    from ....core.scope.scope_graph import Scope, ScopeGraph

DY, FORWARD, GAMMA = 1, 2, 4


class _Everywhere:
    """Every node: the forward statistics are found by their wiring before their scope is known."""

    def __contains__(self, name: object) -> bool:
        return True


@dataclass
class GradRegion:
    """A layer norm's gradient: its scope, the nodes outside it that belong to it, and what it reads
    and gives in the fused op's terms."""

    scope: "Scope | ScopePart"
    forward: "Scope | ScopePart"
    extra: list[str]
    dy: Tensor
    x: Tensor
    gamma: Tensor  # the parameter: what the forward multiplies by, seen through a reshape to x's rank
    gamma_read: Tensor  # what the gradient reads: gamma, or that reshape of it
    dx: Tensor
    dgamma: Tensor | None
    dbeta: Tensor | None
    axes: list[int]
    epsilon: float
    begin_norm_axis: int
    begin_params_axis: int
    dtype: int
    #: other contributions to x's gradient the AddN summing dx adds (a residual connection's)
    extra_terms: list[Tensor] = field(default_factory=list)
    #: the forward's inner tensors the gradient reads (functions of x and gamma alone)
    recomputed: list[Tensor] = field(default_factory=list)


def find_region(sg: "ScopeGraph", rsqrt_grad: str) -> GradRegion:
    """The gradient region of the layer norm whose normaliser ``rsqrt_grad`` differentiates."""
    rsqrt = sg.resolve_forwarding(sg.producer(rsqrt_grad, 0)[0])
    if sg.op_of(rsqrt) != "Rsqrt":
        fail(f"{rsqrt_grad!r} differentiates {sg.op_of(rsqrt)} {rsqrt!r}, not a layer norm's Rsqrt")
    everywhere = _Everywhere()
    variance_tensor, epsilon = _variance_plus_epsilon(sg, everywhere, rsqrt, "Rsqrt")  # type: ignore[arg-type]
    variance = sg.resolve_forwarding(variance_tensor[0])
    x, mean, _ = _mean_and_input(sg, everywhere, variance)  # type: ignore[arg-type]
    if not (_keeps_dims(sg, mean) and _keeps_dims(sg, variance)):
        fail("the mean or the variance does not keep the reduced dimensions")
    axes = _axes(sg, mean)
    if _axes(sg, variance) != axes:
        fail("the mean and the variance reduce different axes")
    forward_scope = common_scope(sg, (rsqrt, mean, variance))
    scope, members = own_members(sg, gradient_scope(sg, rsqrt_grad, forward_scope), rsqrt_grad)
    forward = forward_call(sg, forward_scope, rsqrt, frozenset({"Rsqrt"}))
    fwd = set(forward.all_node_indices())
    gamma, gamma_side = _scale(sg, rsqrt, fwd)
    extra = _sums(sg, members)
    evaluator = Evaluator(sg, set(forward.node_names()),
                          {x: symbol("x"), (mean, 0): symbol("mean"), (rsqrt, 0): symbol("rstd")})
    base = add(mul(symbol("x"), symbol("rstd")), mul(symbol("mean"), symbol("rstd")), -1.0)
    check_forward(sg, forward, evaluator, (mean, rsqrt), members, "x", base)
    found = Forward(forward, x, gamma, gamma_side, axes, epsilon, norm_axis(sg, x, axes))
    return gradient_region(sg, rsqrt_grad, found, scope, members, extra, reads_x=True)


#: The ops whose gradient is a layer norm's normaliser's: one per layer norm gradient.
NORMALISER_GRADIENTS = frozenset({"RsqrtGrad", "FusedBatchNormGradV3"})


@dataclass
class Forward:
    """What the gradient needs of the forward layer norm."""

    scope: "Scope | ScopePart"
    x: Tensor
    gamma: Tensor  # as the forward multiplies by it
    gamma_side: set[int]  # the forward nodes that depend on gamma (and gamma's own)
    axes: list[int]
    epsilon: float
    begin_norm_axis: int


def own_members(sg: "ScopeGraph", scope: "Scope", grad: str) -> tuple["Scope | ScopePart", set[int]]:
    """The gradient in scope ``scope`` that holds the normaliser gradient ``grad``: the scope, or the
    piece of it that is one call's gradient when it holds several (:mod:`.calls`), and its nodes."""
    index = sg.index
    grads = [i for i in scope.all_node_indices() if index.ops[i] in NORMALISER_GRADIENTS]
    if len(grads) == 1:
        return scope, set(scope.all_node_indices())
    part = gradient_call(sg, scope, index.index[grad], grads)
    return part, set(part.all_node_indices())


def gradient_region(sg: "ScopeGraph", grad: str, forward: Forward, scope: "Scope | ScopePart", members: set[int],
                    extra: set[int], *, reads_x: bool) -> GradRegion:
    """The region of gradient scope ``scope`` (its ``members`` and the sums ``extra``), whose normaliser's
    gradient is ``grad``, told apart by what each tensor leaving it depends on."""
    index = sg.index
    x, gamma, gamma_side = forward.x, forward.gamma, forward.gamma_side
    fwd = set(forward.scope.all_node_indices())
    entering = _entering(sg, members)
    x_i, gamma_i = (index.index[x[0]], x[1]), (index.index[gamma[0]], gamma[1])
    dy = _dy(sg, entering, fwd, x_i if reads_x else None, gamma_i, gamma_side)
    recomputed = sorted(t for t in entering if t not in (x_i, dy) and sg.constant_chain(t[0]) is None)
    param = see_through_reshape(sg, set(forward.scope.node_names()), gamma)
    for t in recomputed:
        _check_of_x_and_gamma(sg, t, fwd, x_i, (index.index[param[0]], param[1]))
    flags = _dependence(sg, members, {dy: DY, x_i: FORWARD, gamma_i: GAMMA}, fwd, gamma_side)
    dx, dgamma, dbeta, terms = _outputs(sg, members, flags, extra)
    dtype = sg.node(grad).attr["T"].type
    params = static_shape(sg, param)
    if params is None or None in params or not params:
        fail(f"cannot tell the shape gamma {gamma[0]!r} spans")
    names = index.names
    return GradRegion(
        scope=scope, forward=forward.scope, extra=[names[i] for i in sorted(extra)],
        dy=(names[dy[0]], dy[1]), x=x, gamma=param, gamma_read=gamma, dx=dx, dgamma=dgamma, dbeta=dbeta,
        axes=forward.axes, epsilon=forward.epsilon, begin_norm_axis=forward.begin_norm_axis,
        begin_params_axis=-len(params), dtype=dtype, extra_terms=terms,
        recomputed=[(names[t[0]], t[1]) for t in recomputed])


def common_scope(sg: "ScopeGraph", names: tuple[str, ...]) -> "Scope":
    """The deepest scope holding every one of ``names``."""
    paths = [n.split("/")[:-1] for n in names]
    common: list[str] = []
    for parts in zip(*paths, strict=False):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    scope = sg.scope("/".join(common)) if common else None
    if scope is None:
        fail("the layer norm lies in no name scope")
    return scope


def gradient_scope(sg: "ScopeGraph", rsqrt_grad: str, forward: "Scope | ScopePart") -> "Scope":
    """``<gradient root>/<forward scope>``, the scope holding ``rsqrt_grad``."""
    parts, own = rsqrt_grad.split("/"), forward.name.split("/")
    for k in range(1, len(parts) - len(own)):
        if parts[k:k + len(own)] == own and GRADIENT_ROOT.fullmatch(parts[k - 1]):
            scope = sg.scope("/".join(parts[:k + len(own)]))
            if scope is not None:
                return scope
    fail(f"{rsqrt_grad!r} lies in no gradient scope of {forward.name!r} (gradients/{forward.name}/ or "
         f"gradient_tape/{forward.name}/)")


def _scale(sg: "ScopeGraph", rsqrt: str, fwd: set[int]) -> tuple[Tensor, set[int]]:
    """gamma as the forward multiplies the normaliser by it, and the forward nodes that depend on it."""
    index = sg.index
    for c, port, _ in index.consumers[index.index[rsqrt]]:
        if c in fwd and port >= 0 and index.ops[c] == "Mul":
            other = [t for t in index.inputs[c] if t[1] != CONTROL and t[0] != index.index[rsqrt]]
            if len(other) == 1:
                side = _downstream(sg, c, fwd) | {other[0][0]}
                return (index.names[other[0][0]], other[0][1]), side
    fail(f"nothing in the forward scope multiplies {rsqrt!r} by a scale (gamma)")


def _downstream(sg: "ScopeGraph", start: int, within: set[int]) -> set[int]:
    consumers = sg.index.consumers
    seen, stack = {start}, [start]
    while stack:
        for c, port, _ in consumers[stack.pop()]:
            if c in within and port >= 0 and c not in seen:
                seen.add(c)
                stack.append(c)
    return seen


def _sums(sg: "ScopeGraph", members: set[int]) -> set[int]:
    """The AddN nodes outside the scope that only sum the region's tensors (added to ``members``)."""
    index = sg.index
    extra: set[int] = set()
    frontier = list(members)
    while frontier:
        found = []
        for m in frontier:
            for c, port, _ in index.consumers[m]:
                if port >= 0 and c not in members and index.ops[c] == "AddN" and all(
                        t[0] in members for t in index.inputs[c] if t[1] != CONTROL):
                    members.add(c)
                    extra.add(c)
                    found.append(c)
        frontier = found
    return extra


def _entering(sg: "ScopeGraph", members: set[int]) -> set[tuple[int, int]]:
    inputs = sg.index.inputs
    return {t for m in members for t in inputs[m] if t[1] != CONTROL and t[0] not in members}


def _dy(sg: "ScopeGraph", entering: set[tuple[int, int]], fwd: set[int], x: tuple[int, int] | None,
        gamma: tuple[int, int], gamma_side: set[int]) -> tuple[int, int]:
    """The one entering tensor that is neither x, gamma, a forward tensor nor a constant (x, unless None,
    must be read)."""
    if x is not None and x not in entering:
        fail(f"the gradient does not read x {sg.index.names[x[0]]!r}")
    if gamma not in entering:
        fail(f"the gradient does not read gamma {sg.index.names[gamma[0]]!r}")
    others = sorted(t for t in entering if t not in (x, gamma) and t[0] not in fwd and t[0] not in gamma_side
                    and sg.constant_chain(t[0]) is None)
    if len(others) != 1:
        shown = ", ".join(sg.index.names[t[0]] for t in others[:3]) or "none"
        fail(f"the gradient reads {len(others)} tensors from outside besides x, gamma, the forward statistics "
             f"and constants ({shown}); a layer norm's gradient reads one, dy")
    return others[0]


def _check_of_x_and_gamma(sg: "ScopeGraph", tensor: tuple[int, int], fwd: set[int], x: tuple[int, int],
                          gamma: tuple[int, int]) -> None:
    """Refuses a tensor the gradient reads from the forward that is not computed, inside the forward
    scope, from x, gamma and constants alone (the fused op could not compute it from its inputs)."""
    index = sg.index
    seen, stack = set(), [tensor]
    while stack:
        t = stack.pop()
        if (t in (x, gamma) and t != tensor) or t in seen or sg.constant_chain(t[0]) is not None:
            continue
        seen.add(t)
        if t[0] not in fwd:
            fail(f"the gradient reads {index.names[tensor[0]]!r}, which depends on {index.names[t[0]]!r}, "
                 "neither x, gamma nor a constant")
        stack.extend(i for i in index.inputs[t[0]] if i[1] != CONTROL)


def _dependence(sg: "ScopeGraph", members: set[int], seeds: dict[tuple[int, int], int], fwd: set[int],
                gamma_side: set[int]) -> dict[int, int]:
    """Per member, which of dy, the forward and gamma its value depends on."""
    index = sg.index
    flags: dict[int, int] = {}
    for m in sorted(members, key=lambda i: index.position[i]):  # graph order: producers first
        value = 0
        for t in index.inputs[m]:
            if t[1] == CONTROL:
                continue
            if t[0] in members:
                value |= flags.get(t[0], 0)
            elif t in seeds:
                value |= seeds[t]
            elif t[0] in gamma_side:
                value |= GAMMA | FORWARD
            elif t[0] in fwd:
                value |= FORWARD
        flags[m] = value
    return flags


def _outputs(sg: "ScopeGraph", members: set[int], flags: dict[int, int], extra: set[int]
             ) -> tuple[Tensor, Tensor | None, Tensor | None, list[Tensor]]:
    """dx, dgamma and dbeta among the tensors read outside the region (and the other terms of the AddN
    that sums dx, which then joins the region)."""
    index = sg.index
    names = index.names
    kinds: dict[str, list[tuple[int, int]]] = {"dx": [], "dgamma": [], "dbeta": []}
    for m in sorted(members, key=lambda i: index.position[i]):
        ports = sorted({port for c, port, _ in index.consumers[m] if c not in members and port >= 0})
        for port in ports:
            value = flags[m]
            if not value & DY:
                fail(f"{names[m]!r} leaves the gradient but does not depend on dy")
            kind = "dx" if value & GAMMA else "dgamma" if value & FORWARD else "dbeta"
            kinds[kind].append((m, port))
    for kind in ("dgamma", "dbeta"):
        if len(kinds[kind]) > 1:
            fail(f"{len(kinds[kind])} tensors of the gradient leave it as {kind}: "
                 f"{', '.join(names[t[0]] for t in kinds[kind][:3])}")
    partials, terms = kinds["dx"], []
    if not partials:
        fail("no contribution to dx leaves the gradient")
    if len(partials) > 1:
        readers = {c for t in partials for c, port, _ in index.consumers[t[0]] if port >= 0 and c not in members}
        (total,) = readers if len(readers) == 1 else (None,)
        if total is None or index.ops[total] != "AddN":
            fail(f"the {len(partials)} contributions to dx are not summed by one AddN")
        members.add(total)
        extra.add(total)
        terms = [(names[t[0]], t[1]) for t in index.inputs[total] if t[1] != CONTROL and t not in partials]
        partials = [(total, 0)]
    tensor = lambda t: (names[t[0]], t[1])  # noqa: E731
    dgamma = tensor(kinds["dgamma"][0]) if kinds["dgamma"] else None
    dbeta = tensor(kinds["dbeta"][0]) if kinds["dbeta"] else None
    return tensor(partials[0]), dgamma, dbeta, terms


def check_forward(sg: "ScopeGraph", forward: "Scope | ScopePart", evaluator: Evaluator, statistics: tuple[str, ...],
                  gradient: set[int], lead: str, base: Poly) -> None:
    """The forward output, the one normalised tensor read outside the forward scope and its gradient,
    must be ``base * gamma + beta`` (``base``: the normalised x in the evaluator's symbols)."""
    index = sg.index
    inside = set(forward.node_names())
    leaving = [n for n in forward.node_names()
               if any(c not in gradient and index.names[c] not in inside and port >= 0
                      for c, port, _ in index.consumers[index.index[n]])
               and n not in statistics and evaluator.depends((n, 0))]
    if len(leaving) != 1:
        fail(f"{len(leaving)} normalised tensors leave the forward scope {forward.name!r} besides its gradient; "
             "a layer norm has one output y")
    scale_and_offset(forward, evaluator, evaluator.value((leaving[0], 0)), lead, base)
