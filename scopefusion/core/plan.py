"""Safety checks: turning a :class:`FusionScopesResult` into a :class:`FusionPlan`
that can be applied without losing an edge or creating a cycle.

Vocabulary for one result:

* ``R``: every node listed in the result or lying under one of its scopes;
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

from .fused_ops import FusedOpDef
from .graph_index import CONTROL, GraphIndex, parse_input, tensor_name
from .results import FusedInput, FusionScopesResult
from .scope_graph import FORWARDING_OPS

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.attr_value_pb2 import AttrValue

CONST_OPS = frozenset({"Const", "HostConst"})


class Refused(Exception):
    """Raised inside planning; the message is the reason shown in the report."""


@dataclass
class FusionPlan:
    """A checked result, ready to be applied."""

    result: FusionScopesResult
    pass_name: str
    order: int  # registration index of the pass, then result index
    members: frozenset[int]  # R
    removed: list[int]  # D, in graph order
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
        return self.result.name

    def output_tensor(self, fused_port: int) -> str:
        """The tensor name that carries fused output ``fused_port`` after rewriting."""
        return fused_output_tensor(self.result, fused_port)


def fused_output_tensor(result: FusionScopesResult, fused_port: int) -> str:
    """The tensor name that carries fused output ``fused_port`` of ``result`` after rewriting."""
    if result.has_inner_graph:
        inner, port = parse_input(result.inner_outputs[fused_port])
        return tensor_name(f"{result.name}/{inner}", port)
    return tensor_name(result.name, fused_port)


def _resolve_key(index: GraphIndex, result: FusionScopesResult, members: frozenset[int], key: str) -> int:
    """Find the inner node a port-map key names (a suffix of its full name)."""
    for scope in result.scopes:
        i = index.index.get(scope.full_name(key))
        if i is not None and i in members:
            return i
    i = index.index.get(key)
    if i is not None and i in members:
        return i
    tail = "/" + key
    hits = [m for m in members if index.names[m].endswith(tail)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise Refused(f"port map names {key!r}, which is no node of the result")
    names = sorted(index.names[h] for h in hits)
    raise Refused(f"port map key {key!r} is ambiguous: {', '.join(names[:3])}")


def is_const_like(index: GraphIndex, i: int, _depth: int = 0) -> bool:
    """A Const, or an Identity-like read whose data comes from a Const."""
    op = index.ops[i]
    if op in CONST_OPS:
        return True
    if op in FORWARDING_OPS and _depth < 16:
        data = [p for p, port in index.inputs[i] if port != CONTROL]
        return bool(data) and all(is_const_like(index, p, _depth + 1) for p in data)
    return False


def _ancestors_within(index: GraphIndex, seeds: Iterable[int], members: frozenset[int]) -> set[int]:
    out: set[int] = set()
    stack = [s for s in seeds if s in members]
    while stack:
        i = stack.pop()
        if i in out:
            continue
        out.add(i)
        stack.extend(p for p, _ in index.inputs[i] if p in members and p not in out)
    return out


def make_plan(
    index: GraphIndex,
    result: FusionScopesResult,
    *,
    pass_name: str,
    order: int,
    fused_ops: Mapping[str, FusedOpDef],
    graph_outputs: Mapping[int, Sequence[int]],
) -> FusionPlan:
    """Check ``result`` against the graph; raises :class:`Refused` with the reason."""
    names = index.names
    if not result.name or result.name.startswith("/") or result.name.endswith("/") or "//" in result.name:
        raise Refused(f"{result.name!r} is not a valid node name for the fused op")
    member_set: set[int] = set()
    for scope in result.scopes:
        member_set.update(scope.all_node_indices())
    for extra in result.extra_nodes:
        i = index.index.get(extra)
        if i is None:
            raise Refused(f"extra node {extra!r} does not exist")
        member_set.add(i)
    if not member_set:
        raise Refused("the result holds no nodes")
    members = frozenset(member_set)

    op_def = fused_ops.get(result.type)
    if result.has_inner_graph:
        _check_inner_graph(result, fused_ops)
    elif op_def is None:
        raise Refused(
            f"fused op type {result.type!r} is not declared; register a FusedOpDef for it"
            if result.type else "the pass set no fused op type"
        )
    if op_def is not None:
        problems = op_def.check_attrs(result.attrs)
        if problems:
            raise Refused("; ".join(problems))
    attr_values = _written_attrs(result, op_def, fused_ops)

    # -- inputs -------------------------------------------------------------
    n_inputs = len(op_def.inputs) if op_def is not None and not result.has_inner_graph else result.num_inputs()
    fed: dict[int, tuple[int, int]] = {}
    mapped_slots: set[tuple[int, int]] = set()
    for key, slots in result.input_map.items():
        node = _resolve_key(index, result, members, key)
        for slot, fused in enumerate(slots):
            if fused is None:
                continue
            if not 0 <= fused < n_inputs:
                raise Refused(f"{key!r} slot {slot} maps to fused input {fused}, but it has {n_inputs}")
            try:
                tensor = index.data_input(node, slot)
            except IndexError:
                raise Refused(f"inner node {names[node]!r} has no input slot {slot}") from None
            previous = fed.setdefault(fused, tensor)
            if previous != tensor:
                raise Refused(
                    f"fused input {fused} is fed by two different tensors: "
                    f"{tensor_name(names[previous[0]], previous[1])} and {tensor_name(names[tensor[0]], tensor[1])}"
                )
            mapped_slots.add((node, slot))
    missing = [i for i in range(n_inputs) if i not in fed]
    if missing:
        label = [op_def.inputs[i].name for i in missing] if op_def and not result.has_inner_graph else missing
        raise Refused(f"fused input(s) {label} are not mapped to any inner node input")

    # -- kept / removed -------------------------------------------------------
    kept = _ancestors_within(index, (t[0] for t in fed.values()), members)
    consumers = index.consumers
    changed = True
    while changed:
        changed = False
        for d in members:
            if d in kept:
                continue
            for c, port, _ in consumers[d]:
                if c not in members and port != CONTROL and is_const_like(index, d):
                    kept |= _ancestors_within(index, [d], members)
                    changed = True
                    break
    removed_set = members - kept
    if not removed_set:
        raise Refused("every node of the result would be kept; nothing to fuse")

    # -- outputs ----------------------------------------------------------------
    n_outputs = (
        len(op_def.outputs) if op_def is not None and not result.has_inner_graph
        else max(result.inner_outputs, default=-1) + 1
    )
    outputs: dict[tuple[int, int], int] = {}
    for key, ports in result.output_map.items():
        node = _resolve_key(index, result, members, key)
        if node not in removed_set:
            raise Refused(f"output map names {names[node]!r}, which must stay in the graph")
        for port, fused in enumerate(ports):
            if fused is None:
                continue
            if not 0 <= fused < n_outputs:
                raise Refused(f"{key!r} port {port} maps to fused output {fused}, but it has {n_outputs}")
            outputs[(node, port)] = fused
    if result.has_inner_graph:
        for fused in set(outputs.values()):
            if fused not in result.inner_outputs:
                raise Refused(f"fused output {fused} has no inner-graph tensor (set_inner_output)")

    removed = sorted(removed_set)
    for d in removed:
        for c, port, _ in consumers[d]:
            if c in removed_set or port == CONTROL:
                continue
            if (d, port) not in outputs:
                raise Refused(
                    f"inner node {names[d]!r} output {port} feeds outside node {names[c]!r} "
                    f"but is not an output of the fused op"
                )
    aliases: dict[int, list[int]] = {}
    for d in removed:
        ports = graph_outputs.get(d)
        if ports is None:
            continue
        for port in ports:
            if (d, port) not in outputs:
                raise Refused(
                    f"graph output {tensor_name(names[d], port)} lies inside the result "
                    f"and is not an output of the fused op"
                )
        aliases[d] = sorted(ports)

    # -- what removed nodes read from outside ------------------------------------
    control_inputs: list[int] = []
    seen_controls: set[int] = set()
    fed_tensors = set(fed.values())
    for d in removed:
        for slot, (p, port) in enumerate(index.inputs[d]):
            if p in removed_set:
                continue
            if port == CONTROL:
                if p not in seen_controls:
                    seen_controls.add(p)
                    control_inputs.append(p)
                continue
            if (d, slot) in mapped_slots or (p, port) in fed_tensors or is_const_like(index, p):
                continue
            raise Refused(
                f"inner node {names[d]!r} reads {tensor_name(names[p], port)} from outside "
                f"the result, but the fused op does not take it as an input"
            )

    for new_name in new_node_names(result):
        taken = index.index.get(new_name)
        if taken is not None and taken not in removed_set:
            raise Refused(f"new node name {new_name!r} is already used by a node that stays")
        if taken is not None and taken in aliases:
            if all(fused_output_tensor(result, outputs[(taken, p)]) == tensor_name(new_name, p)
                   for p in aliases[taken]):
                del aliases[taken]  # the new node of that name produces the same outputs: no alias needed
            else:
                raise Refused(f"new node name {new_name!r} is the name of a graph output inside the result, "
                              f"which stays fetchable under it")

    return FusionPlan(
        result=result,
        pass_name=pass_name,
        order=order,
        members=members,
        removed=removed,
        kept=sorted(kept),
        inputs=[fed[i] for i in range(n_inputs)],
        control_inputs=control_inputs,
        outputs=outputs,
        aliases=aliases,
        op_def=op_def if not result.has_inner_graph else None,
        attr_values=attr_values,
    )


def new_node_names(result: FusionScopesResult) -> list[str]:
    """Names of the nodes a result adds to the graph."""
    if result.has_inner_graph:
        return [f"{result.name}/{n.name}" for n in result.inner_nodes]
    return [result.name]


def attr_types_for_op(op: str, fused_ops: Mapping[str, FusedOpDef]) -> dict[str, str]:
    """Declared attribute types of a fused op, or of a TensorFlow op."""
    op_def = fused_ops.get(op)
    if op_def is not None:
        return {a.name: a.type for a in op_def.attrs}
    from tensorflow.python.framework import op_def_registry

    tf_def = op_def_registry.get(op)
    return {a.name: a.type for a in tf_def.attr} if tf_def is not None else {}


def _written_attrs(
    result: FusionScopesResult, op_def: FusedOpDef | None, fused_ops: Mapping[str, FusedOpDef]
) -> list[dict[str, "AttrValue"]]:
    """The attributes of each new node as ``AttrValue``s; a value that cannot be
    written as its declared (or inferred) type refuses the result."""
    from .fused_ops import infer_attr_type, make_attr_value

    if result.has_inner_graph:
        items = [(n.op, n.attrs, f"inner node {n.name!r}: ") for n in result.inner_nodes]
    else:
        items = [(result.type, op_def.with_defaults(result.attrs) if op_def else result.attrs, "")]
    written_all: list[dict[str, AttrValue]] = []
    for op, attrs, where in items:
        types = attr_types_for_op(op, fused_ops) if attrs else {}
        written_all.append({})
        for key, value in attrs.items():
            attr_type = types.get(key)
            wanted = f" as {attr_type}" if attr_type else ""
            try:
                written = make_attr_value(value, attr_type or infer_attr_type(value))
            except Exception as exc:  # noqa: BLE001 - any conversion failure is the pass's
                raise Refused(f"{where}attribute {key!r} = {value!r} cannot be written{wanted}: {exc}") from None
            problem = _attr_kind_problem(value, written, attr_type)
            if problem:
                raise Refused(f"{where}attribute {key!r} = {value!r} cannot be written{wanted}: {problem}")
            written_all[-1][key] = written
    return written_all


#: The AttrValue field each declared attr type is written to.
_ATTR_FIELDS = {"float": "f", "int": "i", "bool": "b", "string": "s", "type": "type", "shape": "shape"}


def _attr_kind_problem(value: object, written: object, attr_type: str | None) -> str | None:
    """Why a value that converted is still wrong for its declared type, if it is."""
    if attr_type is None:
        return None
    if isinstance(value, float) and attr_type == "int" and not value.is_integer():
        return "not a whole number"
    field = _ATTR_FIELDS.get(attr_type, "list" if attr_type.startswith("list(") else None)
    kind = written.WhichOneof("value")  # type: ignore[attr-defined]
    if value is written and field is not None and kind not in (field, None):
        return f"an AttrValue holding {kind!r}"
    return None


def _check_inner_graph(result: FusionScopesResult, fused_ops: Mapping[str, FusedOpDef]) -> None:
    names = {n.name for n in result.inner_nodes}
    n_inputs = result.num_inputs()
    for node in result.inner_nodes:
        if not node.op:
            raise Refused(f"inner node {node.name!r} has no op type")
        for ref in node.inputs:
            if isinstance(ref, FusedInput):
                if not 0 <= ref.index < n_inputs:
                    raise Refused(f"inner node {node.name!r} reads fused input {ref.index}, which is not mapped")
            elif parse_input(ref)[0] not in names:
                raise Refused(f"inner node {node.name!r} reads {ref!r}, which is no inner node")
    for fused, tensor in result.inner_outputs.items():
        if parse_input(tensor)[0] not in names:
            raise Refused(f"fused output {fused} comes from {tensor!r}, which is no inner node")
