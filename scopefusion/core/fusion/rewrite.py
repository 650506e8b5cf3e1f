"""Applying accepted plans to the graph in one rewrite.

Only the nodes that read a removed node are touched; removed nodes are
dropped and new nodes placed where their result's first node stood, with one
sort of the node list.  The cost is linear in nodes plus edges.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Set
from typing import TYPE_CHECKING, AbstractSet, Callable, Iterable, Iterator, Sequence

from ..errors import GraphValidationError, PassError
from ..graph.attrs import make_attr_value
from ..graph.index import COLOCATE as _COLOCATE, GraphIndex, no_gc
from ..graph.layout import NodeLayout
from ..graph.node_checks import NodeJudge
from ..graph.node_set import NodeSet, member_test
from ..graph.protos import message_class
from ..graph.attr_rules import shorten
from ..graph.vocabulary import CONTROL, parse_input, tensor_name
from .candidate import FusedInput
from .plan import FusionPlan, fused_output_tensor, new_node_names

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.attr_value_pb2 import AttrValue
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef

def output_dtype(plan: "FusionPlan", fused_port: int, index: GraphIndex) -> int | None:
    """DataType enum of fused output ``fused_port``, when it can be told."""
    op_def = plan.op_def
    if op_def is not None and fused_port < len(op_def.outputs):
        arg = op_def.outputs[fused_port]
        if arg.dtype is not None:
            return make_attr_value(arg.dtype, "type").type
        value = plan.candidate.attrs.get(arg.type_attr)  # type: ignore[arg-type]
        if value is not None:
            return make_attr_value(value, "type").type
    for (node, _), port in plan.outputs.items():
        if port == fused_port:
            attrs = index.nodes[node].attr
            for key in ("T", "dtype", "out_type", "DstT"):
                if key in attrs and attrs[key].WhichOneof("value") == "type":
                    return attrs[key].type
    return None


class _AttrBlocks:
    """Each distinct attribute set of the new nodes serialized once, as the ``attr`` map of a
    ``NodeDef``, for merging into every new node that has it.  Attribute values are known by
    identity: plans share the messages of equal scalars (and plans alike the very list of their
    attribute sets), and keep every value alive while the rewrite runs."""

    def __init__(self) -> None:
        self._blocks: dict[tuple, bytes] = {}
        self._by_list: dict[int, list[bytes]] = {}
        self._holder = message_class("NodeDef")()

    def block(self, attrs: dict[str, "AttrValue"]) -> bytes:
        key = (*attrs, *map(id, attrs.values()))  # the names, then their values' identities
        block = self._blocks.get(key)
        if block is None:
            holder = self._holder
            holder.Clear()
            for k, value in attrs.items():
                holder.attr[k].CopyFrom(value)
            block = self._blocks[key] = holder.SerializeToString()
        return block

    def blocks(self, attr_values: list[dict[str, "AttrValue"]], count: int) -> list[bytes]:
        """The blocks of a plan's ``count`` new nodes (empty for a node without attributes)."""
        known = self._by_list.get(id(attr_values))
        if known is None:
            known = self._by_list[id(attr_values)] = [self.block(attrs) if attrs else b"" for attrs in attr_values]
        return known if len(known) >= count else known + [b""] * (count - len(known))


def _node_builder(index: GraphIndex, owner: dict[int, FusionPlan], resolve: Callable[[int, int], str],
                  add: Callable[..., "NodeDef"]) -> Callable[[FusionPlan], list["NodeDef"]]:
    """What makes a plan's new nodes with ``add`` (appending them to the graph's node list)."""
    names, nodes, blocks = index.names, index.nodes, _AttrBlocks()
    devices_used = index.devices_used is not False  # a graph whose nodes name no device gives none

    def build(plan: FusionPlan) -> list["NodeDef"]:
        res = plan.candidate
        inputs = [names[p] if port == 0 and p not in owner else resolve(p, port) for p, port in plan.inputs]
        controls = list(dict.fromkeys(resolve(c, CONTROL) for c in plan.control_inputs)) \
            if plan.control_inputs else []
        device = ""
        for d in plan.removed if devices_used else ():
            device = nodes[d].device
            if device:
                break
        inner_nodes = res.inner_nodes
        blocks_of = blocks.blocks(plan.attr_values, len(inner_nodes) or 1)  # written with the plan
        if inner_nodes:
            return [_new_node(add(), f"{res.name}/{inner.name}", inner.op, device,
                              [*(_inner_input(res.name, ref, inputs) for ref in inner.inputs), *controls], block)
                    for inner, block in zip(inner_nodes, blocks_of, strict=True)]
        return [_new_node(add(), res.name, res.type, device, inputs + controls if controls else inputs, blocks_of[0])]

    return build


def _new_node(node: "NodeDef", name: str, op: str, device: str, inputs: list[str], attr_block: bytes) -> "NodeDef":
    """Fill the empty ``node`` by one parse of its fields (serialized from a message of its own type)
    and its prepared attribute block.  Set field by field instead, the node's wrapper would keep a
    container for its input list (some hundreds of bytes per new node, for as long as the next
    stage's index holds it)."""
    fields = type(node)(name=name, op=op, input=inputs, device=device).SerializeToString()
    node.MergeFromString(fields + attr_block if attr_block else fields)
    return node


def _inner_input(result_name: str, ref: "FusedInput | str", fused_inputs: Sequence[str]) -> str:
    if isinstance(ref, FusedInput):
        return fused_inputs[ref.index]
    if ref.startswith("^"):
        return f"^{result_name}/{ref[1:]}"
    inner, port = parse_input(ref)
    return tensor_name(f"{result_name}/{inner}", port)  # port 0 bare, as TensorFlow writes it


def _alias_node(plan: "FusionPlan", index: GraphIndex, d: int, ports: Sequence[int]) -> "NodeDef":
    """Keep a graph output fetchable under its old name."""
    node = message_class("NodeDef")(name=index.names[d])
    fused_ports = [plan.outputs[(d, p)] for p in ports]
    dtypes = [output_dtype(plan, f, index) for f in fused_ports]
    if ports == [0]:
        node.op = "Identity"
        node.input.append(plan.output_tensor(fused_ports[0]))
        if dtypes[0] is not None:
            node.attr["T"].type = dtypes[0]
    else:
        # IdentityN keeps port numbers: pad the ports that are not outputs.
        node.op = "IdentityN"
        by_port = dict(zip(ports, fused_ports, strict=True))
        for p in range(max(ports) + 1):
            f = by_port.get(p, fused_ports[0])
            node.input.append(plan.output_tensor(f))
            dtype = output_dtype(plan, f, index)
            node.attr["T"].list.type.append(dtype if dtype is not None else 1)
    return node


class NamesOf(Set[str]):
    """The names of some nodes of an index, read off the index's name table rather than held in
    a set of their own (a rewrite drops nodes by the hundred thousand)."""

    def __init__(self, index: GraphIndex, nodes: AbstractSet[int]) -> None:
        self._index, self._nodes = index, nodes

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._index.index.get(name) in self._nodes

    def __iter__(self) -> Iterator[str]:
        return map(self._index.names.__getitem__, self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)


@dataclass
class RewriteSummary:
    """What :func:`apply_plans` changed: for the output check (``touched``, ``removed_names``,
    ``new_names``) and for indexing the rewritten graph without reading its untouched nodes
    again (the rest, by positions in the index that was rewritten)."""

    touched: list["NodeDef"]
    removed_names: AbstractSet[str]
    new_names: list[str]
    #: nodes dropped from the graph
    dropped: AbstractSet[int] = field(default_factory=set)
    #: nodes kept whose inputs or op changed (rewired readers, graph outputs turned into aliases)
    changed: set[int] = field(default_factory=set)
    #: new nodes (their messages in the graph) by the node they follow in the new order
    inserted: dict[int, list["NodeDef"]] = field(default_factory=dict)
    #: the node order the rewrite left, in terms of the index that was rewritten (None: no rewrite)
    layout: NodeLayout | None = None


def apply_plans(index: GraphIndex, plans: Sequence["FusionPlan"]) -> RewriteSummary:
    """Rewrite ``index.graph_def`` in place: rewire the readers of removed nodes, then put
    each plan's new nodes where its first removed node stood."""
    owner: dict[int, "FusionPlan"] = {d: plan for plan in plans for d in plan.removed}
    if not owner:
        return RewriteSummary([], set(), [])
    resolve = _resolver(index, owner)
    with no_gc():
        touched = _rewire_readers(index, owner, resolve)
        summary = _place_new_nodes(index, plans, _node_builder(index, owner, resolve, index.graph_def.node.add),
                                   touched)
    summary.changed.update(touched)
    return summary


def _resolver(index: GraphIndex, owner: dict[int, "FusionPlan"]) -> Callable[[int, int], str]:
    names = index.names

    def resolve(p: int, port: int) -> str:
        """The name a tensor (or control edge) of the original graph has after rewriting."""
        plan = owner.get(p)
        if plan is None:
            return names[p] if port == 0 else tensor_name(names[p], port)
        if port == CONTROL:
            return "^" + _control_target(plan)
        return fused_output_tensor(plan.candidate, plan.outputs[(p, port)])  # plan.output_tensor, one call less

    return resolve


def _rewire_readers(index: GraphIndex, owner: dict[int, "FusionPlan"],
                    resolve: Callable[[int, int], str]) -> list[int]:
    """Point every surviving reader of a removed node at what replaces it; returns the readers."""
    touched: dict[int, None] = {}
    consumers, inputs, names, nodes = index.consumers, index.inputs, index.names, index.nodes
    for d in owner:
        for c, _, _ in consumers[d]:
            if c not in owner:
                touched[c] = None
    for c in touched:
        node = nodes[c]
        new_inputs: list[str] = []
        seen_controls: set[str] = set()
        for p, port in inputs[c]:
            text = names[p] if port == 0 and p not in owner else resolve(p, port)
            if text.startswith("^"):
                if text in seen_controls:
                    continue
                seen_controls.add(text)
            new_inputs.append(text)
        del node.input[:]
        node.input.extend(new_inputs)
    return list(touched)


def _place_new_nodes(index: GraphIndex, plans: Sequence["FusionPlan"],
                     build: Callable[[FusionPlan], list["NodeDef"]], touched: list[int]) -> RewriteSummary:
    """Drop removed nodes (graph outputs become aliases) and add the new nodes where their
    plan's first removed node stood.  The new nodes are appended and the node list put in its
    new order by one sort of precomputed keys; the sort moves the messages themselves, so the
    wrappers in ``index.nodes`` still hold them."""
    graph = index.graph_def
    colocated = index.colocated_nodes()  # read before the messages move
    dropped = NodeSet(len(index.nodes))  # a byte per node: a set of them would take 16 to 32
    summary = RewriteSummary([index.nodes[c] for c in touched], set(), [], dropped)
    built_by_anchor: dict[int, list["NodeDef"]] = {}  # each plan's new nodes, by its first removed node
    aliased = summary.changed
    gone: list[int] = []  # the nodes dropped, marked at once
    for plan in plans:
        # both read the plan's nodes before they change
        built = build(plan)
        if plan.aliases:
            aliases = {d: _alias_node(plan, index, d, ports) for d, ports in plan.aliases.items()}
            for d in plan.removed:
                if d in aliases:  # a graph output keeps its name: the node becomes an alias
                    index.nodes[d].CopyFrom(aliases[d])
                    summary.touched.append(index.nodes[d])
                    aliased.add(d)
                else:
                    gone.append(d)
        else:
            gone += plan.removed
        built_by_anchor[plan.removed[0]] = built
    dropped.update(gone)
    del gone
    summary.removed_names = NamesOf(index, dropped)
    summary.inserted = built_by_anchor
    new_nodes = [n for built in built_by_anchor.values() for n in built]
    summary.new_names = [name for plan in plans  # as built
                         for name in (new_node_names(plan.candidate) if plan.candidate.inner_nodes
                                      else (plan.candidate.name,))]
    summary.touched.extend(new_nodes)
    summary.layout = NodeLayout.of(len(index.nodes), summary.dropped, {a: len(b) for a, b in built_by_anchor.items()})
    summary.layout.arrange(graph.node, index.node_ids())
    if summary.dropped:
        kept = [index.nodes[i] for i in colocated if i not in summary.dropped]
        kept += [node for plan in plans  # a new node holds the attributes its plan wrote, and no others
                 for attrs, node in zip(plan.attr_values, built_by_anchor[plan.removed[0]], strict=True)
                 if _COLOCATE in attrs]
        _drop_stale_colocation(kept, summary.removed_names)
    return summary


def _drop_stale_colocation(nodes: Iterable["NodeDef"], removed: AbstractSet[str]) -> None:
    """Forget colocation constraints naming removed nodes (TensorFlow refuses to import a node
    colocated with a node that does not exist; a TF1 cond's Switch is colocated with its input)."""
    for node in nodes:
        if _COLOCATE not in node.attr:
            continue
        values = node.attr[_COLOCATE].list.s
        kept = [v for v in values if v.decode("utf-8", "replace").removeprefix("loc:@") not in removed]
        if len(kept) == len(values):
            continue
        if kept:
            del values[:]
            values.extend(kept)
        else:
            del node.attr[_COLOCATE]


def check_rewrite(
    graph: "GraphDef", index: GraphIndex, plans: Sequence["FusionPlan"], summary: RewriteSummary, *, full: bool
) -> None:
    """Check the rewritten graph.

    ``full`` re-indexes it (names, inputs, cycles).  Otherwise the graph must hold as
    many nodes as the rewrite told, and only the nodes the rewrite touched are checked: their
    inputs must name nodes that exist, and new names must be unique; untouched nodes kept their
    valid inputs, and acyclicity was established before rewriting.
    """
    if full or not plans:
        if full:
            GraphIndex(graph)
        return
    told = len(index) - len(summary.dropped) + sum(map(len, summary.inserted.values()))
    if len(graph.node) != told:
        raise GraphValidationError(f"the rewrite left {len(graph.node)} nodes, not the {told} it told")
    new_names = summary.new_names
    live = set(new_names)
    if len(live) != len(new_names):
        raise GraphValidationError("the rewrite produced duplicate node names")
    # a name is removed when the node it names in the index was dropped (:class:`NamesOf`)
    existing, dropped = index.index.get, member_test(summary.dropped)
    clashes = [n for n in new_names if (i := existing(n)) is not None and not dropped(i)]
    if clashes:
        raise GraphValidationError(f"new nodes reuse existing names: {clashes[:5]}")
    problems = []
    for node in summary.touched:
        for text in node.input:
            if text in live or ((i := existing(text)) is not None and not dropped(i)):
                continue  # a whole name (port 0), as GraphIndex reads it first
            name = parse_input(text)[0]
            if name in live:
                continue
            if (i := existing(name)) is None or dropped(i):
                problems.append(f"{node.name!r} reads {text!r}")
    if problems:
        raise GraphValidationError(f"inputs that name no node in the graph: {'; '.join(problems[:5])}")


def check_written_nodes(index: GraphIndex, plans: Sequence["FusionPlan"], summary: RewriteSummary) -> None:
    """The nodes the rewrite wrote (new nodes, rewired readers) against TensorFlow's op
    definitions (:class:`NodeJudge`): a problem names the node, what is wrong, and the pass whose
    result it is (:class:`PassError`)."""
    if not plans:
        return
    touched = summary.touched
    # each name read off its message once; the new nodes' come last, as the rewrite named them
    rewired = len(touched) - len(summary.new_names)
    touched_names = [node.name for node in touched[:rewired]] + summary.new_names
    written = dict(zip(touched_names, touched, strict=True))
    removed = summary.removed_names

    def lookup(name: str) -> "NodeDef | None":
        node = written.get(name)
        if node is None and name in index.index and name not in removed:
            node = index.node(name)
        return node

    judge = NodeJudge(lookup, {f.signature.name: f.signature for f in index.graph_def.library.function})
    pass_of, typed = _new_node_passes(plans, judge)
    for name, node in zip(touched_names, touched, strict=True):
        if name in pass_of:
            if name not in typed:
                continue  # a fused op: its declaration was checked with the plan
            problems = judge.problems(node)
        elif typed and any(parse_input(text)[0] in typed for text in node.input):
            problems = judge.problems(node, attrs=False)  # a rewired reader: only what it reads changed
        else:
            continue  # reads fused ops (whose dtypes are their declarations') or what it read before
        if problems:
            whose = pass_of.get(name)
            source = f"pass {whose} wrote" if whose else "the rewrite left"
            raise PassError(f"{source} node {shorten(node.name)} ({node.op}), which TensorFlow would refuse: "
                            f"{'; '.join(problems[:3])}")


def _new_node_passes(plans: Sequence["FusionPlan"], judge: NodeJudge) -> tuple[dict[str, str], set[str]]:
    """The pass of every new node, by its name, and the names of those whose op ``judge`` knows
    (a TensorFlow or library op, not a fused op): told by the plans, which wrote their names and ops."""
    pass_of: dict[str, str] = {}
    typed: set[str] = set()
    knows: dict[str, bool] = {}
    for plan in plans:
        c = plan.candidate
        named = zip(new_node_names(c), [n.op for n in c.inner_nodes], strict=True) if c.inner_nodes \
            else ((c.name, c.type),)
        for name, op in named:
            pass_of[name] = c.pass_name
            known = knows.get(op)
            if known is None:
                known = knows[op] = judge.knows(op)
            if known:
                typed.add(name)
    return pass_of, typed


def _control_target(plan: "FusionPlan") -> str:
    res = plan.candidate
    return f"{res.name}/{res.inner_nodes[-1].name}" if res.has_inner_graph else res.name
