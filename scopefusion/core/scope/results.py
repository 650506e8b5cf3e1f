"""What a pass says about a match: :class:`ScopesResult` (which scopes and
nodes belong together) and :class:`FusionScopesResult` (the fused op that
replaces them)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from ..fusion.candidate import FusedInput, InnerInput, InnerNode

if TYPE_CHECKING:  # pragma: no cover
    from .instances import ScopePart
    from .scope_graph import Scope


@dataclass
class ScopesResult:
    """Scopes (and optional extra node names outside them) fused as one unit."""

    scopes: list["Scope"]
    nodes: list[str] = field(default_factory=list)
    #: Only these nodes of the scope (one call of a layer called several times in one scope,
    #: see :mod:`.instances`); None: every node under the scopes.
    part: "ScopePart | None" = None


class FusionScopesResult:
    """The description of one fused op.

    Port maps are keyed by the name suffix of an inner node (``"batchnorm/mul_1"``)
    and give, per input slot (or output port) of that node, the index of the
    fused op's input (or output) it corresponds to, or ``None``.
    """

    def __init__(self, name: str, scopes: Sequence["Scope"], nodes: Sequence[str] = (),
                 part: "ScopePart | None" = None) -> None:
        self.name = name
        #: one call of a layer in its scope: only its nodes are fused (None: the whole scopes)
        self.part = part
        self.type = ""
        self.description = ""
        self.attrs: dict[str, Any] = {}
        self.input_map: dict[str, list[int | None]] = {}
        self.output_map: dict[str, list[int | None]] = {}
        self.inner_nodes: list[InnerNode] = []
        self.inner_outputs: dict[int, str] = {}
        self.scopes: list["Scope"] = list(scopes)
        self.extra_nodes: list[str] = list(nodes)
        self.rejection: str | None = None
        #: tensors from outside that inner nodes read and the fused op computes from its own inputs
        self.recomputed_reads: list[tuple[str, int]] = []
        #: fused inputs given as outside tensors (no inner node need read them)
        self.input_tensors: dict[int, tuple[str, int]] = {}

    def __repr__(self) -> str:
        return f"FusionScopesResult({self.name!r}, type={self.type!r})"

    # -- description ----------------------------------------------------------
    def set_type(self, op_type: str) -> None:
        self.type = op_type

    def set_description(self, text: str) -> None:
        self.description = text

    def set_name(self, name: str) -> None:
        self.name = name

    def set_attr(self, name: str, value: Any) -> None:
        self.attrs[name] = value

    def insert_inputs(self, inner_op_name: str, indices: Sequence[int | None]) -> None:
        """Input slot ``k`` of inner node ``inner_op_name`` is fused input ``indices[k]``."""
        self.input_map[inner_op_name] = list(indices)

    def insert_outputs(self, inner_op_name: str, indices: Sequence[int | None]) -> None:
        """Output port ``k`` of inner node ``inner_op_name`` is fused output ``indices[k]``."""
        self.output_map[inner_op_name] = list(indices)

    def insert_input_tensor(self, index: int, node: str, port: int = 0) -> None:
        """Fused input ``index`` is output ``port`` of outside node ``node``, which no inner node need
        read: the fused op computes from it a tensor they read (declare that one with :meth:`recompute`)."""
        self.input_tensors[index] = (node, port)

    def recompute(self, node: str, port: int = 0) -> None:
        """Inner nodes read output ``port`` of outside node ``node``, which the fused op does not take
        but computes from its inputs (say why in the description): the read is no missing input."""
        self.recomputed_reads.append((node, port))

    # -- inner graph ------------------------------------------------------------
    @staticmethod
    def fused_input(index: int) -> FusedInput:
        return FusedInput(index)

    def add_inner_node(
        self, name: str, op: str, inputs: Sequence[InnerInput] = (), attrs: dict[str, Any] | None = None
    ) -> InnerNode:
        """Add a node of the inner graph (the "scope to multi nodes" form)."""
        if any(n.name == name for n in self.inner_nodes):
            raise ValueError(f"inner node {name!r} added twice to result {self.name!r}")
        node = InnerNode(name, op, list(inputs), dict(attrs or {}))
        self.inner_nodes.append(node)
        return node

    def set_inner_output(self, index: int, tensor: str) -> None:
        """Fused output ``index`` is produced by inner tensor ``"node:port"``."""
        self.inner_outputs[index] = tensor

    @property
    def has_inner_graph(self) -> bool:
        return bool(self.inner_nodes)

    # -- rejection (the older spelling) --------------------------------------------
    def reject(self, reason: str) -> None:
        """Refuse this result; nothing in the graph changes for it.  The older spelling of
        ``fail(reason, *nodes)`` (which raises ``Refused``), still understood."""
        self.rejection = reason

    @property
    def rejected(self) -> bool:
        return self.rejection is not None

    # -- derived -------------------------------------------------------------------
    def num_inputs(self) -> int:
        used = [i for ports in self.input_map.values() for i in ports if i is not None] + list(self.input_tensors)
        return max(used) + 1 if used else 0

    def num_outputs(self) -> int:
        used = [i for ports in self.output_map.values() for i in ports if i is not None]
        return max(used) + 1 if used else 0
