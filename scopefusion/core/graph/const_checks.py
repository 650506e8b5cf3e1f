"""A constant's value against a pattern's :class:`~.pattern.Const`: equal within the tolerance of its
dtype, or accepted by the pattern's predicate; and the reason when not, as a user reads it."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .pattern import Const


#: Relative precision of constants stored in low-precision dtypes.
_DTYPE_RTOL = {"float16": 1e-3, "bfloat16": 8e-3}


def const_problem(value: Any, expr: Const) -> Callable[[], str] | None:
    """Why a constant's value is not the expected one (a function writing the reason), None
    when it is."""
    if expr.value is not None and not same_value(value, expr):
        expected = np.asarray(expr.value)
        if value.shape != expected.shape and not (value.size == expected.size == 1):
            return lambda: f"has shape {list(value.shape)}, expected {list(expected.shape)}"
        return lambda: f"is {_short(value)}, expected {expr.describe()}"
    if expr.where is not None and not expr.where(value):
        wanted = expr.description or f"what {getattr(expr.where, '__name__', 'the predicate')} accepts"
        return lambda: f"is {_short(value)}, which is not {wanted}"
    return None


def same_value(value: Any, expr: Const) -> bool:
    """``value`` equals ``expr.value`` (scalars and one-element tensors alike) within the tolerance."""
    rtol = expr.rtol if expr.rtol is not None else _DTYPE_RTOL.get(value.dtype.name, 1e-6)
    expected = expr.value
    if value.size == 1 and isinstance(expected, (int, float)) and not isinstance(expected, bool):
        try:
            actual = float(value.reshape(-1)[0])
        except (TypeError, ValueError):
            return False
        return abs(actual - expected) <= expr.atol + rtol * abs(expected)
    expected = np.asarray(expected)
    if value.shape != expected.shape and not (value.size == expected.size == 1):
        return False
    try:
        return bool(np.allclose(np.asarray(value, dtype=np.float64).reshape(-1),
                                expected.astype(np.float64).reshape(-1), rtol=rtol, atol=expr.atol))
    except (TypeError, ValueError):
        return bool(np.array_equal(value.reshape(-1), expected.reshape(-1)))


def _short(value: Any) -> str:
    flat = value.reshape(-1)
    if flat.size == 1:
        return repr(flat[0].item())
    shown = ", ".join(repr(v) for v in flat[:4].tolist())
    return f"[{shown}{', ...' if flat.size > 4 else ''}] (shape {list(value.shape)})"
