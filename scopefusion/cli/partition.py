"""The command line of mixed computation: ``scopefusion partition MODEL`` (the placement,
printed) and the options ``scopefusion run`` takes for a mixed run.

Wiring (in ``cli.py``): ``add_partition_arguments`` fills the ``partition`` sub-parser and
``cmd_partition`` runs it; ``add_run_partition_arguments`` adds the mixed options to ``run``,
``partition_options_from_args`` turns them into keyword arguments of :func:`scopefusion.fuse`,
and ``write_run_partition`` writes ``--segments-dir`` and prints the placement after a run.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table

from ..core.errors import OptionError
from ..core.fusion.options import parse_pass_list
from ..core.graph.io import check_model_path, save_graph
from ..core.native_output import import_tensorflow_quietly, native_stderr_quiet
from ..core.partition import PartitionReport, parse_flag, partition_request, read_supported_ops_file
from ..core.partition.mixed import MixedResult
from ..api import partition
from ..plugins.registry import load_registry

_SHOWN = 10
_SHOWN_OPS = 4


def _add_mixed_options(p: argparse.ArgumentParser, *, with_mode: bool) -> None:
    g = p.add_argument_group("mixed computation")
    if with_mode:
        g.add_argument("--mix_compile_mode", "--mix-compile-mode", dest="mix_compile_mode", action="store_const",
                       const=True, default=None, help="partition the graph between the back end and TensorFlow, "
                       "fuse inside the back end's segments only, and cut each segment out into a call node")
    g.add_argument("--in_out_pair", "--in-out-pair", dest="in_out_pair", default=None, metavar="PAIRS",
                   help="ranges of nodes, as the session option writes them: \"[[['in1', 'in2'], ['out1']]]\" "
                   "(the nodes on a path from an in node to an out node)")
    g.add_argument("--in_out_pair_flag", "--in-out-pair-flag", dest="in_out_pair_flag", default=None,
                   metavar="true|false", help="true (default): the ranges run on the back end and the rest on "
                   "the host; false: the ranges stay on the host and the rest runs on the back end")
    g.add_argument("--supported_ops_file", "--supported-ops-file", dest="supported_ops_file", default=None,
                   metavar="FILE", help='the ops the back end runs: JSON {"OpType": {"isGray": false, '
                   '"isHeavy": false}, ...} (default: plugins\' declarations, else every op but host-only families)')
    if not any("--config" in a.option_strings for a in p._actions):  # noqa: SLF001 - another option may own it
        g.add_argument("--config", default=None, metavar="FILE", help="a session configuration (ConfigProto, "
                       "text or binary) whose NpuOptimizer entry gives these options; the flags override it")
        g.add_argument("--strict-options", "--strict_options", dest="strict_options", action="store_true",
                       help="a --config key outside the NpuOptimizer option table is an error (default: a "
                       "warning naming it, and the run goes on)")


def add_run_partition_arguments(run_parser: argparse.ArgumentParser) -> None:
    """The mixed-computation options of ``scopefusion run``."""
    _add_mixed_options(run_parser, with_mode=True)
    run_parser.add_argument("--segments-dir", "--segments_dir", dest="segments_dir", default=None, metavar="DIR",
                            help="with --mix_compile_mode: also write each segment as a standalone GraphDef "
                            "(DIR/<segment>.pb, placeholders at its inputs) and DIR/segments.json")


def add_partition_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``scopefusion partition``."""
    parser.add_argument("model", help="a .pb / .pbtxt GraphDef or a SavedModel directory")
    _add_mixed_options(parser, with_mode=True)
    parser.add_argument("--outputs", default="", metavar="T1,T2", help="graph output tensors (default: the sinks)")
    parser.add_argument("--signature", default=None, help="SavedModel signature to freeze")
    parser.add_argument("--json", action="store_true", help="print the placement as JSON")
    parser.add_argument("--nodes", action="store_true", help="list every segment's nodes (text and JSON)")
    parser.add_argument("--all", action="store_true", help=f"list every host node (default: {_SHOWN} per reason)")


def partition_options_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments of :func:`scopefusion.fuse` (and ``partition``) from the parsed options, all
    checked (the session configuration and the supported-ops file read) before any other work."""
    flag = getattr(args, "in_out_pair_flag", None)
    options: dict[str, Any] = {
        "mix_compile_mode": getattr(args, "mix_compile_mode", None),
        "in_out_pair": getattr(args, "in_out_pair", None),
        "in_out_pair_flag": None if flag is None else parse_flag(flag, "--in_out_pair_flag"),
        "supported_ops_file": getattr(args, "supported_ops_file", None),
        "session_options": getattr(args, "config", None),
    }
    strict = getattr(args, "strict_options", False)
    if strict:
        options["strict_options"] = True
    implied = True if getattr(args, "command", None) == "partition" else options["mix_compile_mode"]
    request = partition_request(mix_compile_mode=implied,
                                in_out_pair=options["in_out_pair"], in_out_pair_flag=options["in_out_pair_flag"],
                                supported_ops_file=options["supported_ops_file"],
                                session=options["session_options"],
                                strict_options=strict)  # every mistake now, before any work
    args.mixed_run = request.mixed  # a mixed run makes the TensorFlow-runnable form: TensorFlow is needed
    if getattr(args, "command", None) == "partition":  # a run reports them with its summary
        for line in request.session.warnings:
            print(f"scopefusion: warning: {line}", file=sys.stderr)
    if request.supported_ops_file:
        read_supported_ops_file(request.supported_ops_file)
    if getattr(args, "segments_dir", None) and not request.mixed:
        raise OptionError(f"--segments-dir {args.segments_dir}: given without --mix_compile_mode; allowed: "
                          "--segments-dir only in a mixed run")
    return options


def cmd_partition(args: argparse.Namespace) -> int:
    """``scopefusion partition``: check the options, load, place, print."""
    options = partition_options_from_args(args)
    options.pop("mix_compile_mode")  # implied
    model = Path(args.model)
    kind = check_model_path(model)
    only = parse_pass_list(args.only_plugins) if getattr(args, "only_plugins", None) is not None else None
    block = [n for value in getattr(args, "block_plugins", []) for n in parse_pass_list(value)]
    debug = getattr(args, "debug", False)
    with native_stderr_quiet(not debug):
        registry = load_registry(block=block, only=only)
        if not debug and kind == "saved_model":  # freezing needs TensorFlow; a graph file does not
            import_tensorflow_quietly()
        report = partition(model, registry=registry, outputs=args.outputs or None, signature=args.signature,
                           **options)
    if args.json:
        print(report.to_json(nodes=args.nodes))
    else:
        print_partition(report, sys.stdout, every_host_node=args.all, nodes=args.nodes)
    return 0


def _ops(ops: dict[str, int]) -> str:
    shown = ", ".join(f"{op} x{n}" for op, n in list(ops.items())[:_SHOWN_OPS])
    return shown + (f", +{len(ops) - _SHOWN_OPS} types" if len(ops) > _SHOWN_OPS else "")


def _listed(items: list[str]) -> str:
    return ", ".join(items[:_SHOWN]) + (f", ... ({len(items)} in all)" if len(items) > _SHOWN else "") or "-"


def print_partition(report: PartitionReport, out: TextIO, *, every_host_node: bool = False,
                    nodes: bool = False) -> None:
    """The placement as text: totals, a table of segments, host nodes by reason."""
    console = Console(file=out, width=140, soft_wrap=False)
    table = Table(title="Segments (run by the back end)")
    for column in ("segment", "nodes", "consts", "ops", "inputs", "outputs"):
        table.add_column(column, justify="right" if column in ("nodes", "consts") else "left")
    for s in report.segments:
        table.add_row(s.name, str(s.nodes), str(s.constants), _ops(s.ops), _listed(s.inputs), _listed(s.outputs))
    console.print(table)
    if nodes:
        for s in report.segments:
            console.print(f"{s.name}: {', '.join(s.node_names)}", markup=False, highlight=False)
    for line in report.summary_lines()[:3]:
        console.print(line, markup=False, highlight=False)
    for code, group in report.host_by_reason().items():
        console.print(f"host, {code} ({len(group)} node(s)):", markup=False, highlight=False)
        for h in group if every_host_node else group[:_SHOWN]:
            console.print(f"  {h.name} ({h.op}): {h.reason}", markup=False, highlight=False)
        if not every_host_node and len(group) > _SHOWN:
            console.print(f"  ... and {len(group) - _SHOWN} more (--all lists them)", markup=False, highlight=False)


def write_segments(directory: str | Path, result: MixedResult) -> list[Path]:
    """Each standalone segment as ``DIR/<name>.pb``, and ``DIR/segments.json`` describing them."""
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise OptionError(f"--segments-dir {root}: not a directory")
    root.mkdir(parents=True, exist_ok=True)
    written = [save_graph(g.graph_def, root / f"{g.name}.pb", "pb") for g in result.segment_graphs]
    manifest = root / "segments.json"
    manifest.write_text(json.dumps({"segments": [g.to_dict() for g in result.segment_graphs]}, indent=2) + "\n")
    return [*written, manifest]


def write_run_partition(args: argparse.Namespace, result: Any, out: TextIO | None = None,
                        write: bool = True) -> None:
    """After a mixed ``run``: write ``--segments-dir`` (unless not ``write``: a dry run) and print the
    placement (to standard error when standard output carries the graph)."""
    if result.partition is None:
        return
    if write and getattr(args, "segments_dir", None):
        written = write_segments(args.segments_dir, result.partition)
        print(f"wrote {len(written) - 1} segment graph(s) to {args.segments_dir}", file=sys.stderr)
    print_partition(result.partition.report, out or sys.stderr)
