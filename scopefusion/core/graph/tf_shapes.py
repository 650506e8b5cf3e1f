"""Static shapes from TensorFlow's own shape inference.

When a pass needs a shape that the graph does not record and a constant does not
give, the graph is imported into a ``tf.Graph`` once (TensorFlow runs every op's
shape function while importing, folding small constant computations such as a
``Reshape`` of a constant) and the shape is read off the imported tensor.  Ops
TensorFlow does not know (fused ops of an earlier stage) are imported as
placeholders of unknown shape, so everything upstream of them is still inferred; an output
that a fused op declares shaped like one of its inputs (``same_shape``) is imported as an
``Identity`` of that input, so shapes flow through it to what lies downstream.
TensorFlow is imported only when the first such question is asked.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ..native_output import import_tensorflow_quietly
from .index import GraphIndex
from .protos import message_class
from .tf_ops import is_tensorflow_op
from .vocabulary import CONTROL, DT_FLOAT, tensor_name

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

Shape = list[int | None]
#: Per op type: output port -> the input whose shape that output has.
ShapeRules = Mapping[str, Mapping[int, int]]

#: Suffix of the placeholder standing for output ``k`` > 0 of an op TensorFlow does not know.
_PORT_SUFFIX = "/_scopefusion_port_"


class TensorFlowShapes:
    """Shapes of the tensors of one indexed graph, inferred by TensorFlow on first use."""

    def __init__(self, index: GraphIndex, same_shape: ShapeRules | None = None) -> None:
        self.index = index
        self.same_shape = same_shape or {}
        self._graph: Any = None
        self._failed = False

    def shape(self, node: int, port: int) -> Shape | None:
        """The static shape of output ``port`` of ``node`` (unknown dimensions as None);
        None when even its rank is unknown or the graph could not be imported."""
        graph = self._imported()
        if graph is None:
            return None
        try:
            tensor = graph.get_tensor_by_name(f"{self.index.names[node]}:{port}")
        except (KeyError, ValueError):
            return None
        if tensor.shape.rank is None:
            return None
        return list(tensor.shape.as_list())

    def _imported(self) -> Any:
        if self._graph is None and not self._failed:
            import_tensorflow_quietly()  # only a pass that asks for TensorFlow's shapes gets here
            import tensorflow as tf  # deferred: TensorFlow costs seconds to import

            graph = tf.Graph()
            try:
                with graph.as_default():
                    tf.compat.v1.import_graph_def(self._importable(), name="")
            except Exception:  # noqa: BLE001 - a graph TensorFlow cannot import has no inferred shapes
                self._failed = True
                return None
            self._graph = graph
        return self._graph

    def _importable(self) -> "GraphDef":
        """A copy of the graph in which ops TensorFlow does not know are stand-ins."""
        from tensorflow.core.framework import graph_pb2  # deferred: TensorFlow costs seconds to import

        functions = {f.signature.name for f in self.index.graph_def.library.function}
        unknown = {i for i, op in enumerate(self.index.ops) if op not in functions and not is_tensorflow_op(op)}
        out = graph_pb2.GraphDef()
        out.versions.CopyFrom(self.index.graph_def.versions)
        out.library.CopyFrom(self.index.graph_def.library)
        extra_ports: dict[int, set[int]] = {}
        for i, node in enumerate(self.index.nodes):
            if i in unknown:
                out.node.append(self._stand_in(i, unknown))
                continue
            copy = out.node.add()
            copy.CopyFrom(node)
            if not any(p in unknown for p, _ in self.index.inputs[i]):
                continue
            del copy.input[:]
            for p, port in self.index.inputs[i]:
                name = self.index.names[p]
                if p in unknown and port == CONTROL:
                    continue
                if p in unknown and port > 0:
                    extra_ports.setdefault(p, set()).add(port)
                    copy.input.append(f"{name}{_PORT_SUFFIX}{port}")
                else:
                    copy.input.append(tensor_name(name, port))
        for p, ports in extra_ports.items():
            for port in sorted(ports):
                out.node.append(_placeholder(f"{self.index.names[p]}{_PORT_SUFFIX}{port}", self.index.nodes[p].attr))
        return out

    def _stand_in(self, i: int, unknown: set[int]) -> Any:
        """What an op TensorFlow does not know is imported as: an Identity of the input its
        output 0 is shaped like (when declared, and the node's ``T`` gives the dtype), else a
        placeholder of unknown shape."""
        node = self.index.nodes[i]
        source = self.same_shape.get(self.index.ops[i], {}).get(0)
        data = [(p, port) for p, port in self.index.inputs[i] if port != CONTROL]
        typed = "T" in node.attr and node.attr["T"].WhichOneof("value") == "type"
        if source is not None and source < len(data) and typed:
            p, port = data[source]
            if p not in unknown or port == 0:  # another stand-in has its port 0 only
                return _identity(node.name, tensor_name(self.index.names[p], port), node.attr)
        return _placeholder(node.name, node.attr)


def _identity(name: str, source: str, attrs: Any) -> Any:
    node = message_class("NodeDef")(name=name, op="Identity", input=[source])
    node.attr["T"].type = attrs["T"].type
    return node


def _placeholder(name: str, attrs: Any) -> Any:
    node = message_class("NodeDef")(name=name, op="Placeholder")
    dtype = attrs["T"].type if "T" in attrs and attrs["T"].WhichOneof("value") == "type" else DT_FLOAT
    node.attr["dtype"].type = dtype
    node.attr["shape"].shape.unknown_rank = True
    return node

