"""What one ``Session.run`` asks for, in terms of the user's (unfused) graph.

Fetches come as ``tf.compat.v1.Session.run`` takes them: a tensor, an op, a
variable, a name (``"x:0"`` a tensor, ``"x"`` an op), or lists, tuples, dicts
and named tuples of those; feed keys are tensors or tensor names.  Each is
resolved against the user's graph, with TensorFlow's own errors for what is
not in it, except for names the graph does not have: those may name a fused op
(the seed's ``sess.run(xx_name_scope)``), which only the fused graph can tell
(:meth:`Request.resolve_fused`).  A fused op's name fetches its output 0 (a
layer norm's ``y``, the boxes of a batched NMS) and ``name:k`` its output k.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import ScopeFusionError
from ..core.graph.vocabulary import parse_input

#: How many fused op names an error about an unknown fetch lists.
_SHOWN_NAMES = 6


@dataclass
class Leaf:
    """One fetch: a tensor (``name:port``), an op to run (``op``), or a name the
    graph does not have (``unknown``; ``fused`` once resolved to a fused op's output)."""

    kind: str
    name: str
    outputs: tuple[str, ...] = ()


def node_of(tensor: str) -> str:
    """The node name of a tensor name."""
    return parse_input(tensor)[0]


def _leaf(graph: Any, fetch: Any) -> Leaf:
    if isinstance(fetch, str):
        try:
            element = graph.as_graph_element(fetch, allow_tensor=True, allow_operation=True)
        except (KeyError, ValueError):
            return Leaf("unknown", fetch)
    else:
        element = graph.as_graph_element(fetch, allow_tensor=True, allow_operation=True)
    if hasattr(element, "value_index"):  # a tf.Tensor
        return Leaf("tensor", element.name)
    return Leaf("op", element.name)


class Request:
    """The fetches and feeds of one run, resolved against the user's graph."""

    def __init__(self, graph: Any, fetches: Any, feed_dict: Mapping[Any, Any] | None) -> None:
        import tensorflow as tf  # deferred: TensorFlow costs seconds to import

        self.structure = fetches
        self.leaves = [_leaf(graph, f) for f in tf.nest.flatten(fetches)]
        self.feeds: dict[str, Any] = {}
        for key, value in (feed_dict or {}).items():
            tensor = graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
            self.feeds[tensor.name] = value

    def of_kind(self, kind: str) -> list[str]:
        return [leaf.name for leaf in self.leaves if leaf.kind == kind]

    def resolve_fused(self, fused: Mapping[str, Sequence[str]]) -> None:
        """Resolve the names the user's graph does not have against the fused ops
        (fused op name -> its output tensors); a name that is no fused op either is an error."""
        for leaf in self.leaves:
            if leaf.kind != "unknown":
                continue
            name, port = parse_input(leaf.name)
            if name in fused and f"{name}:{port}" in fused[name]:
                leaf.kind, leaf.outputs = "fused", (f"{name}:{port}",)
            else:
                shown = ", ".join(sorted(fused)[:_SHOWN_NAMES]) + (", ..." if len(fused) > _SHOWN_NAMES else "")
                raise ScopeFusionError(
                    f"fetch {leaf.name!r}: the graph has no op or tensor of that name, and the fused graph has "
                    f"no fused op of that name; allowed: ops and tensors of the graph, or a fused op's name "
                    f"({len(fused)} fused op(s){': ' + shown if fused else ''})")

    def fetched_tensors(self) -> list[str]:
        """Every tensor the run fetches, in the runnable graph's names."""
        out: list[str] = []
        for leaf in self.leaves:
            out.extend(leaf.outputs if leaf.kind == "fused" else [leaf.name] if leaf.kind == "tensor" else [])
        return out

    def pack(self, values: Mapping[str, Any]) -> Any:
        """The fetched values in the shape of the fetches (``None`` for ops)."""
        import tensorflow as tf  # deferred: TensorFlow costs seconds to import

        flat: list[Any] = []
        for leaf in self.leaves:
            if leaf.kind == "op":
                flat.append(None)
            elif leaf.kind == "tensor":
                flat.append(values[leaf.name])
            else:
                flat.append(values[leaf.outputs[0]])
        return tf.nest.pack_sequence_as(self.structure, flat)
