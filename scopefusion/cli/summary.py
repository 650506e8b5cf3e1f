"""What ``scopefusion run`` prints after the pass table: the places each pass fused, the op
types whose counts changed, a note when nothing was fused, and the closing line (or, with
``--dry-run``, what would have been written)."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .console import Col, fitted_table, print_summary

if TYPE_CHECKING:  # pragma: no cover
    from ..core.fusion.report import FusionReport

#: Fused places listed per pass without ``-v``.
PLACES_SHOWN = 5


def print_run_summary(report: "FusionReport", output: str, emit: str, out: Any, *, verbose: bool = False,
                      dry_run: bool = False, quiet: bool = False) -> None:
    """Everything ``run`` prints about the fusion, in order; ``quiet``: the closing line only."""
    if quiet:
        out.print(closing_line(report, output, emit, dry_run))
        return
    print_summary(report, out, verbose=verbose)
    print_fused_places(report, out, verbose)
    print_functions(report, out, verbose)
    print_op_changes(report, out)
    note = nothing_fused_note(report)
    if note:
        out.print(note)
    out.print(closing_line(report, output, emit, dry_run))


def add_summary_arguments(run: argparse.ArgumentParser) -> None:
    loud = run.add_mutually_exclusive_group()
    loud.add_argument("-v", "--verbose", action="store_true",
                      help="list every fused scope or node per pass (default: the first few)")
    loud.add_argument("-q", "--quiet", action="store_true",
                      help="print only the closing line (what was written) and errors; no table, no hints")
    run.add_argument("--dry-run", "--dry_run", dest="dry_run", action="store_true",
                     help="fuse and report as usual, but write nothing (no graph, no report or HTML file, no "
                     "segments; --report - and --html - still print)")


def print_fused_places(report: "FusionReport", out: Any, verbose: bool) -> None:
    """Per pass that fused something: its fused ops by name (first few, or all with ``verbose``)."""
    for p in report.passes:
        if not p.fused:
            continue
        names = [f.name for f in p.fused]
        shown = names if verbose else names[:PLACES_SHOWN]
        more = len(names) - len(shown)
        tail = f" and {more} more (-v lists all)" if more else ""
        types = sorted({f.type for f in p.fused})
        out.print(f"fused by {p.name} ({len(names)} {', '.join(types)}): {', '.join(shown)}{tail}",
                  markup=False)


def print_functions(report: "FusionReport", out: Any, verbose: bool) -> None:
    """Fusion inside the library's functions: one line in all, then each function fused (first
    few, or all with ``verbose``) and each left alone, with the reason."""
    if not report.functions:
        return
    fused = [f for f in report.functions if f.status == "fused"]
    alone = [f for f in report.functions if f.status == "left alone"]
    inside = sum(f.fused for f in fused)
    out.print(f"inside functions: {inside} fused op(s) in {len(fused)} of {len(report.functions)} function(s)"
              + (f", {len(alone)} left alone" if alone else ""), markup=False)
    for group, line in ((fused, lambda f: f"{f.fused} fused op(s), {f.nodes_before} -> {f.nodes_after} nodes"),
                        (alone, lambda f: f"left alone: {f.reason}")):
        shown = group if verbose else group[:PLACES_SHOWN]
        for f in shown:
            out.print(f"  function {f.name}: {line(f)}", markup=False)
        if len(group) > len(shown):
            out.print(f"  and {len(group) - len(shown)} more (-v lists all)", markup=False)
    if report.removed_functions:
        out.print(f"  no longer called, removed: {', '.join(report.removed_functions)}", markup=False)


def print_op_changes(report: "FusionReport", out: Any) -> None:
    """A table of the op types whose counts the run changed (fused form), before and after, and
    one for the bodies of the library's functions when the run changed those."""
    for title, changes in (("Op counts (types that changed)", report.op_count_changes()),
                           ("Op counts inside functions (types that changed)", report.function_op_count_changes())):
        if not changes:
            continue
        cols = (Col("op type"), Col("before", "right"), Col("after", "right"), Col("change", "right"))
        rows = [[op, str(before), str(after), f"{after - before:+d}"] for op, before, after in changes]
        table, _ = fitted_table(title, cols, rows, out.width)
        out.print(table)


def nothing_fused_note(report: "FusionReport") -> str | None:
    """Why the graph came out unchanged, in one line; None when something was fused."""
    if report.fused:
        return None
    if report.fusion_off:
        return f"nothing was fused: {report.fusion_off}"
    ran = [p for p in report.passes if p.ran]
    refused = sum(len(p.refused) + len(p.dropped) for p in ran)
    near = sum(p.near_miss_count for p in ran)
    errors = [p.name for p in ran if p.error]
    if errors:
        return (f"nothing was fused; {len(errors)} pass(es) failed ({', '.join(errors)}), see the errors "
                "above")
    if refused or near:
        return (f"nothing was fused: {refused} match(es) refused and {near} near miss(es), each listed above "
                "with its reason")
    return ("nothing was fused: no pass found its pattern in this graph (scopefusion list shows every "
            "pass; non-general scope passes run only when named in --enable_scope_fusion_passes)")


def closing_line(report: "FusionReport", output: str, emit: str, dry_run: bool) -> str:
    inside = sum(f.fused for f in report.functions)
    counts = (f"{report.nodes_before} -> {report.nodes_after} nodes, {len(report.fused)} fused op(s)"
              + (f" ({inside} inside functions)" if inside else ""))
    if dry_run:
        return f"dry run: nothing written ({output} would get the {emit} form): {counts}"
    return f"wrote {output} ({emit} form): {counts}"
