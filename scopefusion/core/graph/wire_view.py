"""What load-time validation reads of a serialized GraphDef, read again from its bytes through
message types of this module's own, so that protobuf does the work of a pass over the nodes:

* :func:`attr_signatures`: for each node, the bytes of its op type and attributes with every
  tensor's contents left out.  Two nodes with the same signature have the same op type and the
  same attributes in everything validation judges of them (a tensor is judged by its shape; its
  dtype, shape, resource handles and variants are kept), so judging one judges both.  The
  constants of a graph, each holding other values, mostly share a few signatures.
  The trimmed graph is serialized as a whole and read back as one ``bytes`` per node, which
  are the nodes' own serializations, cut out at C speed.
  Where the C extension ``_signatures`` is built, :func:`node_signatures` reads another
  encoding of the same from the nodes' bytes in one pass, and each constant's content length.
* :func:`all_inputs`: the inputs of all nodes, in graph order, as one list.
* :func:`inputs_and_devices`: those, and the distinct device strings of the nodes.

The types mirror TensorFlow's: a node keeps its ``op`` field (number 2) and its attribute map
(number 5) read as a list of entries (a map's wire form; duplicated keys stay apart), an
attribute value is TensorFlow's ``AttrValue`` but for its tensor, whose message keeps only
the fields named above.  Fields of the same number and kind parse the same way (the last
scalar wins, messages merge, a oneof keeps its last member), so equal signatures mean equal
values.  Every other field is dropped.  For :func:`all_inputs` the graph's node field is read
as *one* message: protobuf merges the repeated occurrences of a singular message field, so
the inputs of every node land in one list, in order (and, the device field declared repeated
there, every node's device in another).
"""
from __future__ import annotations

from array import array
from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

from .native import native_module
from .protos import message_class

_PACKAGE = "scopefusion.wire_view"
_FILE = "scopefusion/core/graph/wire_view.proto"
#: The fields of TensorFlow's TensorProto that a signature keeps.
_TENSOR_FIELDS = ("dtype", "tensor_shape", "resource_handle_val", "variant_val")


def _copy(descriptor: Any, name: str, keep: tuple[str, ...], **retarget: str) -> descriptor_pb2.DescriptorProto:
    """A message type named ``name`` declaring the fields ``keep`` of ``descriptor`` as it does,
    but for the fields named in ``retarget``, which hold this module's type of that name."""
    proto = descriptor_pb2.DescriptorProto()
    descriptor.CopyToProto(proto)
    fields = [f for f in proto.field if f.name in keep]
    for f in fields:
        if f.name in retarget:
            f.type_name = f".{_PACKAGE}.{retarget[f.name]}"
    oneofs = proto.oneof_decl if any(f.HasField("oneof_index") for f in fields) else []
    return descriptor_pb2.DescriptorProto(name=name, field=fields, oneof_decl=oneofs)  # nested types: full names


@cache
def _classes() -> dict[str, Any]:
    """The message classes of this module, declared once in protobuf's default pool."""
    graph_def, node_def, attr_value, tensor = (message_class(n).DESCRIPTOR
                                               for n in ("GraphDef", "NodeDef", "AttrValue", "TensorProto"))
    entry = node_def.fields_by_name["attr"].message_type  # the attribute map's entry: key, value
    types = [_copy(tensor, "Tensor", _TENSOR_FIELDS),
             _copy(attr_value, "Value", tuple(attr_value.fields_by_name), tensor="Tensor"),
             _copy(entry, "Entry", ("key", "value"), value="Value"),
             _copy(node_def, "Node", ("op", "attr"), attr="Entry"),
             _copy(node_def, "Inputs", ("input", "device")),
             _copy(graph_def, "Graph", ("node",), node="Node"),
             _copy(graph_def, "GraphInputs", ("node",), node="Inputs"),
             _copy(graph_def, "NodeBytes", ("node",))]
    types[-2].field[0].label = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL  # one message: nodes merge
    device = next(f for f in types[-4].field if f.name == "device")
    device.label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED  # merged: every node's device, in one list
    types[-1].field[0].type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES  # each node's bytes as they are
    types[-1].field[0].ClearField("type_name")
    used = [f for d in (attr_value, tensor) for f in d.fields]
    files = {t.file.name for f in used for t in (f.message_type, f.enum_type) if t is not None}
    file = descriptor_pb2.FileDescriptorProto(name=_FILE, package=_PACKAGE, syntax="proto3",
                                              dependency=sorted(files), message_type=types)
    pool = descriptor_pool.Default()
    pool.AddSerializedFile(file.SerializeToString())
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
            for name in ("Graph", "GraphInputs", "NodeBytes")}


def _parse(kind: str, data: bytes) -> Any | None:
    view = _classes()[kind]()
    try:
        view.ParseFromString(data)
    except message.DecodeError:
        return None
    return view


def attr_signatures(data: bytes) -> list[bytes] | None:
    """The attribute signature of each node of the GraphDef serialized in ``data``, in graph
    order; None when the bytes do not parse."""
    view = _parse("Graph", data)
    if view is None:
        return None
    view.DiscardUnknownFields()
    nodes = _classes()["NodeBytes"]()
    nodes.ParseFromString(view.SerializeToString())  # the trimmed graph at once, then cut into its nodes
    return list(nodes.node)


def node_signatures(data: bytes, offsets: array | None = None,
                    lengths: array | None = None) -> tuple[list[bytes], list[int] | None] | None:
    """Each node's attribute signature and, where the native extension ``_signatures`` reads them
    (``offsets`` and ``lengths``: where each node's bytes sit in ``data``, as the scan found them),
    how many bytes of raw contents the tensor of each node's ``value`` attribute holds (-1: not
    plain to tell; None: not read).  The native signatures are another encoding of the same fields
    as :func:`attr_signatures` (equal ones mean the same op type and attributes but for tensor
    contents), not the same bytes.  None when the bytes do not parse."""
    module = native_module("_signatures")
    if module is not None and offsets is not None and lengths is not None:
        found = module.signatures(data, offsets.tobytes(), lengths.tobytes(), _CONTENTS_KEY)
        if found is not None:
            return found[0], found[1]
    signatures = attr_signatures(data)
    return None if signatures is None else (signatures, None)


#: the attribute whose tensor's raw contents the native signatures measure: a constant's value
_CONTENTS_KEY = b"value"


def all_inputs(data: bytes) -> list[str] | None:
    """The inputs of every node of the GraphDef serialized in ``data``, node after node; None
    when the bytes do not parse."""
    view = _parse("GraphInputs", data)
    return None if view is None else list(view.node.input)


def inputs_and_devices(data: bytes) -> tuple[list[str], set[str]] | None:
    """:func:`all_inputs`, and the distinct device strings of the nodes (an empty one is not
    written, so it is not among them); None when the bytes do not parse."""
    view = _parse("GraphInputs", data)
    return None if view is None else (list(view.node.input), set(view.node.device))


__all__ = ["all_inputs", "attr_signatures", "inputs_and_devices", "node_signatures"]
