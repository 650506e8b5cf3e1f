"""Identifying an instance normalization by wiring (see the package docstring)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from ....core.graph.vocabulary import FORWARDING_OPS

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope, ScopeGraph

from .op import ADD_OPS, NHWC, NCHW, DT_HALF, DT_FLOAT


class NotInstanceNorm(Exception):
    """The candidate is an instance normalization the fused op cannot take (refused)."""


class OtherNormalization(Exception):
    """The moments belong to some other normalization (batch norm, layer norm): not a candidate."""


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


def _tensor(t: tuple[str, int]) -> str:
    return t[0] if t[1] == 0 else f"{t[0]}:{t[1]}"


def _data_consumers(sg: "ScopeGraph", name: str, ops: Sequence[str]) -> list[str]:
    """Nodes of ``ops`` that read output 0 of ``name`` as data."""
    out = []
    for c in dict.fromkeys(sg.consumer_names(name)):
        if sg.op_of(c) in ops and (name, 0) in _inputs(sg, c):
            out.append(c)
    return out


def _inputs(sg: "ScopeGraph", node: str) -> list[tuple[str, int]]:
    return [sg.producer(node, k) for k in range(len(sg.input_names(node)))]


def _other_input(sg: "ScopeGraph", node: str, known: tuple[str, int]) -> tuple[int, tuple[str, int]]:
    ins = _inputs(sg, node)
    if len(ins) != 2:
        raise NotInstanceNorm(f"{node!r} does not have two inputs")
    if ins[0] == known:
        return 1, ins[1]
    if ins[1] == known:
        return 0, ins[0]
    raise NotInstanceNorm(f"{node!r} does not read {_tensor(known)!r}")


def _reduction_axes(sg: "ScopeGraph", mean: str) -> list[int]:
    value = sg.const_value(sg.producer(mean, 1)[0])
    if value is None:
        raise NotInstanceNorm(f"the reduction indices of {mean!r} are not constant")
    return [int(a) for a in value.reshape(-1)]


def _spatial_layout(axes: list[int], rank: int | None, x: str) -> tuple[str, list[int]]:
    """(data_format, normalised axes) for moments over ``axes`` of a rank-``rank`` input."""
    if rank is None:
        if any(a == 0 for a in axes):
            raise OtherNormalization(f"the moments reduce axes {axes}, including the batch axis 0")
        raise OtherNormalization(f"cannot tell the rank of {x!r}, so whether axes {axes} are its spatial axes")
    if any(not -rank <= a < rank for a in axes):
        raise OtherNormalization(f"reduction axes {axes} are out of range for a rank-{rank} input")
    norm = sorted({a % rank for a in axes})
    if len(norm) != len(axes):
        raise OtherNormalization(f"reduction axes {axes} repeat an axis")
    if 0 in norm:
        raise OtherNormalization(f"the moments reduce axes {norm}, including the batch axis 0")
    if rank < 3:
        raise OtherNormalization(f"a rank-{rank} input has no spatial axes")
    if norm == list(range(1, rank - 1)):
        return NHWC, norm
    if norm == list(range(2, rank)):
        return NCHW, norm
    raise OtherNormalization(
        f"the moments reduce axes {norm} of a rank-{rank} input, not its spatial axes "
        f"({list(range(1, rank - 1))} for NHWC, {list(range(2, rank))} for NCHW)"
    )


def _within(scope: "Scope", node_scope: "Scope") -> bool:
    return node_scope is scope or scope.is_ancestor_of(node_scope)


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
                raise NotInstanceNorm(f"{what} has {size.size} values but is reshaped to {shape.tolist()}")
            extra = [node]
            if sg.op_of(shape_node) == "Const" and _within(owner, sg.scope_of(shape_node)):
                extra.append(shape_node)
            return _Param(node, 0, source, extra)
    param_rank = sg.rank(_tensor(tensor))
    if param_rank == 1 and data_format == NHWC:
        return _Param(reader, slot, tensor)
    value = sg.const_value(node)
    if value is not None and value.ndim == rank and all(d == 1 for i, d in enumerate(value.shape) if i != channel):
        raise NotInstanceNorm(
            f"{what} is per channel but has shape {list(value.shape)}; InstanceNorm takes it as [C]"
        )
    if data_format == NCHW and param_rank is not None and 1 <= param_rank <= rank - 2:
        # it spans the trailing (normalised) axes: a layer norm's parameter
        raise OtherNormalization(
            f"{what} {_tensor(tensor)!r} (rank {param_rank}) spans the normalised trailing axes, "
            f"as a layer normalization's does, not the channels"
        )
    described = "of unknown rank" if param_rank is None else f"of rank {param_rank}"
    raise NotInstanceNorm(
        f"{what} {_tensor(tensor)!r} is a tensor {described}, not a per-channel vector [C] "
        f"for {data_format} input"
    )


def _analyse(moments: "Scope", *, alone: bool) -> _Match:
    """Identify the instance normalization whose moments lie in ``moments``."""
    sg = moments.graph
    parent = moments.parent
    assert parent is not None
    in_moments = set(moments.node_names())

    # -- moments: mean = Mean(x), variance = Mean(SquaredDifference(x, mean)) --------
    means = [n.name for n in moments.nodes_by_op("Mean")]
    variance = next((m for m in means if sg.op_of(sg.producer(m, 0)[0]) == "SquaredDifference"), None)
    mean = next((m for m in means if m != variance), None)
    if variance is None or mean is None:
        raise OtherNormalization("the moments are not Mean(x) and Mean(SquaredDifference(x, mean))")
    squared_difference = sg.producer(variance, 0)[0]
    moments_in = sg.producer(mean, 0)
    cast_in = None
    if sg.op_of(moments_in[0]) == "Cast" and moments_in[0] in in_moments:
        cast_in = moments_in[0]  # tf.nn.moments on float16 computes in float32
        x = sg.producer(cast_in, 0)
    else:
        x = moments_in
    _, centre = _other_input_or(sg, squared_difference, moments_in)
    if centre is None or sg.resolve_forwarding(centre[0]) != mean:
        raise OtherNormalization("the SquaredDifference does not subtract the mean of the same input")
    raw_axes = _reduction_axes(sg, mean)
    if sorted(_reduction_axes(sg, variance)) != sorted(raw_axes):
        raise OtherNormalization("mean and variance reduce different axes")
    rank = sg.rank(_tensor(x))
    data_format, axes = _spatial_layout(raw_axes, rank, _tensor(x))
    assert rank is not None
    channel = 1 if data_format == NCHW else rank - 1

    # from here on the moments are an instance normalization's: problems are refusals
    for m in (mean, variance):
        node = sg.node(m)
        if "keep_dims" not in node.attr or not node.attr["keep_dims"].b:
            raise NotInstanceNorm(f"{m!r} does not keep the reduced dimensions")
    mean_out, variance_out = mean, variance
    if cast_in is not None:
        src, dst = sg.node(cast_in).attr["SrcT"].type, sg.node(cast_in).attr["DstT"].type
        if (src, dst) != (DT_HALF, DT_FLOAT):
            raise NotInstanceNorm("the moments cast their input to another type (only float16 -> float32 is taken)")
        casts = {}
        for m in (mean, variance):
            back = [c for c in _data_consumers(sg, m, ("Cast",)) if c in in_moments]
            if len(back) != 1 or sg.node(back[0]).attr["DstT"].type != DT_HALF:
                raise NotInstanceNorm(f"the float32 moment {m!r} is not cast back to float16 once")
            casts[m] = back[0]
        mean_out, variance_out = casts[mean], casts[variance]
    if moments.nodes_by_op("Squeeze"):
        raise NotInstanceNorm("the moments squeeze the reduced dimensions")

    # -- batch_normalization: inv = rsqrt(variance + epsilon) [* gamma] ------------------
    eps_add = eps_value = None
    for add in _data_consumers(sg, variance_out, ADD_OPS):
        _, other = _other_input(sg, add, (variance_out, 0))
        value = sg.const_value(other[0])
        if value is not None and value.size == 1:
            eps_add, eps_value = add, float(value.reshape(-1)[0])
    if eps_add is None or eps_value is None:
        raise NotInstanceNorm("no constant epsilon is added to the variance")
    rsqrts = _data_consumers(sg, eps_add, ("Rsqrt",))
    if len(rsqrts) != 1:
        raise NotInstanceNorm("variance + epsilon does not feed one Rsqrt")
    rsqrt = rsqrts[0]
    bn_scope = sg.scope_of(rsqrt)
    if not _within(parent, bn_scope) or _within(moments, bn_scope):
        raise NotInstanceNorm(f"the batch normalization ({bn_scope.name!r}) lies outside {parent.name!r}")

    neg_means = _data_consumers(sg, mean_out, ("Neg",))

    def is_centre(t: tuple[str, int]) -> bool:
        return t == (mean_out, 0) or (t[0] in neg_means and t[1] == 0)

    scale_mul = gamma_slot = None
    for mul in _data_consumers(sg, rsqrt, ("Mul",)):
        slot, other = _other_input(sg, mul, (rsqrt, 0))
        if other != x and not is_centre(other):
            if scale_mul is not None:
                raise NotInstanceNorm("Rsqrt is multiplied by more than one scale")
            scale_mul, gamma_slot = mul, slot
    inv = scale_mul or rsqrt
    x_mul = mean_mul = neg_mul = None
    for mul in _data_consumers(sg, inv, ("Mul",)):
        _, other = _other_input(sg, mul, (inv, 0))
        if other == x:
            x_mul = mul
        elif other == (mean_out, 0):
            mean_mul = mul
        elif is_centre(other):
            neg_mul = mul
    if x_mul is None:
        raise NotInstanceNorm("x is not multiplied by rsqrt(variance + epsilon) [* gamma]")
    sub = beta_slot = None
    if mean_mul is not None:
        subs = [s for s in _data_consumers(sg, mean_mul, ("Sub",)) if sg.producer(s, 1) == (mean_mul, 0)]
        if len(subs) != 1:
            raise NotInstanceNorm("the offset is not beta - mean * inv")
        sub, beta_slot = subs[0], 0
        shift = sub
    elif neg_mul is not None:
        shift = neg_mul
    else:
        raise NotInstanceNorm("the mean is not multiplied by rsqrt(variance + epsilon) [* gamma]")
    out_add = next((a for a in _data_consumers(sg, x_mul, ADD_OPS)
                    if (shift, 0) in _inputs(sg, a)), None)
    if out_add is None:
        raise NotInstanceNorm("the output is not x * inv + (beta - mean * inv)")

    core = {mean, variance, squared_difference, eps_add, rsqrt, x_mul, out_add, mean_out, variance_out}
    core.update(n for n in (cast_in, scale_mul, mean_mul, neg_mul, sub) if n is not None)
    if neg_mul is not None:
        core.add(_other_input(sg, neg_mul, (inv, 0))[1][0])
    for node in (centre[0],):  # StopGradient / Identity between mean and SquaredDifference
        name = node
        while name != mean and sg.op_of(name) in FORWARDING_OPS:
            core.add(name)
            name = sg.producer(name, 0)[0]

    # -- gamma / beta ----------------------------------------------------------------
    gamma = beta = None
    if scale_mul is not None and gamma_slot is not None:
        gamma = _param(sg, "gamma", scale_mul, gamma_slot, data_format, rank, channel, parent)
    if sub is not None and beta_slot is not None:
        beta = _param(sg, "beta", sub, beta_slot, data_format, rank, channel, parent)
    slim_named = parent.last_name == "InstanceNorm" or bn_scope.last_name == "instancenorm"
    if data_format == NCHW and gamma is None and beta is None and not slim_named:
        raise OtherNormalization(
            f"moments over the trailing axes {axes} without per-channel gamma or beta: "
            f"the same as a layer normalization"
        )
    if gamma is not None and beta is not None:
        g_value, b_value = (sg.const_value(p.tensor[0]) for p in (gamma, beta))
        if g_value is not None and b_value is not None and g_value.size != b_value.size:
            raise NotInstanceNorm(f"gamma has {g_value.size} values and beta {b_value.size}")

    # -- what the result holds -------------------------------------------------------
    bn_nodes = core - in_moments
    outside = sorted(n for n in bn_nodes if not _within(bn_scope, sg.scope_of(n)))
    if outside:
        raise NotInstanceNorm(f"the batch normalization is spread over several scopes: {outside[0]!r}")
    reads = _param_reads(sg, [gamma, beta])
    extra: list[str] = []
    for p in (gamma, beta):
        if p is not None:
            extra.extend(p.extra_nodes)
    scopes = [moments]
    if bn_scope is parent or bn_scope.is_root:
        # no scope of its own: take its nodes and the constants only they read
        extra.extend(sorted(bn_nodes))
        extra.extend(_private_consts(sg, bn_nodes, parent))
    else:
        scopes.append(bn_scope)
        _check_only(sg, bn_scope, core | reads | set(extra))
    _check_only(sg, moments, core)

    x_readers = [cast_in, x_mul] if cast_in is not None else [mean, squared_difference, x_mul]
    dtype = sg.node(out_add).attr["T"].type
    if cast_in is None and sg.node(mean).attr["T"].type != dtype:
        raise NotInstanceNorm("the moments and the output have different types")
    if alone and not parent.is_root:
        name = parent.name
    elif not bn_scope.is_root and bn_scope is not parent:
        name = bn_scope.name
    else:
        name = moments.name
    return _Match(
        name=name, scopes=scopes, extra_nodes=list(dict.fromkeys(extra)), x=x, x_readers=x_readers,
        mean_out=mean_out, variance_out=variance_out, out_add=out_add, gamma=gamma, beta=beta,
        attrs={"epsilon": eps_value, "axes": axes, "data_format": data_format, "T": dtype},
        channel_axis=channel,
    )


def _other_input_or(sg: "ScopeGraph", node: str, known: tuple[str, int]) -> tuple[int, tuple[str, int] | None]:
    try:
        return _other_input(sg, node, known)
    except NotInstanceNorm:
        return -1, None


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
        raise NotInstanceNorm(
            f"scope {scope.name!r} holds {node.name!r} ({node.op}), which is not part of the normalization"
        )
