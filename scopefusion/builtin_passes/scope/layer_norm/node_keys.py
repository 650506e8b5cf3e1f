"""What a layer-norm description holds of a node's attributes, found once per distinct set.

A model's alike layer norms hold nodes with the same attributes over and over (every ``Mul``
with ``T: float``, every axis constant with the same value).  :class:`AttributeKeys` reads a
node's attributes from its serialized bytes with its name, op, inputs and device left out (one
call into protobuf, no Python object per attribute) and builds the key of :func:`attributes_key`
only for bytes it has not met before.  Equal bytes hold equal attributes, so a node gets the
very key it would get on its own: the bytes decide only whether the key is built or looked up
(bytes that also hold a colocation list or debug info are only met less often).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Hashable

from ....core.graph.attr_rules import after_head_fields

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.node_def_pb2 import NodeDef

#: Constants of at most this many elements (scalars, axes, shapes) are described by their values.
SMALL_CONSTANT = 8

#: Bytes longer than this (a large constant's values) are not kept: they rarely repeat.
_KEPT_BYTES = 512


def attributes_key(node: "NodeDef") -> tuple[Hashable, bool]:
    """``(key, large)``: a node's attributes, but ``_class`` (it names other nodes), with a
    constant's value as its bytes when it is small, else as its type and shape (``large``:
    its bytes are compared only if the first analysis asks)."""
    items: list[tuple[str, Hashable]] = []
    large = False
    for k, v in sorted(node.attr.items()):
        if k == "_class":
            continue
        if k == "value" and v.WhichOneof("value") == "tensor":
            tensor = v.tensor
            dims = tuple(d.size for d in tensor.tensor_shape.dim)
            if math.prod(dims) > SMALL_CONSTANT:
                large = True
                items.append((k, ("large", tensor.dtype, dims)))
                continue
        items.append((k, v.SerializeToString(deterministic=True)))
    return tuple(items), large


class AttributeKeys:
    """:func:`attributes_key` of the nodes of one graph, built once per distinct attributes."""

    def __init__(self, nodes: "list[NodeDef]") -> None:
        self.nodes = nodes
        self._known: dict[bytes, tuple[Hashable, bool]] = {}
        self.built = 0

    def of(self, i: int) -> tuple[Hashable, bool]:
        """``(key, large)`` of node ``i`` (see :func:`attributes_key`)."""
        return self.of_all([i])[0]

    def of_all(self, indices: list[int]) -> list[tuple[Hashable, bool]]:
        """:meth:`of` each node of ``indices``."""
        nodes, known = self.nodes, self._known
        lookup, after_head = known.get, after_head_fields
        out: list[tuple[Hashable, bool]] = []
        add = out.append
        for i in indices:  # attr_signature(node, deterministic=True), inlined: a call less per node
            node = nodes[i]
            data = node.SerializeToString(deterministic=True)
            signature = after_head(data)
            if signature is None:
                signature = data
            found = lookup(signature)
            if found is None:
                self.built += 1
                found = attributes_key(node)
                if len(signature) <= _KEPT_BYTES:
                    known[signature] = found
            add(found)
        return out
