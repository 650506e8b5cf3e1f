"""What a layer-norm scope computes, as a polynomial over a few symbols.

Every form real code writes scales and shifts the normalised input with
elementwise sums and products in some order: ``x * (rsqrt(v + e) * gamma) +
(beta - mean * (rsqrt(v + e) * gamma))`` (``tf.nn.batch_normalization``),
``x * inv + (-mean * inv + beta)`` (Keras 3), ``(x - mean) * rsqrt(v + e) * g +
b`` (GPT-2), ``(x - mean) / sqrt(v + e) * gamma + beta``, ...  Expanding the
output node into a sum of monomials makes all of them one comparison.

Symbols are ``x``, ``mean``, ``rstd`` (``rsqrt(variance + epsilon)``; a
``Sqrt`` of the same is ``rstd`` to the power -1), ``xhat`` (an already
normalised input) and *atoms*: tensors that do not depend on ``x`` (gamma,
beta, ...).  Scalar constants become coefficients.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ....core.fusion.refusal import fail
from ....core.graph.vocabulary import ADD_OPS, CONTROL

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import ScopeGraph

Tensor = tuple[str, int]
Monomial = tuple[tuple[str, int], ...]  # sorted (symbol, exponent), no zero exponents
Poly = dict[Monomial, float]

#: Ops that pass their first input through unchanged.
PASS_THROUGH = frozenset({"Identity", "Snapshot", "StopGradient", "PreventGradient", "CheckNumerics",
                          "EnsureShape"})
MAX_TERMS = 64
MAX_DEPTH = 256


def is_float_array(value: Any) -> bool:
    """A floating-point numpy array, bfloat16 included (numpy sees that as kind 'V')."""
    return value.dtype.kind == "f" or value.dtype.name == "bfloat16"


def const(value: float) -> Poly:
    return {(): float(value)} if value != 0 else {}


def symbol(name: str, exponent: int = 1) -> Poly:
    return {((name, exponent),): 1.0}


def add(a: Poly, b: Poly, sign: float = 1.0) -> Poly:
    out = dict(a)
    for mono, coef in b.items():
        total = out.get(mono, 0.0) + sign * coef
        scale = max(abs(out.get(mono, 0.0)), abs(coef))
        if abs(total) <= 1e-12 * scale:
            out.pop(mono, None)
        else:
            out[mono] = total
    return _bounded(out)


def _mono_mul(a: Monomial, b: Monomial) -> Monomial:
    powers = dict(a)
    for name, exponent in b:
        powers[name] = powers.get(name, 0) + exponent
    return tuple(sorted((n, e) for n, e in powers.items() if e != 0))


def mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            out = add(out, {_mono_mul(ma, mb): ca * cb})
    return _bounded(out)


def inverse(a: Poly, what: str) -> Poly:
    if len(a) != 1:
        fail(
            f"{what} divides by {render(a)}, a sum (epsilon added to the standard deviation?), "
            "not by sqrt(variance + epsilon)")
    (mono, coef), = a.items()
    return {tuple((n, -e) for n, e in mono): 1.0 / coef}


def _bounded(p: Poly) -> Poly:
    if len(p) > MAX_TERMS:
        fail(f"the output expands to more than {MAX_TERMS} terms: not a layer norm")
    return p


def render(p: Poly, names: dict[str, str] | None = None) -> str:
    """``x*rstd*gamma - mean*rstd*gamma + beta`` style text, for reasons."""
    names = names or {}
    if not p:
        return "0"
    parts = []
    for mono, coef in sorted(p.items(), key=lambda kv: (-len(kv[0]), kv[0])):
        factors = [names.get(n, n) + (f"^{e}" if e != 1 else "") for n, e in mono]
        mag = abs(coef)
        if not factors:
            text = f"{mag:g}"
        elif math.isclose(mag, 1.0, rel_tol=1e-9):
            text = "*".join(factors)
        else:
            text = f"{mag:g}*" + "*".join(factors)
        parts.append(("- " if coef < 0 else "+ ") + text)
    joined = " ".join(parts)
    return joined[2:] if joined.startswith("+ ") else "-" + joined[2:]


class Evaluator:
    """Expands tensors of one scope into polynomials.

    ``leaves`` give the symbols of known tensors (``x``, the mean, the
    normaliser); a tensor that depends on none of them is an atom (or a
    coefficient when it is a scalar constant); anything else must be an
    elementwise sum, difference, product, quotient or negation.
    """

    def __init__(self, sg: "ScopeGraph", inside: set[str], leaves: dict[Tensor, Poly]) -> None:
        self.sg = sg
        self.inside = inside
        self.leaves = leaves
        self.atoms: dict[str, Tensor] = {}
        self._memo: dict[Tensor, Poly] = {}
        self._dependent: dict[str, bool] = {}
        self._leaf_nodes = {t[0] for t in leaves}

    # -- dependence on the leaves ---------------------------------------------
    def depends(self, tensor: Tensor) -> bool:
        """Does ``tensor`` depend on a leaf through nodes of the scope?"""
        if tensor in self.leaves or tensor[0] in self._leaf_nodes:
            return True
        if not self._dependent:
            self._compute_dependence()
        return self._dependent.get(tensor[0], False)

    def _compute_dependence(self) -> None:
        index = self.sg.index
        order = sorted((index.index[n] for n in self.inside), key=lambda i: index.position[i])
        names = index.names
        dependent = self._dependent
        for i in order:
            name = names[i]
            dependent[name] = name in self._leaf_nodes or any(
                (names[p], port) in self.leaves or names[p] in self._leaf_nodes or dependent.get(names[p], False)
                for p, port in index.inputs[i] if port != CONTROL
            )

    # -- expansion ------------------------------------------------------------
    def value(self, tensor: Tensor, depth: int = 0) -> Poly:
        if tensor in self.leaves:
            return self.leaves[tensor]
        if tensor in self._memo:
            return self._memo[tensor]
        if depth > MAX_DEPTH:
            fail("the output expression is too deep to be a layer norm")
        result = self._expand(tensor, depth)
        self._memo[tensor] = result
        return result

    def _expand(self, tensor: Tensor, depth: int) -> Poly:
        sg = self.sg
        name, port = tensor
        if not self.depends(tensor):
            value = sg.const_value(name) if port == 0 else None
            if value is not None and value.size == 1 and (value.dtype.kind in "iu" or is_float_array(value)):
                return const(float(value.reshape(-1)[0]))
            key = f"@{name}" if port == 0 else f"@{name}:{port}"
            self.atoms[key] = tensor
            return symbol(key)
        op = sg.op_of(name)
        n = len(sg.input_names(name))
        args = [sg.producer(name, k) for k in range(n)]

        def v(k: int) -> Poly:
            return self.value(args[k], depth + 1)

        if op in PASS_THROUGH and port == 0:
            return v(0)
        if op in ADD_OPS and n == 2:
            return add(v(0), v(1))
        if op == "BiasAdd" and n == 2:
            node = sg.node(name)
            fmt = node.attr["data_format"].s if "data_format" in node.attr else b"NHWC"
            if fmt not in (b"NHWC", b""):
                fail(f"BiasAdd {name!r} adds along the channel axis of {fmt.decode()} data")
            return add(v(0), v(1))
        if op == "AddN":
            total: Poly = {}
            for k in range(n):
                total = add(total, v(k))
            return total
        if op == "Sub" and n == 2:
            return add(v(0), v(1), -1.0)
        if op == "Neg":
            return mul(const(-1.0), v(0))
        if op == "Mul" and n == 2:
            return mul(v(0), v(1))
        if op == "Square":
            return mul(v(0), v(0))
        if op in ("RealDiv", "Div") and n == 2:
            return mul(v(0), inverse(v(1), f"{op} {name!r}"))
        if op in ("Reciprocal", "Inv"):
            return inverse(v(0), f"{op} {name!r}")
        fail(
            f"{op} node {name!r} lies between the statistics and the output; only elementwise sums, "
            "differences, products and quotients can scale and shift a layer norm")


def data_consumers(sg: "ScopeGraph", name: str) -> list[tuple[str, int]]:
    """``(consumer, producer port)`` of every data edge leaving ``name``."""
    index = sg.index
    names = index.names
    return [(names[c], port) for c, port, _ in index.consumers[index.index[name]] if port != CONTROL]


def has_no_consumers(sg: "ScopeGraph", name: str) -> bool:
    index = sg.index
    return not index.consumers[index.index[name]]
