"""Patterns written as the TensorFlow function that computes them.

A pass author writes what a subgraph computes as plain TensorFlow::

    @pattern_from_function
    def gelu_tanh(x):
        return 0.5 * x * (1.0 + tf.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))

and :func:`pattern_from_function` turns it into an expression of the op-pattern language
(:mod:`.pattern`), traced once, the first time it is needed (:mod:`.function_trace`; TensorFlow is
imported then, and a disk cache spares later runs even that):

* each argument is a variable of that name (``$x``), or, for an argument named in
  ``constants``, a constant the match reads back under that name (``match.consts["beta"]``),
  checked against a value or predicate when one is given;
* every constant the function computes is a checked constant (at the precision of the graph's
  dtype, or ``rtol``/``atol``), whatever ops computed it from constants;
* ``Identity`` and the other forwarding ops are dropped;
* every other op is an ``op()`` of its type, its attributes checked except dtypes, shapes and those
  that do not change what it computes (:data:`UNCHECKED_ATTRS`); an op the function reads twice is
  one node of the match (a label named ``<function>/<node>``).

The result is matched like a hand-written pattern, canonically: ``0.5 * x * y`` matches any
grouping and order of that product, ``x ** 3`` is the product ``x * x * x`` (so ``Pow(x, 3)``,
``x * Square(x)`` ...), ``x ** 2`` a ``Square``, ``x ** 0.5`` a ``Sqrt``, ``AddV2`` and ``Add``
are one op and a ``BiasAdd`` an ``Add``.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping, Sequence, overload

import numpy as np

from .attrs import attr_value_to_python
from .function_trace import Spec, TraceError, traced_graph
from .pattern import Const, Op, OpPattern, PatternDefinitionError, Var, const, op, var, walk
from .view import GraphView
from .vocabulary import ADD_OPS, CONTROL, DIV_OPS, FORWARDING_OPS, dtype_enum, dtype_name

#: Attributes that do not change what an op computes (gradient hints, device choices).
UNCHECKED_ATTRS = frozenset({"grad_a", "grad_b", "grad_x", "grad_y", "use_cudnn_on_gpu"})
#: Ops that mean nothing as part of a pattern: calls, control flow, state.
NO_PATTERN_MEANING = frozenset({
    "PartitionedCall", "StatefulPartitionedCall", "While", "StatelessWhile", "If", "StatelessIf", "Case",
    "StatelessCase", "Placeholder", "VarHandleOp", "VariableV2", "Assign", "AssignVariableOp", "NoOp", "Assert",
    "Print", "PrintV2", "Switch", "Merge", "Enter", "Exit", "NextIteration",
})
#: ``Pow(x, k)`` as the op it is for these exponents (3 and 4: a product of k factors x).
_POWERS = {2.0: "Square", 0.5: "Sqrt", -0.5: "Rsqrt", -1.0: "Reciprocal"}
_FACTORS = (3.0, 4.0)
#: ``op()``'s own keywords: attributes of these names cannot be checked through it.
_OP_KEYWORDS = frozenset({"types", "port", "commutative", "unordered", "extra_inputs", "any_inputs", "label",
                          "dtype"})

ConstantSpec = Any  # None (any constant), a number (checked) or a predicate on the value


class FunctionPattern:
    """A pattern written as a TensorFlow function; traced the first time :attr:`expr` is asked
    for.  Calling it calls the function."""

    def __init__(self, function: Callable[..., Any], specs: list[Spec], constants: Mapping[str, ConstantSpec],
                 rtol: float | None, atol: float) -> None:
        self.function = function
        self.specs = specs
        self.constants = dict(constants)
        self.rtol = rtol
        self.atol = atol
        self._expr: Op | None = None

    @property
    def name(self) -> str:
        return str(getattr(self.function, "__name__", "pattern"))

    @property
    def expr(self) -> Op:
        """The traced expression (traced on first use, then kept)."""
        if self._expr is None:
            try:
                traced = traced_graph(self.function, self.specs)
            except TraceError as error:
                raise PatternDefinitionError(f"pattern function {self.name}: {error}") from None
            self._expr = _Converter(self, traced).expression()
        return self._expr

    def pattern(self, name: str | None = None, *, outputs: Sequence[str] = ()) -> OpPattern:
        """The expression as a whole :class:`OpPattern` (named after the function by default)."""
        return OpPattern(name or self.name, self.expr, outputs=tuple(outputs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionPattern({self.name})"


_PATTERNS: dict[tuple[Any, ...], FunctionPattern] = {}


@overload
def pattern_from_function(fn: Callable[..., Any], *input_specs: Any,
                          constants: Mapping[str, ConstantSpec] | None = None, rtol: float | None = None,
                          atol: float = 0.0) -> FunctionPattern: ...


@overload
def pattern_from_function(fn: None = None, *, constants: Mapping[str, ConstantSpec] | None = None,
                          rtol: float | None = None,
                          atol: float = 0.0) -> Callable[[Callable[..., Any]], FunctionPattern]: ...


def pattern_from_function(fn: Callable[..., Any] | None = None, *input_specs: Any,
                          constants: Mapping[str, ConstantSpec] | None = None, rtol: float | None = None,
                          atol: float = 0.0) -> Any:
    """A pattern that is what ``fn`` computes (see the module's description); usable as a
    decorator, with or without keyword arguments.

    ``input_specs`` give the arguments' dtypes and shapes in order: a dtype name, a
    ``tf.TensorSpec`` or ``(shape, dtype)``; an argument without one is a float32 tensor of any
    shape (a constant's: a float32 scalar).  ``constants`` names arguments that are constants:
    ``None`` accepts any, a number is the value expected (within ``rtol``/``atol``), a callable
    a predicate on the numpy value; each is read back as ``match.consts[name]``.  Nothing is
    traced until the pattern is used; the same function and specs give the same pattern.
    """
    if fn is None:
        return lambda function: pattern_from_function(function, *input_specs, constants=constants, rtol=rtol,
                                                      atol=atol)
    if not callable(fn) or isinstance(fn, FunctionPattern):
        raise PatternDefinitionError(f"pattern_from_function needs a function, got {fn!r}")
    constants = dict(constants or {})
    specs = _specs(fn, input_specs, constants)
    try:
        key: tuple[Any, ...] | None = (fn, tuple(specs), tuple(sorted(constants.items())), rtol, atol)
        hash(key)
    except TypeError:
        key = None
    known = _PATTERNS.get(key) if key is not None else None
    if known is None:
        known = FunctionPattern(fn, specs, constants, rtol, atol)
        if key is not None:
            _PATTERNS[key] = known
    return known


def _specs(fn: Callable[..., Any], given: Sequence[Any], constants: Mapping[str, ConstantSpec]) -> list[Spec]:
    """One ``(shape, dtype)`` per argument of ``fn``, checked."""
    name = getattr(fn, "__name__", repr(fn))
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        raise PatternDefinitionError(f"pattern function {name}: its arguments cannot be read") from None
    loose = [p.name for p in parameters if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY)]
    if loose:
        raise PatternDefinitionError(f"pattern function {name}: every argument must be positional, not "
                                     f"{', '.join(loose)}")
    names = [p.name for p in parameters]
    unknown = sorted(set(constants) - set(names))
    if unknown:
        raise PatternDefinitionError(f"pattern function {name}: constants names no argument: {', '.join(unknown)} "
                                     f"(arguments: {', '.join(names) or 'none'})")
    if not [n for n in names if n not in constants]:
        raise PatternDefinitionError(f"pattern function {name} has no inputs: a pattern needs at least one "
                                     "argument that is a tensor (not a constant)")
    if len(given) > len(names):
        raise PatternDefinitionError(f"pattern function {name}: {len(given)} input specs for {len(names)} "
                                     "arguments")
    out: list[Spec] = []
    for k, param in enumerate(names):
        spec = given[k] if k < len(given) else None
        try:
            out.append(_spec(spec, scalar=param in constants))
        except (TypeError, ValueError) as error:
            raise PatternDefinitionError(f"pattern function {name}: argument {param}: {error}") from None
    return out


def _spec(spec: Any, *, scalar: bool) -> Spec:
    """``(shape, dtype name)`` of a spec: None, a dtype name, a TensorSpec or ``(shape, dtype)``."""
    if spec is None:
        return ((), "float32") if scalar else (None, "float32")
    if isinstance(spec, str):
        return ((), dtype_name(dtype_enum(spec))) if scalar else (None, dtype_name(dtype_enum(spec)))
    if hasattr(spec, "shape") and hasattr(spec, "dtype"):  # a tf.TensorSpec
        dims = spec.shape.as_list() if spec.shape.rank is not None else None
        return (None if dims is None else tuple(dims)), dtype_name(dtype_enum(spec.dtype))
    if isinstance(spec, tuple) and len(spec) == 2:
        shape, dtype = spec
        dims = None if shape is None else tuple(None if d is None else int(d) for d in shape)
        return dims, dtype_name(dtype_enum(dtype))
    raise TypeError(f"{spec!r} is no input spec (a dtype name, a tf.TensorSpec or (shape, dtype))")


class _Converter:
    """One traced graph turned into a pattern expression."""

    def __init__(self, pattern: FunctionPattern, traced: Any) -> None:
        self.pattern = pattern
        self.view = GraphView(traced.graph_def())
        index = self.view.index
        names = _parameter_names(pattern.function)
        self.arguments = {index.index[node]: param for node, param in zip(traced.inputs, names, strict=True)}
        out_node, _, out_port = traced.output.rpartition(":")
        self.output = (index.index[out_node], int(out_port))
        self.done: dict[tuple[int, int], Any] = {}
        self.reads = self._count_reads()

    def fail(self, why: str) -> PatternDefinitionError:
        return PatternDefinitionError(f"pattern function {self.pattern.name}: {why}")

    def expression(self) -> Op:
        root = self.tensor(self.output)
        if not isinstance(root, Op) or not root.types:
            raise self.fail("its result is no op of its inputs (it returns an argument or a constant)")
        used = {e.name for e in _vars(root)}
        missing = [p for p in self.arguments.values() if p not in used and p not in self.pattern.constants]
        if missing:
            raise self.fail(f"its result does not depend on {', '.join(missing)}")
        return root

    def _forward(self, tensor: tuple[int, int]) -> tuple[int, int]:
        node, port = tensor
        while port == 0 and self.view.index.ops[node] in FORWARDING_OPS:
            data = self._data(node)
            if not data:
                break
            node, port = data[0]
        return node, port

    def _data(self, node: int) -> list[tuple[int, int]]:
        return [t for t in self.view.index.inputs[node] if t[1] != CONTROL]

    def _count_reads(self) -> dict[int, int]:
        """How often each node is read on the way to the result (an op read twice is one node)."""
        reads: dict[int, int] = {}
        stack, seen = [self._forward(self.output)], set()
        while stack:
            node, _ = stack.pop()
            reads[node] = reads.get(node, 0) + 1
            if node in seen or node in self.arguments or self.view.folded_constant(node) is not None:
                continue
            seen.add(node)
            stack.extend(self._forward(t) for t in self._data(node))
        return reads

    def tensor(self, tensor: tuple[int, int]) -> Any:
        tensor = self._forward(tensor)
        known = self.done.get(tensor)
        if known is None:
            known = self.done[tensor] = self._expression(*tensor)
        return known

    def _expression(self, node: int, port: int) -> Any:
        index = self.view.index
        if node in self.arguments:
            param = self.arguments[node]
            return self._named_constant(param) if param in self.pattern.constants else var(param)
        folded = self.view.folded_constant(node) if port == 0 else None
        if folded is not None:
            return self._constant(folded[0])
        op_type = index.ops[node]
        if op_type in NO_PATTERN_MEANING or "Random" in op_type:
            what = "reads a tensor from outside" if op_type == "Placeholder" else \
                f"uses {op_type} ({index.names[node]!r}), which has no meaning in a pattern"
            raise self.fail(what)
        data = self._data(node)
        label = f"{self.pattern.name}/{index.names[node]}" if self.reads.get(node, 0) > 1 else None
        special = self._canonical(op_type, node, data, label)
        if special is not None:
            return special
        types = ADD_OPS if op_type in ADD_OPS else DIV_OPS if op_type in DIV_OPS else (op_type,)
        return op(types, *(self.tensor(t) for t in data), port=port, label=label, **self._attrs(node))

    def _canonical(self, op_type: str, node: int, data: list[tuple[int, int]], label: str | None) -> Any:
        """The ops written with one spelling where matching knows them by another."""
        if op_type == "BiasAdd" and str(self._attrs(node).get("data_format", "NHWC")) in ("NHWC", "N...C") and \
                len(data) == 2:
            return op(ADD_OPS, self.tensor(data[0]), self.tensor(data[1]), label=label)
        if op_type == "Pow" and len(data) == 2:
            exponent = self.view.folded_constant(self._forward(data[1])[0])
            k = float(exponent[0].reshape(-1)[0]) if exponent is not None and exponent[0].size == 1 else None
            base = self.tensor(data[0])
            if k in _POWERS:
                return op(_POWERS[k], base, label=label)
            if k in _FACTORS:
                return op("Mul", *[base] * int(k), label=label)
        return None

    def _attrs(self, node: int) -> dict[str, Any]:
        out = {}
        for key, value in self.view.index.nodes[node].attr.items():
            kind = value.WhichOneof("value")
            if key.startswith("_") or key in UNCHECKED_ATTRS or key in _OP_KEYWORDS or \
                    kind in (None, "type", "shape", "func", "placeholder", "tensor"):
                continue
            if kind == "list" and (value.list.type or value.list.shape or value.list.func):
                continue
            out[key] = attr_value_to_python(value)
        return out

    def _constant(self, value: np.ndarray) -> Const:
        expected: Any = value.reshape(-1)[0].item() if value.size == 1 else np.array(value)
        return const(expected, rtol=self.pattern.rtol, atol=self.pattern.atol, description=_shown(value))

    def _named_constant(self, name: str) -> Const:
        spec = self.pattern.constants[name]
        if callable(spec):
            return const(where=spec, label=name, description=f"a constant {name} ({getattr(spec, '__name__', '')})")
        if spec is None:
            return const(label=name, description=f"a constant {name}")
        return const(spec, rtol=self.pattern.rtol, atol=self.pattern.atol, label=name,
                     description=f"{name} = {spec!r}")


def _shown(value: np.ndarray) -> str:
    """A traced constant as its dtype prints it (``0.044715``, not its float32 value's digits)."""
    flat = value.reshape(-1)
    if value.size == 1:
        return str(flat[0])
    shown = ", ".join(str(v) for v in flat[:4])
    return f"the constant [{shown}{', ...' if value.size > 4 else ''}] (shape {list(value.shape)})"


def _parameter_names(fn: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(fn).parameters)


def _vars(expr: Any) -> list[Any]:
    return [e for e in walk(expr) if isinstance(e, Var)]
