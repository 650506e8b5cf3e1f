"""What the command line prints: the fusion summary, the pass lists and the
verification table (rich tables on a terminal, plain when piped)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .core.fusion.report import FusionReport, PassReport
    from .core.graph_fusion.switch import FusionSwitch
    from .core.verify.verify import VerifyResult
    from .plugins.registry import Registry

NEAR_MISSES_SHOWN = 3


def console() -> Any:
    from rich.console import Console

    # Piped output has no width to go by: give tables room instead of 80 columns.
    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 120)


def _kind(p: "PassReport") -> str:
    if p.engine == "graph":
        return p.fusion_type
    return "scope" if p.general else "scope (enabled)"


def print_summary(report: "FusionReport", output: Path, emit: str) -> None:
    """The per-pass table of a run, then refusals, near misses, overrides and warnings."""
    from rich.table import Table

    out = console()
    table = Table(title="Fusion summary")
    table.add_column("pass", overflow="fold", min_width=18)
    for col, justify in (("kind", "left"), ("tested", "right"), ("matched", "right"), ("fused", "right"),
                         ("refused", "right"), ("near miss", "right"), ("seconds", "right")):
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    ran = [p for p in report.passes if p.ran]
    for p in ran:
        table.add_row(p.name, _kind(p), str(p.candidates), str(len(p.matched_scopes)), str(len(p.fused)),
                      str(len(p.refused)), str(p.near_miss_count), f"{p.seconds:.3f}")
    out.print(table)
    off = [p.name for p in report.passes if not p.ran]
    if off:
        out.print(f"switched off by the fusion switch file: {', '.join(off)}")
    for p in report.passes:
        if p.switch.startswith("on (forbidden_close"):
            out.print(f"note: {p.name} cannot be switched off (forbidden_close); it ran although the switch file "
                      "turns it off")
    for p in ran:
        _print_pass_details(out, p)
    for line in report.overrides:
        out.print(f"override: {line}")
    for line in report.plugin_errors:
        out.print(f"[red]error[/red] {line} (--strict makes this fatal)")
    for line in report.warnings:
        print(f"scopefusion: warning: {line}", file=sys.stderr)
    out.print(f"wrote {output} ({emit} form): {report.nodes_before} -> {report.nodes_after} nodes, "
              f"{len(report.fused)} fused op(s)")


def _print_pass_details(out: Any, p: "PassReport") -> None:
    if p.error:
        out.print(f"[red]error[/red] {p.error} (pass skipped; --strict makes this fatal)")
    for r in p.refused:
        out.print(f"refused {r.name} ({p.name}): {r.reason}")
    for r in p.near_misses[:NEAR_MISSES_SHOWN]:
        out.print(f"near miss {r.name} ({p.name}): {r.reason}")
    if p.near_miss_count > NEAR_MISSES_SHOWN:
        out.print(f"... {p.near_miss_count - NEAR_MISSES_SHOWN} more near misses of {p.name} "
                  "(all of them in --report)")


def list_rows(registry: "Registry", enabled: list[str], switch: "FusionSwitch") -> dict[str, Any]:
    """What ``scopefusion list`` shows, as plain data (also its ``--json`` output)."""
    scope_rows = [
        {"name": spec.name, "general": spec.general, "enabled": spec.general or spec.name in enabled,
         "origin": spec.origin, "overrides": spec.replaces or "", "description": spec.description}
        for spec in registry.passes
    ]
    graph_rows = []
    for spec in registry.graph_passes:
        decision = switch.decide(spec.name, spec.fusion_type, spec.forbidden_close)
        graph_rows.append({
            "name": spec.name, "fusion_type": spec.fusion_type, "on": decision.on, "switch": decision.source,
            "forbidden_close": spec.forbidden_close, "origin": spec.origin, "overrides": spec.replaces or "",
            "description": spec.description,
        })
    plugins = [
        {"name": p.name, "distribution": p.distribution, "version": p.version, "entry_point": p.value,
         "blocked": p.blocked, "error": p.error, "passes": p.passes, "graph_passes": p.graph_passes,
         "fused_ops": p.fused_ops}
        for p in registry.plugins
    ]
    return {"passes": scope_rows, "graph_passes": graph_rows, "plugins": plugins,
            "fused_ops": registry.fused_op_origins, "overrides": registry.overrides}


def print_list(rows: dict[str, Any], show_plugins: bool) -> None:
    from rich.table import Table

    out = console()
    table = Table(title="Scope fusion passes (registration order)")
    for col in ("pass", "general", "enabled", "origin", "overrides", "description"):
        table.add_column(col, overflow="fold")
    for r in rows["passes"]:
        table.add_row(r["name"], "yes" if r["general"] else "no", "yes" if r["enabled"] else "no",
                      r["origin"], r["overrides"], r["description"])
    out.print(table)
    graph = Table(title="Graph fusion passes (registration order)")
    for col in ("pass", "type", "on", "origin", "overrides", "description"):
        graph.add_column(col, overflow="fold")
    for r in rows["graph_passes"]:
        state = "yes" if r["on"] else "no"
        if r["forbidden_close"]:
            state += " (cannot be switched off)"
        elif r["switch"] != "default":
            state += f" (switch file: {r['switch']})"
        graph.add_row(r["name"], r["fusion_type"], state, r["origin"], r["overrides"], r["description"])
    out.print(graph)
    if show_plugins:
        pt = Table(title="Plugins (entry-point group 'scopefusion')")
        for col in ("plugin", "distribution", "version", "status", "contributes"):
            pt.add_column(col)
        for p in rows["plugins"]:
            contributes = ", ".join(p["passes"] + p["graph_passes"] + p["fused_ops"]) or "-"
            status = "blocked" if p["blocked"] else ("skipped: hook raised" if p["error"] else "loaded")
            pt.add_row(p["name"], p["distribution"], p["version"], status, contributes)
        out.print(pt if rows["plugins"] else "No plugins installed.")
    for line in rows["overrides"]:
        out.print(f"override: {line}")


def print_verification(result: "VerifyResult") -> None:
    from rich.table import Table

    out = console()
    table = Table(title=f"Verification ({result.runs} run{'s' if result.runs != 1 else ''})")
    for col, justify in (("output", "left"), ("shape", "left"), ("dtype", "left"), ("max abs err", "right"),
                         ("max rel err", "right"), ("result", "left")):
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for o in result.outputs:
        verdict = "[green]pass[/green]" if o.passed else "[red]FAIL[/red]"
        table.add_row(o.name, "?" if o.shape is None else str(tuple(o.shape)), o.dtype or "?",
                      f"{o.max_abs_error:.3g}", f"{o.max_rel_error:.3g}",
                      verdict + (f" {o.note}" if o.note else ""))
    out.print(table)
    if result.passed:
        out.print(f"verified: {len(result.outputs)} output(s) match")
