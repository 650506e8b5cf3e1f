"""The reference's pattern builder, on top of the op-pattern language::

    pattern = (FusionPattern("MatMulBiasAdd")
               .add_op_desc("matmul", ["MatMul", "BatchMatMulV2"])
               .add_op_desc("bias")                      # no types: any op
               .add_op_desc("bias_add", ["BiasAdd", "Add", "AddV2"])
               .set_inputs("bias_add", ["matmul", "bias"])
               .set_output("bias_add")
               .build())

Each op desc becomes an :func:`op` expression labelled with its id, so an id
reached through several consumers is one node (the reference binds it to
several and leaves every pass to check).  As in the reference, the inputs given
to ``set_inputs`` may sit at any input position, and extra inputs are allowed;
``set_inputs(..., ordered=True)`` asks for these inputs at these positions.
Mistakes (an empty or duplicate id, an unknown id, no or several outputs, a
cycle, a desc not connected to the output) raise :class:`FusionPatternError`
when the pattern is defined.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..graph.pattern import Op, OpPattern, PatternDefinitionError, op


class FusionPatternError(PatternDefinitionError):
    """A :class:`FusionPattern` is defined wrongly."""


@dataclass
class _OpDesc:
    types: tuple[str, ...]
    dtype: Any = None
    attrs: dict[str, Any] = field(default_factory=dict)
    inputs: list[str] | None = None
    ordered: bool = False


class FusionPattern:
    """A pattern built op desc by op desc; :meth:`build` returns the :class:`OpPattern`."""

    def __init__(self, name: str) -> None:
        if not name:
            raise FusionPatternError("a FusionPattern needs a name")
        self.name = name
        self._descs: dict[str, _OpDesc] = {}
        self._outputs: list[str] = []

    def _fail(self, message: str) -> FusionPatternError:
        return FusionPatternError(f"FusionPattern {self.name}: {message}")

    def _known(self, op_id: str, where: str) -> None:
        if op_id not in self._descs:
            known = ", ".join(self._descs) or "none yet"
            raise self._fail(f"{where} names op desc {op_id!r}, which is not defined (defined: {known})")

    def add_op_desc(self, op_id: str, types: Sequence[str] = (), *, dtype: Any = None,
                    **attrs: Any) -> "FusionPattern":
        """An op desc: a node of one of ``types`` (none: any type), with optional dtype and
        attribute predicates as in :func:`op`."""
        if not op_id or not isinstance(op_id, str):
            raise self._fail(f"op desc id must be a non-empty string, got {op_id!r}")
        if op_id in self._descs:
            raise self._fail(f"op desc {op_id!r} is defined twice")
        names = (types,) if isinstance(types, str) else tuple(types)
        self._descs[op_id] = _OpDesc(names, dtype, dict(attrs))
        return self

    def set_inputs(self, op_id: str, input_ids: Sequence[str], *, ordered: bool = False) -> "FusionPattern":
        """``op_id``'s data inputs come from ``input_ids`` (at any positions unless ``ordered``)."""
        self._known(op_id, "set_inputs")
        for i in input_ids:
            self._known(i, f"set_inputs({op_id!r})")
        if self._descs[op_id].inputs is not None:
            raise self._fail(f"set_inputs is called twice for {op_id!r}")
        self._descs[op_id].inputs = list(input_ids)
        self._descs[op_id].ordered = ordered
        return self

    def set_output(self, op_id: str) -> "FusionPattern":
        """``op_id`` is the pattern's output (its root, where matching starts)."""
        self._known(op_id, "set_output")
        self._outputs.append(op_id)
        return self

    def build(self) -> OpPattern:
        """The pattern as an :class:`OpPattern`; raises :class:`FusionPatternError` if it is incomplete."""
        if not self._outputs:
            raise self._fail("no output is set (call set_output with the root op desc)")
        if len(self._outputs) > 1:
            raise self._fail(f"several outputs are set ({', '.join(self._outputs)}); exactly one is supported")
        root_id = self._outputs[0]
        if not self._descs[root_id].types:
            raise self._fail(f"the output {root_id!r} needs op types, so candidates can be looked up by type")
        built: dict[str, Op] = {}
        root = self._compile(root_id, built, [])
        unused = [i for i in self._descs if i not in built]
        if unused:
            raise self._fail(f"op desc(s) {', '.join(unused)} are not connected to the output {root_id!r}")
        return OpPattern(self.name, root)

    def _compile(self, op_id: str, built: dict[str, Op], path: list[str]) -> Op:
        if op_id in built:
            return built[op_id]
        if op_id in path:
            raise self._fail(f"the inputs form a cycle: {' -> '.join(path[path.index(op_id):] + [op_id])}")
        desc = self._descs[op_id]
        path.append(op_id)
        if desc.inputs is None:
            expr = op(desc.types, any_inputs=True, label=op_id, dtype=desc.dtype, **desc.attrs)
        else:
            inputs = [self._compile(i, built, path) for i in desc.inputs]
            expr = op(desc.types, *inputs, commutative=False, unordered=not desc.ordered, extra_inputs=True,
                      label=op_id, dtype=desc.dtype, **desc.attrs)
        path.pop()
        built[op_id] = expr
        return expr
