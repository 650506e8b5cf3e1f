"""Data dump: the inputs and/or outputs of every fused op at chosen steps.

With ``enable_dump``, each chosen step (``dump_step``; every step when it is
not given) writes one ``.npz`` file per fused op the run executed into
``dump_path``.  The file is named ``<op type>.<op name>.<step>.npz``, the op
name with ``/`` written as ``_`` as the reference's dump files write it (when
two op names would read the same that way, the later ones get ``-2``, ``-3``
... after the name).  It holds ``input_<i>`` and/or ``output_<k>`` arrays,
as ``dump_mode`` says (``input``, ``output`` or ``all``).
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .probes import FusedNode
from ..core.options.syntax import StepRange


def step_chosen(steps: Sequence[StepRange], step: int) -> bool:
    """Whether ``dump_step`` chooses ``step`` (no ranges: every step)."""
    return not steps or any(r.first <= step <= r.last for r in steps)


def file_stems(nodes: Iterable[FusedNode]) -> dict[str, str]:
    """Per fused op name, the ``<type>.<name>`` part of its file names, unique
    among ``nodes`` (taken in graph order)."""
    stems: dict[str, str] = {}
    used: set[str] = set()
    for node in nodes:
        base = f"{node.type}.{node.name.replace('/', '_')}"
        stem, k = base, 1
        while stem in used:
            k += 1
            stem = f"{base}-{k}"
        used.add(stem)
        stems[node.name] = stem
    return stems


def arrays_of(node: FusedNode, tensors: Sequence[str], values: Mapping[str, "np.ndarray"]) -> dict[str, "np.ndarray"]:
    """``input_<i>`` / ``output_<k>`` -> value, for the tensors of ``node`` among ``tensors``."""
    wanted = set(tensors)
    return {label: np.asarray(values[name]) for label, name in node.labelled() if name in wanted}


def write_npz(directory: str, stem: str, step: int, arrays: Mapping[str, "np.ndarray"]) -> str:
    """Write ``<directory>/<stem>.<step>.npz``; returns its path."""
    path = os.path.join(directory, f"{stem}.{step}.npz")
    np.savez(path, **arrays)  # type: ignore[arg-type]  # mypy matches the names against allow_pickle: bool too
    return path


@dataclass(frozen=True)
class DumpSettings:
    """What the dump options ask for."""

    directory: str
    steps: tuple[StepRange, ...]
    mode: str

    def tensors(self, nodes: Iterable[FusedNode], step: int) -> list[str]:
        """The tensors to fetch at ``step`` (none unless the step is chosen)."""
        if not step_chosen(self.steps, step):
            return []
        return [t for node in nodes for t in node.tensors(self.mode)]

    def write(self, nodes: Iterable[FusedNode], stems: Mapping[str, str], step: int,
              values: Mapping[str, "np.ndarray"]) -> list[str]:
        """Write the files of ``step`` for ``nodes``; returns their paths."""
        paths = []
        for node in nodes:
            arrays = arrays_of(node, node.tensors(self.mode), values)
            paths.append(write_npz(self.directory, stems[node.name], step, arrays))
        return paths
