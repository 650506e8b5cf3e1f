"""ScopeLayerNormPass: BERT / tf_slim ``layer_norm`` scopes -> ``LayerNorm``.

The scopes look like (tf_slim, TF1 or TF2, ``Add`` or ``AddV2``)::

    .../LayerNorm/moments/{mean, StopGradient, SquaredDifference, variance}
    .../LayerNorm/batchnorm/{add, Rsqrt, mul, mul_1, mul_2, sub, add_1}

The pattern finds candidates by name and op counts; the nodes are then
identified by their wiring, not by their names, and every attribute is read
from the graph.  Variants the fused op cannot represent (no gamma, no beta,
axes that are not the trailing ones, ...) are refused with a reason.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from ..core.base_pass import ScopeBasePass
from ..core.fused_ops import AttrDef, FusedOpDef, TensorArg
from ..core.patterns import PatternSet, ScopePattern
from ..core.results import FusionScopesResult

if TYPE_CHECKING:  # pragma: no cover
    from ..core.scope_graph import Scope, ScopeGraph

ADD_OPS = ("Add", "AddV2")


def layer_norm_reference(
    x: Any, gamma: Any, beta: Any, *, begin_norm_axis: int, begin_params_axis: int, epsilon: float, T: Any
) -> tuple[Any, Any, Any]:
    """Normalise ``x`` over axes ``[begin_norm_axis, rank)``, then scale and shift."""
    import tensorflow as tf

    rank = tf.rank(x)
    start = begin_norm_axis if begin_norm_axis >= 0 else rank + begin_norm_axis
    axes = tf.range(start, rank)
    mean = tf.reduce_mean(x, axes, keepdims=True)
    variance = tf.reduce_mean(tf.math.squared_difference(x, mean), axes, keepdims=True)
    y = (x - mean) * tf.math.rsqrt(variance + tf.cast(epsilon, x.dtype)) * gamma + beta
    return y, mean, variance


LAYER_NORM = FusedOpDef(
    name="LayerNorm",
    inputs=(
        TensorArg("x", type_attr="T"),
        TensorArg("gamma", type_attr="T", description="scale, shape x.shape[begin_params_axis:]"),
        TensorArg("beta", type_attr="T", description="offset, same shape as gamma"),
    ),
    outputs=(
        TensorArg("y", type_attr="T"),
        TensorArg("mean", type_attr="T", description="kept dimensions"),
        TensorArg("variance", type_attr="T", description="kept dimensions"),
    ),
    attrs=(
        AttrDef("begin_norm_axis", "int", description="first normalised axis; the rest follow"),
        AttrDef("begin_params_axis", "int", description="first axis gamma and beta span"),
        AttrDef("epsilon", "float", description="added to the variance"),
        AttrDef("T", "type"),
    ),
    reference=layer_norm_reference,
    description="Layer normalization: y = (x - mean) / sqrt(variance + epsilon) * gamma + beta",
)


class NotLayerNorm(Exception):
    """The candidate scope is not a layer normalization we can represent."""


@dataclass
class _Parts:
    x: tuple[str, int]
    mean: str
    variance: str
    squared_difference: str
    eps_add: str
    rsqrt: str
    scale_mul: str
    x_mul: str
    mean_mul: str
    sub: str
    out_add: str
    gamma_slot: int
    beta_slot: int
    epsilon: float
    axes: list[int]


class ScopeLayerNormPass(ScopeBasePass):
    """Layer normalization scopes (tf_slim / BERT layer_norm) -> LayerNorm."""

    name = "ScopeLayerNormPass"
    general = True
    description = "tf_slim / BERT layer_norm scopes (moments + batchnorm) -> LayerNorm(x, gamma, beta)"

    def define_patterns(self) -> list[PatternSet]:
        pattern = (
            ScopePattern("LayerNorm")
            .add_scope_feature(suffix="LayerNorm")
            .add_node_op_type_feature("Mean", 2)
            .add_node_op_type_feature("SquaredDifference", 1)
            .add_node_op_type_feature("Rsqrt", 1)
        )
        return [[[pattern]]]

    def generate_fusion_result(self, scopes: Sequence["Scope"], result: FusionScopesResult) -> None:
        scope = scopes[0]
        try:
            parts = _analyse(scope)
            attrs = _attributes(scope.graph, parts)
        except NotLayerNorm as why:
            result.reject(str(why))
            return
        suffix = scope.suffix_of
        sg = scope.graph
        result.set_type(LAYER_NORM.name)
        result.set_description(f"LayerNorm over axes {parts.axes}")
        for key, value in attrs.items():
            result.set_attr(key, value)
        result.insert_inputs(suffix(parts.mean), [0, None])
        result.insert_inputs(suffix(parts.squared_difference), _slots_of(sg, parts.squared_difference, parts.x, 0))
        result.insert_inputs(suffix(parts.x_mul), _slots_of(sg, parts.x_mul, parts.x, 0))
        result.insert_inputs(suffix(parts.scale_mul), [1 if k == parts.gamma_slot else None for k in range(2)])
        result.insert_inputs(suffix(parts.sub), [2 if k == parts.beta_slot else None for k in range(2)])
        result.insert_outputs(suffix(parts.out_add), [0])
        result.insert_outputs(suffix(parts.mean), [1])
        result.insert_outputs(suffix(parts.variance), [2])


def _slots_of(sg: "ScopeGraph", node: str, tensor: tuple[str, int], fused: int) -> list[int | None]:
    return [fused if sg.producer(node, k) == tensor else None for k in range(len(sg.input_names(node)))]


def _single(scope: "Scope", op: str) -> str:
    nodes = scope.nodes_by_op(op)
    if len(nodes) != 1:
        raise NotLayerNorm(f"expected one {op} node, found {len(nodes)}")
    return nodes[0].name


def _consumers_of_op(sg: "ScopeGraph", name: str, ops: Sequence[str]) -> list[str]:
    return [c for c in sg.consumer_names(name) if sg.op_of(c) in ops]


def _other_input(sg: "ScopeGraph", node: str, known: tuple[str, int]) -> tuple[int, tuple[str, int]]:
    """For a two-input node with ``known`` on one side: (slot, tensor) of the other side."""
    ins = [sg.producer(node, 0), sg.producer(node, 1)]
    if ins[0] == known:
        return 1, ins[1]
    if ins[1] == known:
        return 0, ins[0]
    raise NotLayerNorm(f"{node!r} does not read {known[0]!r}")


def _analyse(scope: "Scope") -> _Parts:
    sg = scope.graph
    inside = set(scope.node_names())

    rsqrt = _single(scope, "Rsqrt")
    eps_add = sg.producer(rsqrt, 0)[0]
    if sg.op_of(eps_add) not in ADD_OPS:
        raise NotLayerNorm(f"Rsqrt reads {sg.op_of(eps_add)} {eps_add!r}, not variance + epsilon")
    means = [n.name for n in scope.nodes_by_op("Mean")]
    eps_slot = variance = None
    for slot in (0, 1):
        producer = sg.producer(eps_add, slot)[0]
        if producer in means:
            variance, eps_slot = producer, 1 - slot
    if variance is None or eps_slot is None:
        raise NotLayerNorm(f"{eps_add!r} does not add epsilon to a Mean")
    eps_value = sg.const_value(sg.producer(eps_add, eps_slot)[0])
    if eps_value is None or eps_value.size != 1:
        raise NotLayerNorm("epsilon is not a scalar constant")
    squared_difference = sg.producer(variance, 0)[0]
    if sg.op_of(squared_difference) != "SquaredDifference":
        raise NotLayerNorm("the variance Mean does not reduce a SquaredDifference")
    mean = next((m for m in means if m != variance), None)
    if mean is None:
        raise NotLayerNorm("no mean node")
    x = sg.producer(mean, 0)
    sd_slot, centre = _other_input(sg, squared_difference, x)
    if sg.resolve_forwarding(centre[0]) != mean:
        raise NotLayerNorm("SquaredDifference does not subtract the mean of the same input")
    for m in (mean, variance):
        node = sg.node(m)
        if "keep_dims" not in node.attr or not node.attr["keep_dims"].b:
            raise NotLayerNorm(f"{m!r} does not keep reduced dimensions")
    axes = _axes(sg, mean)
    if _axes(sg, variance) != axes:
        raise NotLayerNorm("mean and variance reduce different axes")

    # inv = rsqrt(...) [* gamma]
    after_rsqrt = _consumers_of_op(sg, rsqrt, ("Mul",))
    scale_mul = gamma_slot = None
    for mul in after_rsqrt:
        slot, other = _other_input(sg, mul, (rsqrt, 0))
        is_neg_mean = sg.op_of(other[0]) == "Neg" and sg.producer(other[0], 0) == (mean, 0)
        if other != x and sg.resolve_forwarding(other[0]) != mean and not is_neg_mean:
            scale_mul, gamma_slot = mul, slot
    if scale_mul is None or gamma_slot is None:
        raise NotLayerNorm("no gamma (scale=False): LayerNorm needs a scale input")
    inv = (scale_mul, 0)
    x_mul = mean_mul = None
    negated = False
    for mul in _consumers_of_op(sg, scale_mul, ("Mul",)):
        _, other = _other_input(sg, mul, inv)
        if other == x:
            x_mul = mul
        elif other == (mean, 0):
            mean_mul = mul
        elif sg.op_of(other[0]) == "Neg" and sg.producer(other[0], 0) == (mean, 0):
            negated = True
    if mean_mul is None and negated:
        raise NotLayerNorm("no beta (center=False): LayerNorm needs an offset input")
    if x_mul is None or mean_mul is None:
        raise NotLayerNorm("the normalised input is not formed as x * inv and mean * inv")
    subs = _consumers_of_op(sg, mean_mul, ("Sub",))
    if len(subs) != 1 or sg.producer(subs[0], 1) != (mean_mul, 0):
        raise NotLayerNorm("no beta (center=False): LayerNorm needs an offset input")
    sub = subs[0]
    beta_slot = 0
    adds = [a for a in _consumers_of_op(sg, x_mul, ADD_OPS) if a in inside]
    out_add = next((a for a in adds if (sub, 0) in (sg.producer(a, 0), sg.producer(a, 1))), None)
    if out_add is None:
        raise NotLayerNorm("the output is not x * inv + (beta - mean * inv)")
    return _Parts(
        x=x, mean=mean, variance=variance, squared_difference=squared_difference, eps_add=eps_add,
        rsqrt=rsqrt, scale_mul=scale_mul, x_mul=x_mul, mean_mul=mean_mul, sub=sub, out_add=out_add,
        gamma_slot=gamma_slot, beta_slot=beta_slot, epsilon=float(eps_value.reshape(-1)[0]), axes=axes,
    )


def _axes(sg: "ScopeGraph", mean: str) -> list[int]:
    value = sg.const_value(sg.producer(mean, 1)[0])
    if value is None:
        raise NotLayerNorm(f"the reduction indices of {mean!r} are not constant")
    return sorted(int(a) for a in value.reshape(-1))


def _attributes(sg: "ScopeGraph", parts: _Parts) -> dict[str, Any]:
    axes = parts.axes
    if not axes or axes != list(range(axes[0], axes[0] + len(axes))):
        raise NotLayerNorm(f"reduction axes {axes} are not contiguous")
    x_name = parts.x[0] if parts.x[1] == 0 else f"{parts.x[0]}:{parts.x[1]}"
    if axes[-1] == -1:
        begin_norm_axis = axes[0]
    elif axes[0] < 0:
        raise NotLayerNorm(f"reduction axes {axes} mix signs or do not end at the last axis")
    else:
        rank = sg.rank(x_name)
        if rank is None:
            raise NotLayerNorm(
                f"cannot tell the rank of {x_name!r} to check that axes {axes} are the trailing axes"
            )
        if axes[-1] != rank - 1:
            raise NotLayerNorm(f"reduction axes {axes} are not the trailing axes of a rank-{rank} input")
        begin_norm_axis = axes[0]
    gamma = sg.producer(parts.scale_mul, parts.gamma_slot)
    gamma_name = gamma[0] if gamma[1] == 0 else f"{gamma[0]}:{gamma[1]}"
    gamma_rank = sg.rank(gamma_name)
    if gamma_rank is None or gamma_rank == 0:
        raise NotLayerNorm(f"cannot tell how many axes gamma {gamma_name!r} spans")
    dtype = sg.node(parts.mean).attr["T"].type
    return {
        "begin_norm_axis": begin_norm_axis,
        "begin_params_axis": -gamma_rank,
        "epsilon": parts.epsilon,
        "T": dtype,
    }
