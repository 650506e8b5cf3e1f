"""Safety checks: turning a :class:`FusionCandidate` (from any engine) into a
:class:`FusionPlan` that can be applied without losing an edge or creating a cycle.

Vocabulary for one candidate (a "result"):

* ``R``: its member nodes;
* kept (``K``): nodes of ``R`` that stay in the graph - producers of the fused
  op's inputs that lie inside ``R`` (with their ancestors in ``R``) and
  constant-like nodes still read from outside;
* removed (``D``): ``R`` minus kept; they are replaced by the fused node.

A result is refused (never half-applied) when a removed node feeds an outside
node through a port the fused op does not output, reads a non-constant outside
tensor the fused op does not take, holds a graph output the fused op does not
produce, or when fusing it would create a cycle.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from ..graph.attrs import make_attr_value
from ..graph.index import GraphIndex
from ..graph.vocabulary import CONST_OPS, CONTROL, FORWARDING_OPS, is_valid_node_name, parse_input, tensor_name
from .candidate import FusionCandidate
from .fused_ops import FusedOpDef
from .op_checks import OpChecks, check_op
from .refusal import Refused

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.attr_value_pb2 import AttrValue

#: The attribute carrying a result's description on its new nodes (TensorFlow ignores
#: attributes starting with "_").
DESCRIPTION_ATTR = "_description"

@dataclass(slots=True)  # a stage holds one per candidate: no instance dict each
class FusionPlan:
    """A checked result, ready to be applied."""

    candidate: FusionCandidate
    members: frozenset[int]  # R
    removed: list[int]  # D, in graph order
    removed_set: frozenset[int]  # D
    #: the removed nodes reading from, or read by, a node outside D (in graph order, each once)
    border: list[int]
    kept: list[int]
    inputs: list[tuple[int, int]]  # fused input i -> producer tensor
    control_inputs: list[int]
    outputs: dict[tuple[int, int], int]  # (removed node, port) -> fused output
    aliases: dict[int, list[int]] = field(default_factory=dict)  # graph-output node -> ports
    op_def: FusedOpDef | None = None
    #: the attributes of each new node (in :func:`new_node_names` order), written once
    attr_values: list[dict[str, "AttrValue"]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.candidate.name

    @property
    def label(self) -> str:
        """The name reports show (:attr:`FusionCandidate.label`)."""
        return self.candidate.label

    @property
    def pass_name(self) -> str:
        return self.candidate.pass_name

    @property
    def order(self) -> int:
        return self.candidate.order

    def output_tensor(self, fused_port: int) -> str:
        """The tensor name that carries fused output ``fused_port`` after rewriting."""
        return fused_output_tensor(self.candidate, fused_port)


def fused_output_tensor(candidate: FusionCandidate, fused_port: int) -> str:
    """The tensor name that carries fused output ``fused_port`` of ``candidate`` after rewriting."""
    if candidate.inner_nodes:
        inner, port = parse_input(candidate.inner_outputs[fused_port])
        return tensor_name(f"{candidate.name}/{inner}", port)
    return candidate.name if fused_port == 0 else tensor_name(candidate.name, fused_port)


def is_const_like(index: GraphIndex, i: int, _depth: int = 0) -> bool:
    """A Const, or an Identity-like read or a Cast whose data comes from a Const."""
    op = index.ops[i]
    if op in CONST_OPS:
        return True
    if (op in FORWARDING_OPS or op == "Cast") and _depth < 16:
        data = [p for p, port in index.inputs[i] if port != CONTROL]
        return bool(data) and all(is_const_like(index, p, _depth + 1) for p in data)
    return False


#: the ops of nodes that may be constant-like
_CONST_LIKE_OPS = CONST_OPS | FORWARDING_OPS | {"Cast"}


def _ancestors_within(index: GraphIndex, seeds: Iterable[int], members: frozenset[int]) -> set[int]:
    out: set[int] = set()
    stack = [s for s in seeds if s in members]
    inputs = index.inputs
    while stack:
        i = stack.pop()
        if i in out:
            continue
        out.add(i)
        stack += [p for p, _ in inputs[i] if p in members and p not in out]
    return out


def make_plan(
    index: GraphIndex,
    candidate: FusionCandidate,
    *,
    fused_ops: Mapping[str, FusedOpDef],
    graph_outputs: Mapping[int, Sequence[int]],
    ops: OpChecks | None = None,
) -> FusionPlan:
    """Check ``candidate`` against the graph; raises :class:`Refused` with the reason.  ``ops``:
    the stage's checks of fused ops, shared by candidates alike (else the op is checked anew)."""
    _check_name(candidate)
    if not candidate.members:
        raise Refused("the result holds no nodes")
    op_def, attr_values, n_inputs = ops.check(candidate) if ops is not None else check_op(candidate, fused_ops)
    if candidate.description:  # new dicts: the checked values may be shared by candidates alike
        count = max(1, len(candidate.inner_nodes))
        if ops is not None:
            attr_values = ops.described(attr_values, count, DESCRIPTION_ATTR, candidate.description)
        else:
            described = make_attr_value(candidate.description, "string")
            attr_values = [{**values, DESCRIPTION_ATTR: described} for values in attr_values or [{}] * count]
    inputs = _checked_inputs(index, candidate, op_def, n_inputs)
    kept = _kept_nodes(index, candidate.members, inputs)
    removed_set = candidate.members - kept if kept else candidate.members
    if not removed_set:
        raise Refused("every node of the result would be kept; nothing to fuse")
    _check_outputs(index, candidate, op_def, removed_set)
    removed = sorted(removed_set)
    exits = _check_outside_consumers(index, candidate, removed, removed_set)
    aliases = _graph_output_aliases(index, candidate, removed, graph_outputs)
    control_inputs, entries = _outside_reads(index, candidate, removed, removed_set, inputs)
    _check_new_names(index, candidate, removed_set, aliases)
    return FusionPlan(
        candidate=candidate,
        members=candidate.members,
        removed=removed,
        removed_set=removed_set,
        border=sorted({*exits, *entries}) if exits and entries else exits or entries,
        kept=sorted(kept),
        inputs=inputs,
        control_inputs=control_inputs,
        outputs=candidate.outputs,  # neither changes it: one dict for both
        aliases=aliases,
        op_def=op_def,
        attr_values=attr_values,
    )


def _check_name(candidate: FusionCandidate) -> None:
    if not is_valid_node_name(candidate.name):
        raise Refused(f"{candidate.name!r} is not a valid node name for the fused op (letters, digits and "
                      "_ . - / > only, no empty scope)")


def _checked_inputs(
    index: GraphIndex, candidate: FusionCandidate, op_def: FusedOpDef | None, n_inputs: int
) -> list[tuple[int, int]]:
    given = candidate.inputs
    ordered = list(map(given.get, range(n_inputs)))
    if len(given) != n_inputs or None in ordered:  # some input is mapped wrongly, or not at all
        _check_input_numbers(candidate, op_def, n_inputs)
    size = len(index.nodes)
    for i, (p, port) in given.items():
        if port < 0 or not 0 <= p < size:
            raise Refused(f"fused input {i} names no tensor of the graph")
    return ordered  # type: ignore[return-value]


def _check_input_numbers(candidate: FusionCandidate, op_def: FusedOpDef | None, n_inputs: int) -> None:
    """Refuses a fused input mapped past the op's inputs, or one not mapped."""
    bad = [i for i in candidate.inputs if not 0 <= i < n_inputs]
    if bad:
        raise Refused(f"fused input {bad[0]} is mapped, but the fused op has {n_inputs} input(s)")
    missing = [i for i in range(n_inputs) if i not in candidate.inputs]
    if missing:
        label = [op_def.present_inputs(candidate.attrs)[i].name for i in missing] if op_def is not None \
            else missing
        raise Refused(f"fused input(s) {label} are not mapped to any inner node input")


def _kept_nodes(index: GraphIndex, members: frozenset[int], inputs: Sequence[tuple[int, int]]) -> set[int]:
    """Members that stay: producers of fused inputs and constant-like members still read
    (through a data edge) from outside, each with its ancestors among the members."""
    seeds = [p for p, _ in inputs if p in members]
    consumers, ops, const_like = index.consumers, index.ops, _CONST_LIKE_OPS
    for d in [m for m in members if ops[m] in const_like]:  # the rest is never constant-like (is_const_like)
        for c, port, _ in consumers[d]:
            if c not in members and port != CONTROL:
                if is_const_like(index, d):
                    seeds.append(d)
                break
    return _ancestors_within(index, seeds, members) if seeds else set()


def _check_outputs(
    index: GraphIndex, candidate: FusionCandidate, op_def: FusedOpDef | None, removed_set: frozenset[int]
) -> None:
    if op_def is not None:
        n_outputs = len(op_def.outputs)
    elif candidate.has_inner_graph:
        n_outputs = max(candidate.inner_outputs, default=-1) + 1
    else:  # a stock TensorFlow op: its outputs are what the candidate maps
        n_outputs = candidate.num_outputs()
    for (node, port), fused in candidate.outputs.items():
        if node not in candidate.members:
            raise Refused(f"output map names {index.names[node]!r}, which is no node of the result")
        if node not in removed_set:
            raise Refused(f"output map names {index.names[node]!r}, which must stay in the graph")
        if not 0 <= fused < n_outputs:
            raise Refused(f"{index.names[node]!r} port {port} maps to fused output {fused}, "
                          f"but it has {n_outputs}")
    if candidate.has_inner_graph:
        for fused in set(candidate.outputs.values()):
            if fused not in candidate.inner_outputs:
                raise Refused(f"fused output {fused} has no inner-graph tensor (set_inner_output)")


def _check_outside_consumers(
    index: GraphIndex, candidate: FusionCandidate, removed: Sequence[int], removed_set: frozenset[int]
) -> list[int]:
    """Refuses a removed node feeding an outside node through a port the fused op does not output;
    returns the removed nodes read from outside (through any edge), in the order of ``removed``."""
    names, consumers, outputs = index.names, index.consumers, candidate.outputs
    exits: list[int] = []
    for d in removed:
        read = False
        for c, port, _ in consumers[d]:
            if c in removed_set:
                continue
            read = True
            if port != CONTROL and (d, port) not in outputs:
                raise Refused(
                    f"inner node {names[d]!r} output {port} feeds outside node {names[c]!r} "
                    f"but is not an output of the fused op"
                )
        if read:
            exits.append(d)
    return exits


def _graph_output_aliases(
    index: GraphIndex, candidate: FusionCandidate, removed: Sequence[int],
    graph_outputs: Mapping[int, Sequence[int]],
) -> dict[int, list[int]]:
    """Graph outputs among the removed nodes: each must be a fused output, and keeps its name."""
    aliases: dict[int, list[int]] = {}
    if graph_outputs.keys().isdisjoint(removed):  # the common case, told without a loop in Python
        return aliases
    for d in removed:
        ports = graph_outputs.get(d)
        if ports is None:
            continue
        for port in ports:
            if (d, port) not in candidate.outputs:
                raise Refused(
                    f"graph output {tensor_name(index.names[d], port)} lies inside the result "
                    f"and is not an output of the fused op"
                )
        aliases[d] = sorted(ports)
    return aliases


def _outside_reads(
    index: GraphIndex, candidate: FusionCandidate, removed: Sequence[int], removed_set: frozenset[int],
    inputs: Sequence[tuple[int, int]],
) -> tuple[list[int], list[int]]:
    """The control inputs the fused op inherits, and the removed nodes reading from outside (in
    the order of ``removed``); refuses a data read the fused op does not take."""
    control_inputs: list[int] = []
    seen_controls: set[int] = set()
    entries: list[int] = []
    fed_tensors = set(inputs)
    names, inputs_of, ops, recomputed = index.names, index.inputs, index.ops, candidate.recomputed
    for d in removed:
        reads = False
        for p, port in inputs_of[d]:
            if p in removed_set:
                continue
            if not reads:
                reads = True
                entries.append(d)
            if port == CONTROL:
                if p not in seen_controls:
                    seen_controls.add(p)
                    control_inputs.append(p)
                continue
            tensor = (p, port)
            if tensor in fed_tensors or ops[p] in CONST_OPS or tensor in recomputed or is_const_like(index, p) \
                    or _copies_fed(index, p, port, fed_tensors):
                continue
            if (p, port) in candidate.view_shapes and _reads_as_shape(index, d, (p, port)):
                continue  # a view's shape the pass checked: the fused op computes without it
            raise Refused(
                f"inner node {names[d]!r} reads {tensor_name(names[p], port)} from outside "
                f"the result, but the fused op does not take it as an input"
            )
    return control_inputs, entries


#: ops whose output is their data input's value (ReadVariableOp is not: it reads a handle)
_VALUE_COPIES = frozenset({"Identity", "Snapshot", "StopGradient"})


def _copied(index: GraphIndex, tensor: tuple[int, int]) -> tuple[int, int]:
    """The tensor ``tensor`` is a copy of, through a chain of Identity-like ops (itself if none)."""
    for _ in range(16):
        p, port = tensor
        if port != 0 or index.ops[p] not in _VALUE_COPIES:
            break
        data = [t for t in index.inputs[p] if t[1] != CONTROL]
        if len(data) != 1:
            break
        tensor = data[0]
    return tensor


def _reads_as_shape(index: GraphIndex, d: int, tensor: tuple[int, int]) -> bool:
    """Whether node ``d`` is a Reshape reading ``tensor`` as its shape operand (only)."""
    data = [t for t in index.inputs[d] if t[1] != CONTROL]
    return index.ops[d] == "Reshape" and len(data) == 2 and data[1] == tensor and data[0] != tensor


def _copies_fed(index: GraphIndex, p: int, port: int, fed: set[tuple[int, int]]) -> bool:
    """Whether tensor ``(p, port)`` and a tensor the fused op takes are copies of one tensor: the
    same value, e.g. two Identity reads of one function argument that a step's slices each use."""
    source = _copied(index, (p, port))
    return any(_copied(index, t) == source for t in fed)


def _check_new_names(
    index: GraphIndex, candidate: FusionCandidate, removed_set: frozenset[int], aliases: dict[int, list[int]]
) -> None:
    lookup = index.index
    for new_name in new_node_names(candidate) if candidate.inner_nodes else (candidate.name,):
        taken = lookup.get(new_name)
        if taken is None:
            continue
        if taken not in removed_set:
            raise Refused(f"new node name {new_name!r} is already used by a node that stays")
        if taken in aliases:
            if all(fused_output_tensor(candidate, candidate.outputs[(taken, p)]) == tensor_name(new_name, p)
                   for p in aliases[taken]):
                del aliases[taken]  # the new node of that name produces the same outputs: no alias needed
            else:
                raise Refused(f"new node name {new_name!r} is the name of a graph output inside the result, "
                              f"which stays fetchable under it")


def new_node_names(candidate: FusionCandidate) -> list[str]:
    """Names of the nodes a candidate adds to the graph."""
    if candidate.has_inner_graph:
        return [f"{candidate.name}/{n.name}" for n in candidate.inner_nodes]
    return [candidate.name]
