"""The base class every graph fusion pass derives from, and what its ``fusion`` returns.

A pass refuses a match by raising :class:`~scopefusion.core.fusion.refusal.Refused`, most simply
through ``fail(reason, *nodes)``, from ``fusion`` or anything it calls.  Returning
:class:`NotFused` (or ``self.refuse(reason)``) is the older spelling, still understood.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence, Union

from ..fusion.candidate import FusedInput, InnerInput, InnerNode
from ..graph.pattern import OpPattern

if TYPE_CHECKING:  # pragma: no cover
    from ..graph.matching import PatternMatch
    from .fusion_pattern import FusionPattern

#: The two sections of the fusion switch file, one per kind of graph pass.
FUSION_TYPES = ("GraphFusion", "UBFusion")


@dataclass
class FusedOp:
    """What a match becomes.

    ``inputs`` and ``outputs`` name tensors of the match: a variable (``"x"``), a
    label (its node's output 0) or ``"label:port"``.  Fused input ``i`` reads
    ``inputs[i]``; fused output ``k`` replaces ``outputs[k]`` (default: the
    pattern's outputs, or its root).  ``name`` defaults to the name of the node
    whose output is fused output 0, so the fused node takes over its name.
    ``absorbed`` names more nodes (indices) the fused op replaces besides the match's:
    what the op now knows as an attribute, e.g. a causal mask computed from constants
    (a node still read from outside the result refuses it, as for any member).
    ``view_shapes`` names tensors ``(node, port)`` that removed ``Reshape`` nodes read as their
    shape and the pass has shown change nothing the fused op computes (a view it checked
    splits and merges the batch only): the fused op need not take them.

    Instead of one node of ``type``, an inner graph of several new nodes may stand
    for the match: ``inner_nodes`` (inputs name other inner nodes or
    :func:`fused_input`) and ``inner_outputs`` (fused output -> ``"node:port"``).
    """

    type: str
    inputs: Sequence[str]
    outputs: Sequence[str] = ()
    attrs: Mapping[str, Any] = field(default_factory=dict)
    name: str | None = None
    inner_nodes: Sequence[InnerNode] = ()
    inner_outputs: Mapping[int, str] = field(default_factory=dict)
    description: str = ""
    absorbed: frozenset[int] = frozenset()
    view_shapes: frozenset[tuple[int, int]] = frozenset()


@dataclass(frozen=True)
class NotFused:
    """A match the pass declines, with the reason (shown in the report).

    The older spelling of a refusal, still understood: raise ``Refused`` instead
    (``fail(reason, *nodes)``), which also names the nodes and works from any depth.
    """

    reason: str


FusionAnswer = Union[FusedOp, NotFused]


def fused_input(index: int) -> FusedInput:
    """An inner-graph node's reference to fused input ``index``."""
    return FusedInput(index)


def inner_node(name: str, op: str, inputs: Sequence[InnerInput] = (),
               attrs: Mapping[str, Any] | None = None) -> InnerNode:
    """One node of an inner graph."""
    return InnerNode(name, op, list(inputs), dict(attrs or {}))


class PatternFusionBasePass(ABC):
    """A graph fusion pass: finds matches of op patterns, whatever their names.

    Subclasses set ``name`` (the registry name; the class name if empty),
    ``description``, ``fusion_type`` (``"GraphFusion"`` or ``"UBFusion"``: the
    switch-file section, and the stage it runs in), ``forbidden_close`` (the
    switch file cannot turn it off) and ``default_on`` (False: off unless the switch
    file turns it on), and implement:

    * :meth:`define_patterns`: the patterns (:class:`OpPattern` or built
      :class:`FusionPattern`), tried in order, each over the whole graph;
    * :meth:`fusion`: what one match becomes (:class:`FusedOp`); a match it declines, it
      refuses with ``fail(reason, *nodes)`` (raises ``Refused``), there or in any check
      it calls.
    """

    name: ClassVar[str] = ""
    engine: ClassVar[str] = "graph"
    description: ClassVar[str] = ""
    fusion_type: ClassVar[str] = "GraphFusion"
    forbidden_close: ClassVar[bool] = False
    #: False: the pass runs only when the switch file turns it on (by name or ``ALL``)
    default_on: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):
            cls.name = cls.__name__
        if cls.fusion_type not in FUSION_TYPES:
            raise TypeError(f"{cls.__name__}.fusion_type must be one of {', '.join(FUSION_TYPES)}, "
                            f"not {cls.fusion_type!r}")

    @abstractmethod
    def define_patterns(self) -> Sequence[Union[OpPattern, "FusionPattern"]]:
        """The patterns this pass looks for."""

    @abstractmethod
    def fusion(self, match: "PatternMatch") -> FusionAnswer:
        """The fused op for ``match``; ``fail(reason, *nodes)`` refuses it."""

    # -- helpers for fusion() --------------------------------------------------------
    @staticmethod
    def refuse(reason: str) -> NotFused:
        """``return self.refuse(reason)``: the older spelling of ``fail(reason)``, still understood."""
        return NotFused(reason)

    @staticmethod
    def outside_readers(match: "PatternMatch", label: str) -> list[str]:
        """Names of nodes outside the match that read the output of ``label``'s node."""
        index = match.view.index
        node = match.nodes[label]
        return [index.names[c] for c, port, _ in index.consumers[node]
                if c not in match.members and port >= 0]
