"""Node queries by name over an indexed graph: what passes of every engine read."""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from .constant_eval import ConstantFolder
from .constants import declared_shape, tensor_value
from .index import GraphIndex
from .shape_inference import ShapeInference
from .shapes import RankInference
from .tf_shapes import Shape, ShapeRules, TensorFlowShapes
from .vocabulary import CONST_OPS, CONTROL, FORWARDING_OPS, numpy_dtype, parse_input

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef

#: How many forwarding ops a read is followed through at most.
MAX_FORWARDING = 64

#: Constants whose TensorProto is at most this many bytes are decoded once per distinct content.
SMALL_CONSTANT_BYTES = 256

#: Ops through which a constant stays a constant (its value computed here, once).
CONSTANT_PRESERVING_OPS = FORWARDING_OPS | {"Cast"}
#: Op types a constant chain (:meth:`GraphView.constant_chain`) can start at.
_CHAIN_OPS = CONST_OPS | CONSTANT_PRESERVING_OPS

#: What a cache holds for a key it has not worked out yet.
_UNKNOWN = object()


def _cast(value: "np.ndarray", node: "NodeDef") -> "np.ndarray | None":
    """``value`` as a forwarding node or a Cast node passes it on (None: a dtype numpy lacks)."""
    if node.op != "Cast":
        return value
    dtype = numpy_dtype(node.attr["DstT"].type) if "DstT" in node.attr else None
    return None if dtype is None else value.astype(dtype)


class GraphView:
    """Read-only queries on the nodes of one indexed graph.

    Passes receive the live ``NodeDef`` messages (for speed): they must only
    read them.  Constant values are decoded once per node and shared.
    """

    def __init__(self, graph: "GraphDef | GraphIndex", *, same_shape: ShapeRules | None = None) -> None:
        self.index = graph if isinstance(graph, GraphIndex) else GraphIndex(graph)
        #: per op type TensorFlow does not know (a fused op of an earlier stage), which outputs
        #: have the shape of which input
        self.same_shape: ShapeRules = dict(same_shape or {})
        self._ranks: RankInference | None = None
        self._ledger: dict[int, bytes] | None = None
        self._tf_shapes: TensorFlowShapes | None = None
        self._shapes: ShapeInference | None = None
        #: op types outside the shape table for which TensorFlow's shape inference was asked
        self.tensorflow_shape_ops: set[str] = set()
        self._const_values: dict[int, Any] = {}
        self._small_values: dict[bytes, Any] = {}  # decoded small TensorProtos by their bytes
        self._folder: ConstantFolder | None = None
        #: per node, the op types it can be seen as (:func:`.canonical.seen_as`)
        self.spelt_as: dict[int, frozenset[str]] = {}
        #: per node, the node as it is (:func:`.canonical.direct_view`); per node and op types, the
        #: node seen as one of them (:func:`.canonical.rewrites`)
        self.node_views: dict[int, Any] = {}
        self.rewritten_views: dict[tuple[int, frozenset[str]], tuple[Any, ...]] = {}
        #: per node, chain family and operand count, the chain at the node cut as far as it goes
        #: (:func:`.chains.chain_cuts`)
        self.whole_cuts: dict[tuple[int, str, int], Any] = {}

    @property
    def graph_def(self) -> "GraphDef":
        return self.index.graph_def

    def node(self, name: str) -> "NodeDef":
        """The live ``NodeDef`` called ``name``: read it, never change it (see :meth:`watch`)."""
        return self.lend(self.index.index[name])

    def lend(self, i: int) -> "NodeDef":
        """Node ``i`` handed to a pass; while :meth:`watch` is on, its state is noted first."""
        node = self.index.nodes[i]
        ledger = self._ledger
        if ledger is not None and i not in ledger:
            ledger[i] = node.SerializeToString()
        return node

    @contextmanager
    def watch(self, changed: list[str] | None = None) -> Iterator[list[str]]:
        """Watch the nodes lent while the block runs (a pass's turn).  Afterwards any node the
        block changed is put back as it was, and its name added to the yielded list: passes
        only read the graph, and a change made by a pass that then fails or is refused must
        not stay.  Costs one serialization per node lent, not a copy of the graph."""
        changed = [] if changed is None else changed
        self._ledger = {}
        try:
            yield changed
        finally:
            ledger, self._ledger = self._ledger, None
            nodes = self.index.nodes
            for i, before in ledger.items():
                node = nodes[i]
                if node.SerializeToString() != before:
                    node.ParseFromString(before)
                    changed.append(self.index.names[i])

    def has_node(self, name: str) -> bool:
        return name in self.index.index

    def op_of(self, name: str) -> str:
        return self.index.ops[self.index.index[name]]

    def input_names(self, name: str, *, control: bool = False) -> list[str]:
        """Producer tensors of a node, as ``name:port`` strings (port 0 bare)."""
        i = self.index.index[name]
        names = self.index.names
        out = []
        for p, port in self.index.inputs[i]:
            if port == CONTROL:
                if control:
                    out.append("^" + names[p])
            else:
                out.append(names[p] if port == 0 else f"{names[p]}:{port}")
        return out

    def producer(self, name: str, slot: int) -> tuple[str, int]:
        """``(producer_name, port)`` of data input ``slot`` of node ``name``."""
        p, port = self.index.data_input(self.index.index[name], slot)
        return self.index.names[p], port

    def consumer_names(self, name: str) -> list[str]:
        """Names of nodes that read any output of ``name`` (data or control)."""
        i = self.index.index[name]
        names = self.index.names
        return [names[c] for c, _, _ in self.index.consumers[i]]

    def resolve_forwarding(self, name: str) -> str:
        """Follow Identity-like nodes back to the node that really produces a value."""
        i = self.index.index[name]
        return self.index.names[self.forwarded(i)]

    def forwarded(self, i: int) -> int:
        """Index form of :meth:`resolve_forwarding`."""
        ops = self.index.ops
        for _ in range(MAX_FORWARDING):
            if ops[i] not in FORWARDING_OPS:
                break
            data = [t for t in self.index.inputs[i] if t[1] != CONTROL]
            if not data:
                break
            i = data[0][0]
        return i

    def const_value(self, name: str) -> "np.ndarray | None":
        """The value of a constant (seen through Identity reads and Casts), else None."""
        i = self.index.index.get(name)
        return None if i is None else self.const_value_of(i)

    def constant_chain(self, i: int) -> list[int] | None:
        """The nodes from ``i`` down to the constant it reads through forwarding ops and
        Casts (``i`` first, the Const last); None when ``i`` is no such constant."""
        ops, inputs = self.index.ops, self.index.inputs
        chain = [i]
        for _ in range(MAX_FORWARDING):
            op = ops[i]
            if op in CONST_OPS:
                return chain
            if op not in CONSTANT_PRESERVING_OPS:
                return None
            data = [t for t in inputs[i] if t[1] != CONTROL]
            if len(data) != 1 or data[0][1] != 0:
                return None
            i = data[0][0]
            chain.append(i)
        return None

    def const_value_of(self, i: int) -> "np.ndarray | None":
        """Index form of :meth:`const_value`; each constant is decoded once."""
        known = self._const_values.get(i, _UNKNOWN)
        if known is not _UNKNOWN:
            return known
        value = None
        chain = [i] if self.index.ops[i] in CONST_OPS else self.constant_chain(i)  # most: the Const itself
        if chain is not None:
            held = self.index.nodes[chain[-1]].attr.get("value")  # (each read of a map costs: one)
            if held is not None:
                value = self._decoded(held.tensor)
                for k in reversed(chain[:-1]):
                    if value is None:
                        break
                    value = _cast(value, self.index.nodes[k])
            if value is not None:
                value.setflags(write=False)  # shared by every reader
        self._const_values[i] = value
        return value

    def folded_constant(self, i: int) -> "tuple[np.ndarray, tuple[int, ...]] | None":
        """Node ``i``'s output 0 when the graph computes it from constants alone (through
        Identity, Squeeze, Reshape, ExpandDims, Cast, Fill, Pack or simple arithmetic), evaluated
        once in numpy: ``(value, nodes it is computed from, i first)``, else None."""
        folder = self._folder
        if folder is None:
            folder = self._folder = ConstantFolder(self.index, self._const_node_value, self._known_sizes,
                                                          self._known_shape)
        return folder.fold(i)

    def _known_shape(self, tensor: tuple[int, int]) -> "Shape | None":
        """A tensor's shape by the project's own propagation (never TensorFlow's)."""
        return self.shape_inference().shape(*tensor)

    def _known_sizes(self, i: int) -> "tuple[bool, tuple[int, ...]] | None":
        """Node ``i``'s output 0 as the project's shape propagation tells it (sizes of static
        dimensions, ``tf.shape(x)[-1]``), when every item is known; never TensorFlow's."""
        inference = self.shape_inference()
        inference.shape(i, 0)  # its producers' shapes first: a value reads them
        value = inference.value(i, 0)
        if value is None or any(v is None for v in value[1]):
            return None
        return value  # type: ignore[return-value]

    def _const_node_value(self, i: int) -> "np.ndarray | None":
        node = self.index.nodes[i]
        return self._decoded(node.attr["value"].tensor) if "value" in node.attr else None

    def _decoded(self, tensor: Any) -> "np.ndarray | None":
        """A TensorProto's value (read-only).  Small ones (a model's scalars, which every copy
        of a layer holds as constants of its own) are decoded once per distinct content."""
        if tensor.ByteSize() > SMALL_CONSTANT_BYTES:
            return tensor_value(tensor)
        key = tensor.SerializeToString()
        if key in self._small_values:
            return self._small_values[key]
        value = tensor_value(tensor)
        if value is not None:
            value.setflags(write=False)  # shared by every node of that content
        self._small_values[key] = value
        return value

    def rank_inference(self) -> RankInference:
        """The cheap local rank rules of :meth:`rank`, with what they inferred so far."""
        if self._ranks is None:
            self._ranks = RankInference(self.index, self.same_shape, self.const_value_of)
        return self._ranks

    def rank(self, tensor: str) -> int | None:
        """The rank of a tensor (``name`` or ``name:port``) when it can be told: by the cheap
        local rules first, then by the shape propagation of :meth:`static_shape`."""
        local = self.rank_inference().rank(tensor)
        if local is not None:
            return local
        name, port = parse_input(tensor)
        i = self.index.index.get(name)
        if i is None or port < 0:
            return None
        shape = self.static_shape((i, port))
        return None if shape is None else len(shape)

    def shape_inference(self) -> ShapeInference:
        """The project's own shape propagation over the whole graph (:mod:`.shape_inference`)."""
        if self._shapes is None:
            self._shapes = ShapeInference(self.index, self.same_shape, self._folded_value, demand=True)
        return self._shapes

    def _folded_value(self, i: int) -> "np.ndarray | None":
        value = self.const_value_of(i)
        if value is None:
            folded = self.folded_constant(i)
            value = None if folded is None else folded[0]
        return value

    def static_shape(self, tensor: tuple[int, int], *, infer: bool = True) -> Shape | None:
        """The static shape of a tensor ``(node, port)`` (unknown dimensions as None), from a
        constant's value, the graph's recorded ``_output_shapes`` or a placeholder's shape;
        failing those (and with ``infer``), from the project's own shape propagation
        (:meth:`shape_inference`), and only when that is left short by an op outside its table,
        from TensorFlow's shape inference (the op types noted in :attr:`tensorflow_shape_ops`).
        None when not even the rank is known."""
        node, port = tensor
        index = self.index
        if port == 0 and index.ops[node] in _CHAIN_OPS:
            chain = self.constant_chain(node)
            if chain is not None and "value" in index.nodes[chain[-1]].attr:
                return list(declared_shape(index.nodes[chain[-1]].attr["value"].tensor))  # no need to decode it
        attrs = index.nodes[node].attr
        if "_output_shapes" in attrs:
            shapes = attrs["_output_shapes"].list.shape
            if port < len(shapes) and not shapes[port].unknown_rank:
                dims: Shape = [d.size if d.size >= 0 else None for d in shapes[port].dim]
                if None not in dims or not infer:
                    return dims
        if port == 0 and self.index.ops[node] == "Placeholder" and "shape" in attrs:
            shape = attrs["shape"].shape
            if not shape.unknown_rank:
                return [d.size if d.size >= 0 else None for d in shape.dim]
        if not infer:
            return None
        inference = self.shape_inference()
        ours = inference.shape(node, port)
        if ours is not None and None not in ours:
            return ours
        missing = inference.missing(node)
        if not missing:
            return ours
        self.tensorflow_shape_ops.update(missing)
        if self._tf_shapes is None:
            self._tf_shapes = TensorFlowShapes(self.index, self.same_shape)
        theirs = self._tf_shapes.shape(node, port)
        if theirs is None or (ours is not None and theirs.count(None) >= ours.count(None)):
            return ours
        return theirs

    def note_tensorflow_shapes(self, warnings: list[str]) -> None:
        """Add to ``warnings`` one line per op type outside the shape table for which TensorFlow's
        shape inference was asked (once per run)."""
        for op in sorted(self.tensorflow_shape_ops):
            line = (f"a pass needed a shape past {op} nodes, outside scopefusion's shape table: TensorFlow's "
                    f"shape inference was asked (and TensorFlow imported)")
            if line not in warnings:
                warnings.append(line)
