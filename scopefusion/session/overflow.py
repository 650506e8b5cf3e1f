"""Overflow detection: fused ops whose outputs hold inf or NaN.

With ``enable_dump_debug``, every run checks the floating-point outputs of the
fused ops it executed.  Each output holding non-finite values is one
:class:`OverflowRecord` (op, type, step, output, how many values); the op's
inputs and outputs of that step are written to ``<dump_path>/overflow`` as the
data dump writes them, so the values that overflowed can be examined.  The
reference's ``dump_debug_mode`` tells AI Core overflow from atomic-add overflow;
on the host there is one kind, so every mode checks every floating-point output.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .probes import FusedNode, port_of

OVERFLOW_DIRECTORY = "overflow"


@dataclass(frozen=True)
class OverflowRecord:
    """One fused-op output that held inf or NaN at one step."""

    op: str
    type: str
    step: int
    output: int
    count: int
    inf: int
    nan: int
    size: int

    def __str__(self) -> str:
        return (f"{self.op} ({self.type}) step {self.step} output {self.output}: {self.count} of {self.size} "
                f"values not finite ({self.inf} inf, {self.nan} NaN)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _non_finite(value: "np.ndarray") -> tuple[int, int] | None:
    """``(inf, nan)`` counts of a floating-point array; None for other dtypes."""
    array = np.asarray(value)
    if array.dtype.kind != "f" and array.dtype.name != "bfloat16":
        return None
    wide = array.astype(np.float64, copy=False) if array.dtype.kind != "f" else array
    return int(np.isinf(wide).sum()), int(np.isnan(wide).sum())


def find_overflows(nodes: Sequence[FusedNode], step: int,
                   values: Mapping[str, "np.ndarray"]) -> list[OverflowRecord]:
    """The outputs of ``nodes`` that hold inf or NaN in ``values``."""
    records = []
    for node in nodes:
        for name in node.outputs:
            counts = _non_finite(values[name])
            if counts is not None and any(counts):
                size = int(getattr(values[name], "size", 1))
                records.append(OverflowRecord(node.name, node.type, step, port_of(name), sum(counts), *counts,
                                              size))
    return records
