"""What the command line prints: the fusion summary, the pass lists and the
verification table (rich tables on a terminal, plain when piped).

Tables fit the console's width (80 columns is the smallest kept in mind):
names (passes, plugins, tensors) never wrap; descriptions and other prose wrap
at spaces; when even that is too wide, the least needed columns are left out
(their values are in ``--report`` or in the lines under the table).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..core.graph_fusion.engine import TRAINING_SKIP
from ..core.graph_fusion.switch import OFF_BY_DEFAULT

if TYPE_CHECKING:  # pragma: no cover
    from ..core.fusion.report import FusionReport, PassReport
    from ..core.graph_fusion.switch import FusionSwitch
    from ..core.verify.verify import VerifyResult
    from ..plugins.registry import Registry

NEAR_MISSES_SHOWN = 3


PIPED_WIDTH = 120


def console(stderr: bool = False) -> Any:
    """A rich console on standard output (or standard error, when standard
    output carries the fused graph)."""
    stream = sys.stderr if stderr else sys.stdout
    # Piped output has no width to go by: give tables room, unless COLUMNS says otherwise.
    width = None if stream.isatty() or os.environ.get("COLUMNS") else PIPED_WIDTH
    return Console(highlight=False, soft_wrap=True, width=width, stderr=stderr)


@dataclass
class Col:
    """A table column: ``prose`` cells wrap at spaces, others never wrap; a column
    with a higher ``drop`` is left out first when the table is too wide (0: never)."""

    header: str
    justify: str = "left"
    prose: bool = False
    drop: int = 0
    narrowest: int = 12  # of a prose column, before columns are left out


DESCRIPTION = 30
PROSE_SQUEEZED = 6  # the narrowest any prose column is made


def _plain(cell: str) -> str:
    return Text.from_markup(cell).plain


def _need(col: Col, cells: Sequence[str]) -> int:
    if col.prose:
        words = [w for cell in (col.header, *cells) for w in _plain(cell).split()]
        return min(max((len(w) for w in words), default=1), col.narrowest)
    return max(len(_plain(c)) for c in (col.header, *cells))


def fit_columns(cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int) -> tuple[list[int], bool]:
    """The indices of the columns to show so that the table (rich's default box:
    one border and two spaces of padding per column) fits ``width`` with every
    prose column at its narrowest comfortable width; and whether the names still
    fit on one line when prose columns are squeezed further."""
    needs = [_need(c, [r[i] for r in rows]) for i, c in enumerate(cols)]
    keep = list(range(len(cols)))

    def total(squeezed: bool) -> int:
        return sum(PROSE_SQUEEZED if squeezed and cols[i].prose else needs[i] for i in keep) + 3 * len(keep) + 1

    for level in sorted({c.drop for c in cols if c.drop}, reverse=True):
        if total(False) <= width:
            break
        keep = [i for i in keep if cols[i].drop != level]
    return keep, total(True) <= width


def fitted_table(title: str, cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int) -> tuple[Any, list[str]]:
    """A rich table of the columns that fit ``width``; also the headers left out."""
    keep, fits = fit_columns(cols, rows, width)
    table = Table(title=title)
    for i in keep:
        col = cols[i]
        wrap = col.prose or not fits  # a name wider than the console itself has to fold
        table.add_column(col.header, justify=col.justify, no_wrap=not wrap,  # type: ignore[arg-type]
                         overflow="fold")
    for row in rows:
        table.add_row(*(row[i] for i in keep))
    return table, [cols[i].header for i in range(len(cols)) if i not in keep]


def _left_out(out: Any, headers: Sequence[str], where: str = "") -> None:
    if headers:
        out.print(f"(too narrow for the column{'s' if len(headers) > 1 else ''} {', '.join(headers)}"
                  + (f": {where})" if where else ")"))


def _kind(p: "PassReport") -> str:
    if p.engine == "graph":
        return p.fusion_type
    return "scope" if p.general else "scope (enabled)"


SUMMARY_COLUMNS = (
    Col("pass"), Col("kind"), Col("tested", "right", drop=2), Col("matched", "right"), Col("fused", "right"),
    Col("refused", "right", drop=1), Col("dropped", "right", drop=1), Col("near miss", "right", drop=3),
    Col("seconds", "right", drop=4),
)


def print_summary(report: "FusionReport", out: Any = None, *, verbose: bool = False) -> None:
    """The per-pass table of a run, then refusals, near misses (counted; listed with ``verbose``),
    overrides, hints and warnings (``scopefusion run`` adds what was fused:
    :func:`scopefusion.cli.summary.print_run_summary`)."""
    out = out or console()
    ran = [p for p in report.passes if p.ran]
    idle = [] if verbose else [p for p in ran if not (p.candidates or p.matches or p.error)]
    rows = [[p.name, _kind(p), str(p.candidates), str(p.matches), str(len(p.fused)),
             str(len(p.refused)), str(len(p.dropped)), str(p.near_miss_count), f"{p.seconds:.3f}"]
            for p in ran if p not in idle]
    table, left_out = fitted_table("Fusion summary", SUMMARY_COLUMNS, rows, out.width)
    out.print(table)
    _left_out(out, left_out, "they are in --report")
    if idle:
        out.print(f"nothing to try in this graph for {len(idle)} pass(es): {', '.join(p.name for p in idle)}"
                  " (-v shows them in the table)", markup=False)
    off = [p.name for p in report.passes if not p.ran and p.switch != TRAINING_SKIP]
    if off:
        out.print(f"switched off by the fusion switch file: {', '.join(off)}")
    training = [p.name for p in report.passes if p.switch == TRAINING_SKIP]
    if training:
        out.print(f"not run in training (graph_run_mode 1), not safe for training: {', '.join(training)}")
    for p in report.passes:
        if p.switch.startswith("on (forbidden_close"):
            out.print(f"note: {p.name} cannot be switched off (forbidden_close); it ran although the switch file "
                      "turns it off")
    for p in ran:
        _print_pass_details(out, p, verbose)
    near = sum(p.near_miss_count for p in ran)
    if near and not verbose:
        out.print(f"{near} near miss(es) on parts no pass fused: places a pattern matched more than half of "
                  "(-v lists them; --report and --html hold them)")
    for line in report.overrides:
        out.print(f"override: {line}")
    for line in report.hints:
        out.print(f"hint: {line}")
    for line in report.plugin_errors:
        out.print(f"[red]error[/red] {line} (--strict makes this fatal)")
    for line in report.warnings:
        print(f"scopefusion: warning: {line}", file=sys.stderr)
    _print_configuration(out, report)


def _print_configuration(out: Any, report: "FusionReport") -> None:
    """Which options the session configuration set, the declared input shapes, what was recorded."""
    configured = sorted(n for n, source in report.option_sources.items() if source == "session configuration")
    if configured:
        out.print(f"from the session configuration: {', '.join(configured)}")
    if report.input_shapes:
        shapes = "; ".join(f"{n}:{','.join(map(str, d)) if d else '0'}" for n, d in report.input_shapes.items())
        out.print(f"input shapes declared (-1: dynamic), kept on the fused graph's placeholders: {shapes}")
    if report.options_node:
        recorded = ", ".join(report.recorded_options) or "none set"
        out.print(f"session options written on node {report.options_node} for a back end; set there and not "
                  f"acted on here: {recorded}")
    elif report.recorded_options:  # a mixed run: on each segment's call node
        out.print(f"set for a back end, written on each segment's call node, not acted on here: "
                  f"{', '.join(report.recorded_options)}")
    if report.default_options:
        out.print("defaults filled in (the seed's; recorded as defaults): " + ", ".join(
            f"{n} = {v}" for n, v in report.default_options.items()), markup=False, highlight=False)


def _print_pass_details(out: Any, p: "PassReport", verbose: bool) -> None:
    if p.error:
        out.print(f"[red]error[/red] {p.error} (pass skipped; --strict makes this fatal)")
    for r in p.refused:
        out.print(f"refused {r.name} ({p.name}): {r.reason}" + _hint(r.hint))
    for r in p.dropped:
        out.print(f"dropped {r.name} ({p.name}): {r.reason}; kept {r.winner}")
    if not verbose:
        return
    for r in p.near_misses[:NEAR_MISSES_SHOWN]:
        out.print(f"near miss {r.name} ({p.name}): {r.reason}" + _hint(r.hint))
    if p.near_miss_count > NEAR_MISSES_SHOWN:
        out.print(f"... {p.near_miss_count - NEAR_MISSES_SHOWN} more near misses of {p.name} "
                  "(all of them in --report)")


def _hint(text: str) -> str:
    return f"\n  hint: {text}" if text else ""


def list_rows(registry: "Registry", enabled: list[str], switch: "FusionSwitch") -> dict[str, Any]:
    """What ``scopefusion list`` shows, as plain data (also its ``--json`` output)."""
    scope_rows = [
        {"name": spec.name, "general": spec.general, "enabled": spec.general or spec.name in enabled,
         "origin": spec.origin, "overrides": spec.replaces or "", "description": spec.description}
        for spec in registry.passes
    ]
    graph_rows = []
    for spec in registry.graph_passes:
        decision = switch.decide(spec.name, spec.fusion_type, spec.forbidden_close, spec.default_on)
        graph_rows.append({
            "name": spec.name, "fusion_type": spec.fusion_type, "on": decision.on, "switch": decision.source,
            "forbidden_close": spec.forbidden_close, "origin": spec.origin, "overrides": spec.replaces or "",
            "description": spec.description,
        })
    plugins = [
        {"name": p.name, "distribution": p.distribution, "version": p.version, "entry_point": p.value,
         "blocked": p.blocked, **({"blocked_by": p.blocked_by} if p.blocked else {}), "error": p.error,
         "passes": p.passes, "graph_passes": p.graph_passes, "fused_ops": p.fused_ops}
        for p in registry.plugins
    ]
    return {"passes": scope_rows, "graph_passes": graph_rows, "plugins": plugins,
            "fused_ops": registry.fused_op_origins, "overrides": registry.overrides,
            "aliases": registry.aliases()}


SCOPE_COLUMNS = (Col("pass"), Col("general", drop=1), Col("enabled"), Col("origin", prose=True),
                 Col("overrides", prose=True, drop=2), Col("description", prose=True, narrowest=DESCRIPTION))
GRAPH_COLUMNS = (Col("pass"), Col("type"), Col("on", prose=True), Col("origin", prose=True),
                 Col("overrides", prose=True, drop=2), Col("description", prose=True, narrowest=DESCRIPTION))
PLUGIN_COLUMNS = (Col("plugin"), Col("distribution", drop=1), Col("version"), Col("status", prose=True),
                  Col("contributes", prose=True))


def _on_state(r: dict[str, Any]) -> str:
    state = "yes" if r["on"] else "no"
    if r["forbidden_close"]:
        return state + " (cannot be switched off)"
    if r["switch"] == OFF_BY_DEFAULT:
        return state + " (off by default: the switch file turns it on)"
    if r["switch"] != "default":
        return state + f" (switch file: {r['switch']})"
    return state


def _plugin_status(p: dict[str, Any]) -> str:
    if p["blocked"]:
        return {"SCOPEFUSION_DISABLE_PLUGIN_AUTOLOAD": "not loaded: autoloading disabled"}.get(
            p.get("blocked_by", ""), "blocked")
    return "skipped: hook raised" if p["error"] else "loaded"


def print_list(rows: dict[str, Any], show_plugins: bool, out: Any = None) -> None:
    out = out or console()
    scope_rows = [[r["name"], "yes" if r["general"] else "no", "yes" if r["enabled"] else "no", r["origin"],
                   r["overrides"], r["description"]] for r in rows["passes"]]
    table, left_out = fitted_table("Scope fusion passes (registration order)", SCOPE_COLUMNS, scope_rows, out.width)
    out.print(table)
    _left_out(out, left_out, "see scopefusion list --json")
    aliases = rows.get("aliases", {})
    if aliases:
        out.print("the reference's names, accepted wherever a pass is named: " + ", ".join(
            f"{alias} = {name}" for alias, name in aliases.items()), markup=False, highlight=False)
    graph_rows = [[r["name"], r["fusion_type"], _on_state(r), r["origin"], r["overrides"], r["description"]]
                  for r in rows["graph_passes"]]
    table, left_out = fitted_table("Graph fusion passes (registration order)", GRAPH_COLUMNS, graph_rows, out.width)
    out.print(table)
    _left_out(out, left_out, "see scopefusion list --json")
    if show_plugins:
        _print_plugins(out, rows["plugins"])
    for line in rows["overrides"]:
        out.print(f"override: {line}")


def _print_plugins(out: Any, plugins: list[dict[str, Any]]) -> None:
    if not plugins:
        out.print("No plugins installed.")
        return
    plugin_rows = [[p["name"], p["distribution"], p["version"], _plugin_status(p),
                    ", ".join(p["passes"] + p["graph_passes"] + p["fused_ops"]) or "-"] for p in plugins]
    table, _ = fitted_table("Plugins (entry-point group 'scopefusion')", PLUGIN_COLUMNS, plugin_rows, out.width)
    out.print(table)
    if all(p.get("blocked_by") == "SCOPEFUSION_DISABLE_PLUGIN_AUTOLOAD" for p in plugins):
        out.print(f"{len(plugins)} plugin(s) installed, none loaded: SCOPEFUSION_DISABLE_PLUGIN_AUTOLOAD is set")


VERIFY_COLUMNS = (Col("output"), Col("shape", drop=2), Col("dtype", drop=1), Col("abs err", "right"),
                  Col("rel err", "right"), Col("result", prose=True))


def print_verification(result: "VerifyResult", out: Any = None, title: str | None = None) -> None:
    out = out or console()
    rows = []
    for o in result.outputs:
        verdict = "[green]pass[/green]" if o.passed else "[red]FAIL[/red]"
        rows.append([o.name, "?" if o.shape is None else str(tuple(o.shape)), o.dtype or "?",
                     f"{o.max_abs_error:.3g}", f"{o.max_rel_error:.3g}", verdict + (f" {o.note}" if o.note else "")])
    runs = f"{result.runs} run{'s' if result.runs != 1 else ''}"
    title = f"Verification, {title} ({runs})" if title else f"Verification ({runs})"
    table, left_out = fitted_table(title, VERIFY_COLUMNS, rows, out.width)
    out.print(table)
    _left_out(out, left_out)
    if result.passed:
        out.print(f"verified: {len(result.outputs)} output(s) match")
