"""Identifying an instance normalization by wiring (see the package docstring)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from ....core.fusion.refusal import fail
from ....core.graph.vocabulary import ADD_OPS, DT_FLOAT, DT_HALF, FORWARDING_OPS, MUL_OPS

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope, ScopeGraph

from .op import NCHW, NHWC
from .reads import (
    OTHER_NORMALIZATION, _data_consumers, _inputs, _other_input, _other_input_or, _reduction_axes,
    _spatial_layout, _tensor, _within,
)


@dataclass
class _Param:
    """How gamma or beta reaches the batch normalization."""

    reader: str  # inner node whose input slot is mapped to the fused input
    slot: int
    tensor: tuple[str, int]  # the [C] tensor the fused op takes
    extra_nodes: list[str] = field(default_factory=list)  # a per-channel Reshape and its shape


@dataclass
class _Match:
    """One instance normalization, identified by wiring."""

    name: str
    scopes: list["Scope"]
    extra_nodes: list[str]
    x: tuple[str, int]
    x_readers: list[str]
    mean_out: str
    variance_out: str
    out_add: str
    gamma: _Param | None
    beta: _Param | None
    attrs: dict[str, Any]
    channel_axis: int


@dataclass
class _Candidate:
    moments: "Scope"
    name: str
    match: _Match | None = None
    rejection: str | None = None


# ------------------------------------------------------------------- analysis
def _slots_of(sg: "ScopeGraph", node: str, tensor: tuple[str, int], fused: int) -> list[int | None]:
    return [fused if sg.producer(node, k) == tensor else None for k in range(len(sg.input_names(node)))]


def _param(
    sg: "ScopeGraph", what: str, reader: str, slot: int, data_format: str, rank: int, channel: int,
    owner: "Scope",
) -> _Param:
    """Check that ``reader``'s input ``slot`` is a per-channel gamma / beta."""
    tensor = sg.producer(reader, slot)
    node = tensor[0]
    if sg.op_of(node) == "Reshape" and tensor[1] == 0 and _within(owner, sg.scope_of(node)):
        # tf_slim NCHW: beta / gamma of shape [C] reshaped to [1, C, 1, 1]
        shape_node = sg.producer(node, 1)[0]
        shape = sg.const_value(shape_node)
        source = sg.producer(node, 0)
        if (shape is not None and shape.ndim == 1 and len(shape) == rank
                and all(int(s) == 1 for i, s in enumerate(shape) if i != channel)
                and sg.rank(_tensor(source)) == 1):
            size = sg.const_value(source[0])
            if size is not None and int(shape[channel]) not in (-1, size.size):
                fail(f"{what} has {size.size} values but is reshaped to {shape.tolist()}")
            extra = [node]
            if sg.op_of(shape_node) == "Const" and _within(owner, sg.scope_of(shape_node)):
                extra.append(shape_node)
            return _Param(node, 0, source, extra)
    param_rank = sg.rank(_tensor(tensor))
    if param_rank == 1 and data_format == NHWC:
        return _Param(reader, slot, tensor)
    value = sg.const_value(node)
    if value is not None and value.ndim == rank and all(d == 1 for i, d in enumerate(value.shape) if i != channel):
        fail(
            f"{what} is per channel but has shape {list(value.shape)}; InstanceNorm takes it as [C]"
        )
    if data_format == NCHW and param_rank is not None and 1 <= param_rank <= rank - 2:
        # it spans the trailing (normalised) axes: a layer norm's parameter
        fail(
            f"{what} {_tensor(tensor)!r} (rank {param_rank}) spans the normalised trailing axes, "
            f"as a layer normalization's does, not the channels",
            kind=OTHER_NORMALIZATION,
        )
    described = "of unknown rank" if param_rank is None else f"of rank {param_rank}"
    fail(
        f"{what} {_tensor(tensor)!r} is a tensor {described}, not a per-channel vector [C] "
        f"for {data_format} input"
    )


@dataclass
class _Moments:
    """``mean = Mean(x)``, ``variance = Mean(SquaredDifference(x, mean))`` over the spatial axes."""

    mean: str
    variance: str
    squared_difference: str
    centre: tuple[str, int]  # what the SquaredDifference subtracts: the mean, maybe through a StopGradient
    cast_in: str | None  # tf.nn.moments on float16 computes in float32
    x: tuple[str, int]
    axes: list[int]
    data_format: str
    rank: int
    channel: int
    mean_out: str  # the moments as the batch normalization reads them (cast back to float16)
    variance_out: str


@dataclass
class _Normaliser:
    """``inv = rsqrt(variance + epsilon) [* gamma]``, ``y = x * inv + (beta - mean * inv)``."""

    eps_add: str
    epsilon: float
    rsqrt: str
    scope: "Scope"
    scale_mul: str | None
    gamma_slot: int | None
    x_mul: str
    mean_mul: str | None
    neg_mul: str | None
    sub: str | None
    beta_slot: int | None
    out_add: str
    inv: str


def _analyse(moments: "Scope", *, alone: bool) -> _Match:
    """Identify the instance normalization whose moments lie in ``moments``."""
    sg = moments.graph
    parent = moments.parent
    assert parent is not None
    m = _read_moments(moments)
    # from here on the moments are an instance normalization's: problems are refusals
    n = _read_normaliser(sg, m, moments, parent)
    core = _core_nodes(sg, m, n)
    gamma, beta = _params(sg, m, n, parent)
    scopes, extra = _members(sg, moments, parent, n.scope, core, [gamma, beta])
    x_readers = [m.cast_in, n.x_mul] if m.cast_in is not None else [m.mean, m.squared_difference, n.x_mul]
    dtype = sg.node(n.out_add).attr["T"].type
    if m.cast_in is None and sg.node(m.mean).attr["T"].type != dtype:
        fail("the moments and the output have different types")
    if alone and not parent.is_root:
        name = parent.name
    elif not n.scope.is_root and n.scope is not parent:
        name = n.scope.name
    else:
        name = moments.name
    return _Match(
        name=name, scopes=scopes, extra_nodes=extra, x=m.x, x_readers=x_readers,
        mean_out=m.mean_out, variance_out=m.variance_out, out_add=n.out_add, gamma=gamma, beta=beta,
        attrs={"epsilon": n.epsilon, "axes": m.axes, "data_format": m.data_format, "T": dtype},
        channel_axis=m.channel,
    )


def _read_moments(moments: "Scope") -> _Moments:
    """The statistics in ``moments``; refused of kind :data:`OTHER_NORMALIZATION` when they are not
    an instance normalization's (other axes), refused plainly when the op cannot take them."""
    sg = moments.graph
    in_moments = set(moments.node_names())
    means = [n.name for n in moments.nodes_by_op("Mean")]
    variance = next((m for m in means if sg.op_of(sg.producer(m, 0)[0]) == "SquaredDifference"), None)
    mean = next((m for m in means if m != variance), None)
    if variance is None or mean is None:
        fail("the moments are not Mean(x) and Mean(SquaredDifference(x, mean))", kind=OTHER_NORMALIZATION)
    squared_difference = sg.producer(variance, 0)[0]
    moments_in = sg.producer(mean, 0)
    cast_in = None
    x = moments_in
    if sg.op_of(moments_in[0]) == "Cast" and moments_in[0] in in_moments:
        cast_in = moments_in[0]
        x = sg.producer(cast_in, 0)
    _, centre = _other_input_or(sg, squared_difference, moments_in)
    if centre is None or sg.resolve_forwarding(centre[0]) != mean:
        fail("the SquaredDifference does not subtract the mean of the same input", kind=OTHER_NORMALIZATION)
    raw_axes = _reduction_axes(sg, mean)
    if sorted(_reduction_axes(sg, variance)) != sorted(raw_axes):
        fail("mean and variance reduce different axes", kind=OTHER_NORMALIZATION)
    rank = sg.rank(_tensor(x))
    data_format, axes = _spatial_layout(raw_axes, rank, _tensor(x))
    assert rank is not None
    for name in (mean, variance):
        node = sg.node(name)
        if "keep_dims" not in node.attr or not node.attr["keep_dims"].b:
            fail(f"{name!r} does not keep the reduced dimensions")
    mean_out, variance_out = _cast_back(sg, in_moments, cast_in, mean, variance)
    if moments.nodes_by_op("Squeeze"):
        fail("the moments squeeze the reduced dimensions")
    return _Moments(mean, variance, squared_difference, centre, cast_in, x, axes, data_format, rank,
                    1 if data_format == NCHW else rank - 1, mean_out, variance_out)


def _cast_back(sg: "ScopeGraph", in_moments: set[str], cast_in: str | None, mean: str,
               variance: str) -> tuple[str, str]:
    """The moments as the normalization reads them: cast back to float16 when computed in float32."""
    if cast_in is None:
        return mean, variance
    src, dst = sg.node(cast_in).attr["SrcT"].type, sg.node(cast_in).attr["DstT"].type
    if (src, dst) != (DT_HALF, DT_FLOAT):
        fail("the moments cast their input to another type (only float16 -> float32 is taken)")
    casts = {}
    for m in (mean, variance):
        back = [c for c in _data_consumers(sg, m, ("Cast",)) if c in in_moments]
        if len(back) != 1 or sg.node(back[0]).attr["DstT"].type != DT_HALF:
            fail(f"the float32 moment {m!r} is not cast back to float16 once")
        casts[m] = back[0]
    return casts[mean], casts[variance]


def _read_normaliser(sg: "ScopeGraph", m: _Moments, moments: "Scope", parent: "Scope") -> _Normaliser:
    """tf.nn.batch_normalization's nodes around the moments."""
    eps_add = eps_value = None
    for add in _data_consumers(sg, m.variance_out, ADD_OPS):
        _, other = _other_input(sg, add, (m.variance_out, 0))
        value = sg.const_value(other[0])
        if value is not None and value.size == 1:
            eps_add, eps_value = add, float(value.reshape(-1)[0])
    if eps_add is None or eps_value is None:
        fail("no constant epsilon is added to the variance")
    rsqrts = _data_consumers(sg, eps_add, ("Rsqrt",))
    if len(rsqrts) != 1:
        fail("variance + epsilon does not feed one Rsqrt")
    rsqrt = rsqrts[0]
    bn_scope = sg.scope_of(rsqrt)
    if not _within(parent, bn_scope) or _within(moments, bn_scope):
        fail(f"the batch normalization ({bn_scope.name!r}) lies outside {parent.name!r}")
    neg_means = _data_consumers(sg, m.mean_out, ("Neg",))

    def is_centre(t: tuple[str, int]) -> bool:
        return t == (m.mean_out, 0) or (t[0] in neg_means and t[1] == 0)

    scale_mul = gamma_slot = None
    for mul in _data_consumers(sg, rsqrt, MUL_OPS):
        slot, other = _other_input(sg, mul, (rsqrt, 0))
        if other != m.x and not is_centre(other):
            if scale_mul is not None:
                fail("Rsqrt is multiplied by more than one scale")
            scale_mul, gamma_slot = mul, slot
    inv = scale_mul or rsqrt
    products: dict[str, str | None] = {"x": None, "mean": None, "neg": None}
    for mul in _data_consumers(sg, inv, MUL_OPS):
        _, other = _other_input(sg, mul, (inv, 0))
        kind = "x" if other == m.x else "mean" if other == (m.mean_out, 0) else "neg" if is_centre(other) else None
        if kind is not None:
            products[kind] = mul
    x_mul = products["x"]
    if x_mul is None:
        fail("x is not multiplied by rsqrt(variance + epsilon) [* gamma]")
    sub, beta_slot, out_add = _offset(sg, x_mul, products["mean"], products["neg"])
    return _Normaliser(eps_add, eps_value, rsqrt, bn_scope, scale_mul, gamma_slot, x_mul, products["mean"],
                       products["neg"], sub, beta_slot, out_add, inv)


def _offset(sg: "ScopeGraph", x_mul: str, mean_mul: str | None,
            neg_mul: str | None) -> tuple[str | None, int | None, str]:
    """``(Sub of beta - mean * inv or None, beta's slot, the output Add)``."""
    sub = beta_slot = None
    if mean_mul is not None:
        subs = [s for s in _data_consumers(sg, mean_mul, ("Sub",)) if sg.producer(s, 1) == (mean_mul, 0)]
        if len(subs) != 1:
            fail("the offset is not beta - mean * inv")
        sub, beta_slot = subs[0], 0
        shift = sub
    elif neg_mul is not None:
        shift = neg_mul
    else:
        fail("the mean is not multiplied by rsqrt(variance + epsilon) [* gamma]")
    out_add = next((a for a in _data_consumers(sg, x_mul, ADD_OPS) if (shift, 0) in _inputs(sg, a)), None)
    if out_add is None:
        fail("the output is not x * inv + (beta - mean * inv)")
    return sub, beta_slot, out_add


def _core_nodes(sg: "ScopeGraph", m: _Moments, n: _Normaliser) -> set[str]:
    """The nodes the normalization computes with (not its parameters)."""
    core = {m.mean, m.variance, m.squared_difference, n.eps_add, n.rsqrt, n.x_mul, n.out_add, m.mean_out,
            m.variance_out}
    core.update(x for x in (m.cast_in, n.scale_mul, n.mean_mul, n.neg_mul, n.sub) if x is not None)
    if n.neg_mul is not None:
        core.add(_other_input(sg, n.neg_mul, (n.inv, 0))[1][0])
    name = m.centre[0]  # StopGradient / Identity between mean and SquaredDifference
    while name != m.mean and sg.op_of(name) in FORWARDING_OPS:
        core.add(name)
        name = sg.producer(name, 0)[0]
    return core


def _params(sg: "ScopeGraph", m: _Moments, n: _Normaliser, parent: "Scope") -> tuple[_Param | None, _Param | None]:
    """gamma and beta, each a per-channel vector (or absent)."""
    gamma = beta = None
    if n.scale_mul is not None and n.gamma_slot is not None:
        gamma = _param(sg, "gamma", n.scale_mul, n.gamma_slot, m.data_format, m.rank, m.channel, parent)
    if n.sub is not None and n.beta_slot is not None:
        beta = _param(sg, "beta", n.sub, n.beta_slot, m.data_format, m.rank, m.channel, parent)
    slim_named = parent.last_name == "InstanceNorm" or n.scope.last_name == "instancenorm"
    if m.data_format == NCHW and gamma is None and beta is None and not slim_named:
        fail(
            f"moments over the trailing axes {m.axes} without per-channel gamma or beta: "
            f"the same as a layer normalization",
            kind=OTHER_NORMALIZATION,
        )
    if gamma is not None and beta is not None:
        g_value, b_value = (sg.const_value(p.tensor[0]) for p in (gamma, beta))
        if g_value is not None and b_value is not None and g_value.size != b_value.size:
            fail(f"gamma has {g_value.size} values and beta {b_value.size}")
    return gamma, beta


def _members(sg: "ScopeGraph", moments: "Scope", parent: "Scope", bn_scope: "Scope", core: set[str],
             params: Sequence[_Param | None]) -> tuple[list["Scope"], list[str]]:
    """The result's scopes and the nodes outside them it also replaces."""
    in_moments = set(moments.node_names())
    bn_nodes = core - in_moments
    outside = sorted(n for n in bn_nodes if not _within(bn_scope, sg.scope_of(n)))
    if outside:
        fail(f"the batch normalization is spread over several scopes: {outside[0]!r}")
    reads = _param_reads(sg, params)
    extra: list[str] = [node for p in params if p is not None for node in p.extra_nodes]
    scopes = [moments]
    if bn_scope is parent or bn_scope.is_root:
        # no scope of its own: take its nodes and the constants only they read
        extra.extend(sorted(bn_nodes))
        extra.extend(_private_consts(sg, bn_nodes, parent))
    else:
        scopes.append(bn_scope)
        _check_only(sg, bn_scope, core | reads | set(extra))
    _check_only(sg, moments, core)
    return scopes, list(dict.fromkeys(extra))


def _param_reads(sg: "ScopeGraph", params: Sequence[_Param | None]) -> set[str]:
    """Identity-like reads of gamma / beta (tf_slim's ``ReadVariableOp`` after freezing)."""
    out: set[str] = set()
    for p in params:
        if p is None:
            continue
        name = p.tensor[0]
        for _ in range(64):
            if sg.op_of(name) not in FORWARDING_OPS:
                break
            out.add(name)
            name = sg.producer(name, 0)[0]
    return out


def _private_consts(sg: "ScopeGraph", nodes: set[str], owner: "Scope") -> list[str]:
    """Constants in ``owner`` read only by ``nodes`` (epsilon, ...)."""
    out = []
    for node in sorted(nodes):
        for producer, _ in _inputs(sg, node):
            if (sg.op_of(producer) == "Const" and _within(owner, sg.scope_of(producer))
                    and all(c in nodes for c in sg.consumer_names(producer))):
                out.append(producer)
    return out


def _check_only(sg: "ScopeGraph", scope: "Scope", allowed: set[str]) -> None:
    """Every node of ``scope`` is part of the normalization or a constant."""
    for node in scope.nodes():
        if node.name in allowed or node.op == "Const":
            continue
        if node.op in FORWARDING_OPS and sg.const_value(node.name) is not None:
            continue
        fail(
            f"scope {scope.name!r} holds {node.name!r} ({node.op}), which is not part of the normalization"
        )
