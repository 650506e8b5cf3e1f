"""``scopefusion config check FILE``: validate a session configuration and
show the NpuOptimizer options it leads to."""
from __future__ import annotations

import json
import os

from rich.console import Console
from rich.table import Table

from ..core.options import OPTIONS, SESSION_ONLY, NpuOptions, read_npu_options
from ..core.options.render import render_value
from ..session.session import SESSION_ACTS_ON


def options_table(options: NpuOptions, title: str) -> Table:
    """One row per option: its value, whether the configuration set it, and
    whether this project acts on it or records it for a back end."""
    table = Table(title=title)
    table.add_column("option", overflow="fold")
    table.add_column("value", overflow="fold")
    table.add_column("default or set")
    table.add_column("use")
    for spec in OPTIONS:
        table.add_row(spec.name, render_value(spec.name, getattr(options, spec.name)), options.source(spec.name),
                      spec.use)
    return table


def options_json(options: NpuOptions) -> str:
    """The options as JSON: per option its value (as the table shows it), whether it was set, and its use."""
    rows = [{"option": spec.name, "value": render_value(spec.name, getattr(options, spec.name)),
             "source": options.source(spec.name), "use": spec.use, "acted_on": spec.acted_on} for spec in OPTIONS]
    return json.dumps({"options": rows, "set": sorted(options.given), "unknown": sorted(options.unknown)}, indent=2)


def config_check(path: str | os.PathLike[str], *, console: Console, strict: bool = False, as_json: bool = False) -> int:
    """Print the effective NpuOptimizer options of the ConfigProto in ``path``
    (text or binary; as JSON with ``as_json``) and return 0; a bad configuration raises
    :class:`~scopefusion.core.options.SessionOptionError` (``strict``: a key outside the option
    table too; otherwise it is a warning)."""
    options = read_npu_options(path, strict=strict)
    if as_json:
        print(options_json(options))
        return 0
    console.print(options_table(options, f"NpuOptimizer options of {path}"))
    given = [spec for spec in OPTIONS if spec.name in options.given]
    acted = [spec.name for spec in given if spec.acted_on]
    console.print(f"{len(given)} option(s) set, {len(acted)} of them acted on here"
                  f"{' (' + ', '.join(acted) + ')' if acted else ''}; the others are validated and recorded "
                  "for a back end")
    acted_on = [spec.name for spec in OPTIONS if spec.acted_on]
    console.print("acted on by run, partition and fuse(): "
                  f"{', '.join(n for n in acted_on if n not in SESSION_ONLY)}", markup=False, highlight=False)
    console.print(f"acted on by scopefusion.Session only (they need the graph to run): "
                  f"{', '.join(n for n in acted_on if n in SESSION_ONLY)}", markup=False, highlight=False)
    console.print(f"not acted on by scopefusion.Session (recorded): "
                  f"{', '.join(n for n in acted_on if n not in SESSION_ACTS_ON)}", markup=False, highlight=False)
    filled = options.defaults_filled()
    if filled:
        console.print("defaults filled in (the seed's, not set by the configuration): " + ", ".join(
            f"{n} = {render_value(n, getattr(options, n))}" for n in filled), markup=False, highlight=False)
    for line in options.warnings:
        console.print(f"warning: {line}", markup=False, highlight=False)
    return 0
