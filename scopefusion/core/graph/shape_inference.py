"""Static shapes over a GraphDef by the project's own propagation, without TensorFlow.

Each tensor's shape (a list of dimensions, None where unknown; None for the whole shape when
not even the rank is known) follows from its producer's rule (:mod:`.shape_rules`,
:mod:`.shape_rules_nn`) and the shapes, and for shape-like integer tensors the values
(:mod:`.shape_values`), of what that producer reads.  Values are
*partial*: a ``Pack`` of ``Shape(x)[0]`` and ``-1`` is known as ``[d, None]`` even when ``d`` is
unknown, as TensorFlow's own shape inference reads the shape input of a ``Reshape``.

The rules cover the op types real models use; a node of any other type TensorFlow knows is
*outside the table*: its shapes are unknown here, and every shape left incomplete because of one
carries that op type (:meth:`ShapeInference.missing`), so that a caller that really needs such a
shape can say so and ask TensorFlow.  So does a value a rule asks for (a ``Reshape``'s shape
input, say) that is left unknown because its producer's op has no value rule.  An op TensorFlow
does not know either (a fused op of an earlier stage) has the shape its ``same_shape`` rule gives
or none.  A call of a library function, functional conditional or loop has the shapes its body
gives (:mod:`.shape_functions`, :mod:`.shape_calls`).

Each node's shapes are inferred once, after its producers' (an iterative walk: no recursion over
the graph's depth).  A TF1 loop's ``Merge`` is relaxed over its back edge until it settles
(:mod:`.shape_loops`); any other cycle's back edge reads as unknown.

In a graph without loops (``demand``), the walk infers only what the rules read: a node's rule
runs first, and each producer whose shapes it reads and that is not inferred yet is inferred
before the rule runs again.  When the rule then gives every output a fully known shape, the
node's shapes are settled without its other producers (a ``Reshape`` to a constant shape does
not depend on its input's); otherwise its producers are inferred too, for the op types outside
the table its shapes depend on.  The shapes are the same either way; asking for the shape of a
tensor deep in a long graph no longer walks every node above it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

import numpy as np

from .shape_calls import call_shapes, is_call
from .shape_context import Dims, OpContext, Value, merge_dims
from .shape_functions import FunctionShapes
from .shape_loops import LoopMerges
from .shape_rules import RULES, SETTLED_BY_VALUES, const_shape
from .shape_values import VALUE_RULES, valueless
from .tf_ops import is_tensorflow_op
from .vocabulary import CONST_OPS, CONTROL, LOOP_BACK_OPS, LOOP_MERGE_OPS

#: Op types of loops and conditionals: a graph holding any is walked producers first.
_LOOP_OPS = LOOP_BACK_OPS | LOOP_MERGE_OPS

if TYPE_CHECKING:  # pragma: no cover
    from .index import GraphIndex

#: How many producers a partial value is followed through.
MAX_VALUE_DEPTH = 48
#: Integer values longer than this are not tracked (they are not shapes).
MAX_VALUE_LENGTH = 64
_NOTHING: frozenset[str] = frozenset()


class _Pending(Exception):
    """A rule read the shapes of a node not inferred yet (the demand-driven walk infers it first)."""

    def __init__(self, node: int) -> None:
        super().__init__(node)
        self.node = node


class _Cycle(Exception):
    """The demand-driven walk met a node it is inferring: the graph has a cycle after all."""


class ShapeInference:
    """Memoised shapes of the tensors of one indexed graph (see the module's docstring)."""

    def __init__(self, index: "GraphIndex", same_shape: Mapping[str, Mapping[int, int]] | None = None,
                 constant: Callable[[int], "np.ndarray | None"] | None = None,
                 functions: FunctionShapes | None = None, *, demand: bool = False) -> None:
        self.index = index
        #: the demand-driven walk (see the module's docstring): only for a graph without loops
        self._demand = demand and not (index.op_types() & _LOOP_OPS)
        self._walks = 0  # demand-driven walks under way (a rule's constant folding may start one)
        self.same_shape = same_shape or {}
        self._constant = constant  # a node's folded constant value (numpy), if any
        self._shapes: dict[int, list[Dims]] = {}  # per node, per output port
        self._missing: dict[int, frozenset[str]] = {}  # per node: op types outside the table it depends on
        self._values: dict[tuple[int, int], Value] = {}
        #: per tensor whose value is not (fully) known: the op types without a value rule it depends on
        self._value_gaps: dict[tuple[int, int], frozenset[str]] = {}
        self._gap_stack: list[set[str]] = []
        self.functions = functions if functions is not None else FunctionShapes(
            index.graph_def.library, lambda i, c, f: ShapeInference(i, self.same_shape, c, f))
        self.loops = LoopMerges(self)

    # -- public ---------------------------------------------------------------
    def shape(self, node: int, port: int) -> Dims:
        """The shape of output ``port`` of ``node`` (a fresh list), None when the rank is unknown."""
        shapes = self._node_shapes(node)
        found = shapes[port] if 0 <= port < len(shapes) else None
        return None if found is None else list(found)

    def known(self, node: int) -> bool:
        """Whether node ``node``'s shapes are inferred already (nothing is inferred by asking)."""
        return node in self._shapes

    def missing(self, node: int) -> frozenset[str]:
        """The op types outside the table whose unknown shapes the shapes of ``node`` depend on."""
        self._node_shapes(node)
        return self._missing.get(node, _NOTHING)

    def value(self, node: int, port: int) -> Value:
        """The partial value of a small integer tensor (scalar: a one-element tuple with
        ``scalar`` set; see :data:`.shape_context.Value`), None when not known at all."""
        while True:
            try:
                return self._value((node, port), MAX_VALUE_DEPTH)
            except _Pending as pending:  # a value rule read a shape not inferred yet
                self._node_shapes(pending.node)

    def assume(self, node: int, shapes: Sequence[Dims]) -> None:
        """Take ``shapes`` as node ``node``'s output shapes (a function argument's, given by the call)."""
        self._shapes[node] = [None if s is None else tuple(s) for s in shapes]  # type: ignore[misc]

    # -- walking --------------------------------------------------------------
    def _data(self, i: int) -> list[tuple[int, int]]:
        return [t for t in self.index.inputs[i] if t[1] != CONTROL]

    def _node_shapes(self, node: int) -> list[Dims]:
        shapes = self._shapes
        known = shapes.get(node)
        if known is not None:
            return known
        if self._demand:
            self._walks += 1
            try:
                return self._demanded(node)
            except _Cycle:
                if self._walks > 1:
                    raise  # the outermost walk starts over
                self._walk_producers_first()
            finally:
                self._walks -= 1
        active: set[int] = set()
        stack: list[tuple[int, bool]] = [(node, False)]
        pop, push = stack.pop, stack.append
        inputs, ops, infer = self.index.inputs, self.index.ops, self._infer
        while stack:
            top, expanded = pop()
            if expanded:
                active.discard(top)
                if top not in shapes:
                    infer(top, active)
                continue
            if top in shapes or top in active:
                continue
            # a constant's shape is read when a rule asks for it (:meth:`constant_shapes`): most are
            # a Reshape's shape, of which the rule reads the value
            if ops[top] in LOOP_MERGE_OPS:  # its back edges: LoopMerges follows them
                pending = [p for p, port in inputs[top] if port != CONTROL and p not in shapes
                           and p not in active and ops[p] not in LOOP_BACK_OPS and not self._lazy(p)]
            else:
                pending = [p for p, port in inputs[top] if port != CONTROL and p not in shapes
                           and p not in active and not self._lazy(p)]
            if not pending:  # its producers' shapes are known (a constant has none): now
                infer(top, active)
                continue
            active.add(top)
            push((top, True))
            for p in pending:
                push((p, False))
        return shapes[node]

    def _demanded(self, node: int) -> list[Dims]:
        """The demand-driven walk (see the module's docstring) to node ``node``'s shapes."""
        shapes, ops = self._shapes, self.index.ops
        waiting: set[int] = set()  # nodes whose rule read shapes not inferred yet
        whole: set[int] = set()  # nodes whose producers must all be inferred first
        stack = [node]
        while stack:
            top = stack[-1]
            if top in shapes:
                stack.pop()
                waiting.discard(top)
                continue
            if top not in whole and ops[top] not in SETTLED_BY_VALUES:
                # a rule that reads every input's shape: its producers first
                whole.add(top)
                if self._push_producers(top, stack, waiting):
                    continue
            try:
                done = self._infer(top, waiting, top not in whole)
            except _Pending as pending:
                if pending.node == top or pending.node in waiting:
                    raise _Cycle() from None
                waiting.add(top)
                stack.append(pending.node)
                if top in whole:
                    continue
                done = False  # its rule read a producer's shape: all of them first
            if not done:
                whole.add(top)
                self._push_producers(top, stack, waiting)
        return shapes[node]

    def _push_producers(self, top: int, stack: list[int], waiting: set[int]) -> bool:
        """Put node ``top``'s producers not inferred yet on ``stack`` (False: there is none)."""
        shapes = self._shapes
        pending = [p for p, port in self.index.inputs[top] if port != CONTROL and p not in shapes
                   and not self._lazy(p)]
        if not pending:
            return False
        if top in pending or not waiting.isdisjoint(pending):
            raise _Cycle()
        waiting.add(top)
        stack.extend(pending)
        return True

    def _walk_producers_first(self) -> None:
        """Give up the demand-driven walk (a cycle): forget what it inferred, walk as with loops."""
        self._demand = False
        self._shapes.clear()
        self._missing.clear()
        self._values.clear()
        self._value_gaps.clear()

    def _infer(self, i: int, active: set[int], alone: bool = False) -> bool:
        """Node ``i``'s shapes, its producers' known (those on the current path, a loop's back
        edge, read as unknown).  ``alone`` (the demand-driven walk): the producers its rule reads
        are known, but maybe not the others; then the shapes are settled only when fully known
        (the node depends on no op outside the table), and False answered otherwise.  A rule
        that reads a shape not inferred yet raises :class:`_Pending` (the demand-driven walk)."""
        index = self.index
        op = index.ops[i]
        data = [t for t in index.inputs[i] if t[1] != CONTROL]
        # the op types outside the table the producers' shapes depend on, read before the rule
        # runs (relaxing a loop's Merge infers its back edge)
        missing = _NOTHING if alone else self._upstream(data, active)
        node = index.nodes[i]
        if op == "Const" and not data and op not in self.functions.functions:
            self._infer_const(i, node)
            return True
        ctx = OpContext(self, i, op, node, data)
        found: list[Dims] | None
        gap_stack = self._gap_stack
        gap_stack.append(set())
        try:
            if op in LOOP_MERGE_OPS and self.loops.is_loop_merge(i):
                found = self.loops.infer(i, ctx)
            elif is_call(op, self.functions.functions):
                answer = call_shapes(ctx, self.functions)
                found, more = answer if answer is not None else (None, _NOTHING)
                missing = missing | more
            else:
                rule = RULES.get(op)
                found = rule(ctx) if rule is not None else self._unlisted(ctx)
        finally:
            gaps = gap_stack.pop()
        if gaps:
            missing = missing | gaps  # values a rule asked for that no value rule gives
        if found is None:  # an op TensorFlow knows but the table does not
            found = []
            missing = missing | {op}
        outputs: list[Dims] = _with_recorded(node, found) if "_output_shapes" in node.attr else found
        known = bool(outputs) and all(s is not None and None not in s for s in outputs)
        if alone and not known:
            shapes = self._shapes
            if not all(p in shapes or self._lazy(p) for p, _ in data):
                return False  # its other producers first
            missing = missing | self._upstream(data, active)
        self._shapes[i] = [None if s is None else tuple(s) for s in outputs]  # type: ignore[misc]
        self.loops.inferred(i)
        if missing and not known:  # fully known: whatever was missing upstream does not matter
            self._missing[i] = missing
        return True

    def _upstream(self, data: list[tuple[int, int]], active: set[int]) -> frozenset[str]:
        """The op types outside the table the shapes of the producers ``data`` depend on."""
        missing = _NOTHING
        upstream = self._missing
        if upstream:
            for p, _ in data:
                if p not in active:
                    more = upstream.get(p)
                    if more:
                        missing = missing | more
        return missing

    def _lazy(self, i: int) -> bool:
        """Whether node ``i`` is a constant whose shapes are worked out only when read."""
        return self.index.ops[i] == "Const" and self._reads_nothing(i)

    def _reads_nothing(self, i: int) -> bool:
        return not self.index.inputs[i] or all(port == CONTROL for _, port in self.index.inputs[i])

    def constant_shapes(self, i: int) -> list[Dims] | None:
        """Node ``i``'s shapes when it is a constant not inferred yet (None for any other node
        whose shapes are not known: a loop's back edge; in the demand-driven walk, raises
        :class:`_Pending` to have them inferred first)."""
        if not self._lazy(i):
            if self._demand:
                raise _Pending(i)
            return None
        return self._node_shapes(i)

    def _infer_const(self, i: int, node: Any) -> None:
        """A ``Const``'s shape, what the rule gives (:func:`.shape_rules.const_shape`) with less
        work: a constant reads no input, asks for no value and depends on no op outside the table
        (a third of a frozen graph's nodes are constants)."""
        found = const_shape(node)
        outputs = _with_recorded(node, found) if "_output_shapes" in node.attr else found
        self._shapes[i] = [None if s is None else tuple(s) for s in outputs]  # type: ignore[misc]
        self.loops.inferred(i)

    def _unlisted(self, ctx: OpContext) -> list[Dims] | None:
        """Shapes of an op the table does not list: a fused op's ``same_shape`` rule, an op
        TensorFlow does not know (unknown); None for an op TensorFlow knows (outside the table)."""
        rules = self.same_shape.get(ctx.op)
        if rules is not None:
            outputs: list[Dims] = []
            for port in range(max(rules, default=-1) + 1):
                source = rules.get(port)
                outputs.append(ctx.shape(source) if source is not None and source < len(ctx.data) else None)
            return outputs
        if not is_tensorflow_op(ctx.op):
            return []
        return None

    # -- partial values -------------------------------------------------------
    def _value(self, tensor: tuple[int, int], depth: int) -> Value:
        values, stack = self._values, self._gap_stack
        if tensor in values:
            known = self._value_gaps.get(tensor)
            if known and stack:
                stack[-1].update(known)
            return values[tensor]
        stack.append(set())
        try:
            found = self._compute_value(tensor, depth) if depth > 0 else None
        finally:
            gaps = stack.pop()
        if found is not None and len(found[1]) > MAX_VALUE_LENGTH:
            found = None
        values[tensor] = found
        self.loops.valued(tensor)
        if gaps:  # a value left unknown, or partly unknown, for want of a value rule
            self._value_gaps[tensor] = frozenset(gaps)
            if stack:
                stack[-1].update(gaps)
        return found

    def _compute_value(self, tensor: tuple[int, int], depth: int) -> Value:
        i, port = tensor
        index = self.index
        op = index.ops[i]
        if port == 0 and self._constant is not None:
            constant = self._constant(i)
            if constant is not None:
                return _int_value(constant)
        if op in CONST_OPS:
            return None
        rule = VALUE_RULES.get(op)
        if rule is None:
            if not valueless(op) and is_tensorflow_op(op):  # TensorFlow may know it: say so
                self._gap_stack[-1].add(op)
            return None
        data = self._data(i)
        ctx = OpContext(self, i, op, index.nodes[i], data, depth - 1)
        return rule(ctx, port)

    def input_value(self, data: Sequence[tuple[int, int]], k: int, depth: int) -> Value:
        return self._value(data[k], depth) if k < len(data) else None


def _int_value(constant: "np.ndarray") -> Value:
    if constant.dtype.kind not in "iu" or constant.ndim > 1 or constant.size > MAX_VALUE_LENGTH:
        return None
    return (constant.ndim == 0, tuple(constant.reshape(-1).tolist()))  # Python ints


def _with_recorded(node: Any, outputs: list[Dims]) -> list[Dims]:
    """The shapes a rule gave, with what the graph records (``_output_shapes``) merged in."""
    if "_output_shapes" not in node.attr:
        return outputs
    recorded = node.attr["_output_shapes"].list.shape
    merged: list[Dims] = list(outputs) + [None] * (len(recorded) - len(outputs))
    for port, proto in enumerate(recorded):
        if proto.unknown_rank:
            continue
        dims: list[Optional[int]] = [d.size if d.size >= 0 else None for d in proto.dim]
        mine = merged[port]
        merged[port] = dims if mine is None or len(mine) != len(dims) else merge_dims(mine, dims)
    return merged
