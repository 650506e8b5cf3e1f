"""The input shapes a configuration declares: ``input_shape`` with its dynamic
dimensions (-1), and the concrete shapes of each gear of ``dynamic_dims``.

The gears fill the dynamic dimensions in order across the inputs:
``input_shape="data:1,-1;mask:-1,-1"`` with ``dynamic_dims="20,1,1;40,2,2"`` is
gear 1 ``data [1, 20]``, ``mask [1, 1]`` and gear 2 ``data [1, 40]``,
``mask [2, 2]``.  ``dynamic_node_type`` says whether the dynamic inputs are
placeholders (1) or a dataset's ``IteratorGetNext`` (0).
"""
from __future__ import annotations

from .options import NpuOptions

#: ``dynamic_node_type`` of placeholder inputs (0: a dataset's IteratorGetNext).
PLACEHOLDER_INPUTS = 1


def declared_shapes(options: NpuOptions) -> dict[str, list[int | None]]:
    """``input_shape`` as name -> dimensions, a dynamic (-1) dimension as None."""
    return {s.name: [None if d == -1 else d for d in s.dims] for s in options.input_shape}


def gear_shapes(options: NpuOptions) -> list[dict[str, list[int]]]:
    """One concrete shape per input for each gear of ``dynamic_dims`` (none without gears)."""
    gears = []
    for gear in options.dynamic_dims:
        values = iter(gear)
        gears.append({s.name: [next(values) if d == -1 else d for d in s.dims] for s in options.input_shape})
    return gears


def shape_spec(shapes: dict[str, list[int]]) -> str:
    """``{"a": [1, 2], "s": []}`` -> ``"a:1,2;s:0"``, the ``input_shape`` syntax."""
    return ";".join(f"{name}:{','.join(map(str, dims)) if dims else '0'}" for name, dims in shapes.items())
