"""A fusion candidate: what any engine proposes to replace, in terms of the graph only.

Scope passes and graph passes describe their matches differently (port maps
relative to scopes, labels of an op pattern); each engine turns them into
:class:`FusionCandidate` objects, and one shared pipeline checks, settles and
applies those.  A candidate names its member nodes, the tensors its fused op
reads and the member outputs it produces, and the fused op itself (a type with
attributes, or an inner graph of several new nodes).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from .refusal import Refused

__all__ = ["FusedInput", "FusionCandidate", "InnerInput", "InnerNode", "Refused", "Tensor"]

Tensor = tuple[int, int]  # (node index, port)


@dataclass(frozen=True)
class FusedInput:
    """Reference to input ``index`` of the fused op, for inner-graph nodes."""

    index: int


InnerInput = Union[str, FusedInput]


@dataclass
class InnerNode:
    """One node of an inner graph; ``inputs`` name other inner nodes
    (``"name"`` or ``"name:port"``, control ``"^name"``) or fused inputs."""

    name: str
    op: str
    inputs: list[InnerInput] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)  # a stage holds one per match: no instance dict each
class FusionCandidate:
    """One proposed fusion.

    ``inputs`` maps each fused input to the tensor feeding it; ``outputs`` maps
    member outputs ``(node, port)`` to the fused output that replaces them.  With an
    inner graph, ``inner_outputs`` says which inner tensor is each fused output.
    A candidate is read, never changed, once made: candidates of one pass with equal
    attributes may share one ``attrs`` dict.
    """

    name: str
    members: frozenset[int]
    pass_name: str
    engine: str = "scope"  # which engine proposed it: "scope" or "graph"
    type: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)
    inputs: dict[int, Tensor] = field(default_factory=dict)
    outputs: dict[Tensor, int] = field(default_factory=dict)
    inner_nodes: list[InnerNode] = field(default_factory=list)
    inner_outputs: dict[int, str] = field(default_factory=dict)
    where: list[str] = field(default_factory=list)  # the scopes, or the matched node, for reports
    description: str = ""
    order: int = 0  # priority among candidates of one stage: lower wins conflicts
    #: shape operands of removed Reshape nodes the fused op need not take (``FusedOp.view_shapes``)
    view_shapes: frozenset[Tensor] = frozenset()
    #: tensors from outside the result that its nodes read and the fused op computes from its own
    #: inputs instead (a layer norm's gradient reads the forward's inner statistics, which its fused op
    #: computes from x): the pass vouches for it, and the plan accepts those reads
    recomputed: frozenset[Tensor] = frozenset()

    @property
    def has_inner_graph(self) -> bool:
        return bool(self.inner_nodes)

    @property
    def label(self) -> str:
        """The name a report shows: a graph pass's inner graph is named after the scope its nodes share,
        which many results may share (every block of a model), so it shows the node that produces
        fused output 0 instead (``scope/inner``, unique in the graph); otherwise :attr:`name`."""
        if self.engine != "graph" or not self.inner_nodes:
            return self.name
        ref = self.inner_outputs.get(0, self.inner_nodes[-1].name)
        node = ref.split(":")[0] if isinstance(ref, str) else self.inner_nodes[-1].name
        return f"{self.name}/{node}"

    def num_inputs(self) -> int:
        return max(self.inputs, default=-1) + 1

    def num_outputs(self) -> int:
        return max(self.outputs.values(), default=-1) + 1
