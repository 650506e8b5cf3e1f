"""Counting fused families on the generalization corpus (``tests/models/library_models.py``):
one fusion run per model, the count per family, and the table the corpus reports."""
from __future__ import annotations

from typing import Any

from tests.helpers.pass_checks import REGISTRY
from tests.models.library_models import FAMILIES, LibraryModel

import scopefusion

#: The graph stage, and of the UB fusion stage the attention pass only: the epilogue and
#: residual-norm passes would take fused norms and activations into larger ops; they are tested on
#: their own.
GRAPH_STAGE_ONLY = scopefusion.FusionSwitch.from_text(
    '{"Switch": {"UBFusion": {"ALL": "off", "AttentionFusionPass": "on"}}}')
CONV_BATCH_NORM_PASS = "ConvBatchnormFusionPass"
#: The recurrent cells' scope passes are not general (a run names them): the corpus names them.
RNN_PASSES = ["ScopeBasicLSTMCellPass", "ScopeGRUCellPass", "ScopeDynamicRNNPass"]


def fuse(model: LibraryModel) -> Any:
    """The built-in passes' fusion of ``model`` (graph stage and attention, the RNN cell passes enabled)."""
    return scopefusion.fuse(model.graph_def, registry=REGISTRY, fusion_switch_file=GRAPH_STAGE_ONLY,
                            enable_scope_fusion_passes=RNN_PASSES)


def family_counts(result: Any) -> dict[str, int]:
    """Per family of :data:`FAMILIES`, how many fused ops the run wrote (for ``ConvBatchNorm``,
    how many convolutions it folded a batch norm into)."""
    ops = [n.op for n in result.fused_graph_def.node]
    counts = {family: sum(op in types for op in ops) for family, types in FAMILIES.items() if types}
    counts["ConvBatchNorm"] = len(result.report.pass_report(CONV_BATCH_NORM_PASS).fused)
    return {family: counts[family] for family in FAMILIES}


def table_rows(models: dict[str, LibraryModel]) -> list[tuple[str, str, int, int]]:
    """``(library, family, built, fused)`` per library and family the corpus builds, summed over
    the library's models (look-alikes build none)."""
    totals: dict[tuple[str, str], list[int]] = {}
    for model in models.values():
        fused = family_counts(fuse(model))
        for family, built in model.expected_counts().items():
            if built or fused[family]:
                entry = totals.setdefault((model.library, family), [0, 0])
                entry[0] += built
                entry[1] += fused[family]
    return [(library, family, built, fused) for (library, family), (built, fused) in sorted(totals.items())]


def format_table(rows: list[tuple[str, str, int, int]]) -> str:
    header = ("library", "family", "built", "fused")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(4)]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]]
    return "\n".join(lines)
