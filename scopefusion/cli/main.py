"""The ``scopefusion`` command.

``list`` and ``--help`` never import TensorFlow; ``run`` and ``verify`` do,
after every option has been checked (so a bad option fails at once).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn, Sequence

from .options import (
    FUSE_OPTIONS,
    check_run_outputs,
    check_verify_options,
    enabled_passes,
    option_names,
    plugin_name_warnings,
)
from .verify import print_verifications, run_verification, verify_all
from ..core.errors import OptionError, ScopeFusionError
from .partition import (add_partition_arguments, add_run_partition_arguments, cmd_partition,
                            partition_options_from_args, write_run_partition)
from ..core.fusion.options import parse_pass_list
from ..core.graph.io import GRAPH_FORMATS, check_model_path, graph_payload, load_model
from ..core.graph.output_paths import Payload, write_outputs
from ..core.native_output import import_tensorflow_quietly, native_stderr_quiet
from .explain import add_explain_parser, cmd_explain
from .list_ops import list_ops
from ..report.html.report import html_report
from .progress import Progress
from .summary import add_summary_arguments, print_run_summary
from ..api import fuse, load_switch, switch_warnings
from ..core.graph.native import native_summary
from ..core.version import __version__
from ..plugins.blocked import check_enabled_passes, installed_plugins
from ..plugins.registry import autoload_disabled, load_registry
from .config_check import config_check
from .console import console, list_rows, print_list
from .new_plugin import new_plugin

EXAMPLE_MODEL = Path(__file__).parent.parent / "examples" / "bert_tiny.pb"


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--block-plugin", "--block_plugin", dest="block_plugins", action="append", default=[],
                   metavar="NAME", help="do not load this plugin (entry-point or distribution name); repeatable. "
                   "Also: SCOPEFUSION_BLOCK_PLUGINS=a,b")
    p.add_argument("--only-plugins", "--only_plugins", dest="only_plugins", default=None, metavar="A,B",
                   help="load only these plugins (entry-point or distribution names); also SCOPEFUSION_PLUGINS=a,b")
    p.add_argument("--debug", action="store_true", help="show a traceback on errors")


def _registry(args: argparse.Namespace) -> Any:
    only = parse_pass_list(args.only_plugins) if args.only_plugins is not None else None
    block = [name for value in args.block_plugins for name in parse_pass_list(value)]
    with native_stderr_quiet(not args.debug):  # a plugin may import TensorFlow
        registry = load_registry(block=block, only=only, strict=getattr(args, "strict", False))
    if not autoload_disabled():
        for line in plugin_name_warnings(registry.plugins, block, only):
            print(f"scopefusion: warning: {line}", file=sys.stderr)
    elif not registry.plugins:
        registry.plugins = installed_plugins()  # shown as not loaded
    return registry


def _add_enable_option(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--enable_scope_fusion_passes", "--enable-scope-fusion-passes", dest="enable", action="append",
                   default=[], metavar="A,B", help=help + " (comma-separated; repeatable)")


def _add_switch_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fusion_switch_file", "--fusion-switch-file", dest="fusion_switch_file", default=None,
                   metavar="FILE", help='turn graph passes on or off: JSON {"Switch": {"GraphFusion": {"ALL": "off", '
                   '"GeluFusionPass": "on"}, "UBFusion": {...}}, "Priority": {...}} or Name:on|off lines')


def _add_verify_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("verification")
    g.add_argument("--verify-shape", "--verify_shape", dest="verify_shape", default="", metavar="SPEC",
                   help='input shapes for verification only, e.g. "ids:2,128;mask:2,128" (-1: dynamic; a scalar is '
                   "0); dimensions the graph leaves unknown and not given here default to 2. The output graph is "
                   "not changed by it")
    g.add_argument("--runs", type=int, default=3, help="how many random feeds to compare on (default 3, at least 1)")
    g.add_argument("--seed", type=int, default=0, help="seed of the first random feed (default 0)")
    g.add_argument("--atol", type=float, default=None,
                   help="absolute tolerance, >= 0 (default by dtype: float32 1e-4, float16 1e-2, integers exact)")
    g.add_argument("--rtol", type=float, default=None, help="relative tolerance, >= 0 (default by dtype, as --atol)")
    g.add_argument("--int-range", "--int_range", dest="int_range", default="0,10", metavar="LO,HI",
                   help="integer inputs are drawn from [LO, HI) (default 0,10; HI > LO); set it for ids and indices")
    g.add_argument("--feeds", metavar="FILE.npz", help="real input values instead of random ones (keys: input "
                   "names; only the inputs the compared outputs depend on are needed)")
    g.add_argument("--verify-outputs", "--verify_outputs", dest="verify_outputs", default="", metavar="T1,T2",
                   help="compare only these output tensors (default: every sink of both graphs)")


#: exit statuses: 0 done, 1 verification found a mismatch, 2 usage (an unknown flag, a bad option value),
#: 3 any other error (a model that cannot be read, a pass that failed with --strict, ...), 130 interrupted
EXIT_OK, EXIT_MISMATCH, EXIT_USAGE, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def _add_strict_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strict-options", "--strict_options", dest="strict_options", action="store_true",
                   help="a session configuration key outside the NpuOptimizer option table is an error (default: "
                   "a warning naming it, and the run goes on)")


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line, like every other error, with status 2."""

    def error(self, message: str) -> "NoReturn":
        command = self.prog.partition(" ")[2]  # "scopefusion run" -> "run"; the top parser has none
        where = f"{command}: " if command else ""
        self.exit(EXIT_USAGE, f"scopefusion: error: {where}{message} (see '{self.prog} --help')\n")


def _add_run_parser(sub: Any) -> None:
    run = sub.add_parser("run", help="fuse a model (.pb, .pbtxt or SavedModel directory)",
                         description="Fuse a model and write the result. Without MODEL, fuses a built-in "
                         "example (a tiny BERT-style encoder built with tf_slim).")
    run.add_argument("model", nargs="?", help="a .pb / .pbtxt GraphDef or a SavedModel directory")
    run.add_argument("-o", "--output", help="where to write the fused graph: .pb or .graphdef (binary), .pbtxt or "
                     ".txt (text), or - for standard output; default: <model name>_fused.pb (.pbtxt for a text "
                     "model) in the current directory. A symbolic link is written through to its target and "
                     "kept")
    run.add_argument("--output-format", "--output_format", dest="output_format", choices=GRAPH_FORMATS,
                     default=None, help="pb (binary) or pbtxt (text); default: from the -o extension, pb for -o -")
    _add_enable_option(run, "non-general passes to run")
    run.add_argument("--emit", choices=("fused", "tf"), default="fused",
                     help="fused: fused ops as nodes of their own type (default); tf: every fused node calls "
                     "its TensorFlow reference implementation, so stock TensorFlow runs the graph")
    run.add_argument("--report", metavar="FILE", help="write the full report as JSON (- for standard output)")
    run.add_argument("--html", metavar="FILE", help="write the run as one self-contained HTML page: the summary, "
                     "and drawings of what each fused op replaced and of each refusal's and near miss's place "
                     "(- for standard output)")
    run.add_argument("--outputs", default="", metavar="T1,T2",
                     help="graph output tensors to keep fetchable (default: the graph's sinks)")
    _add_switch_option(run)
    run.add_argument("--no-functions", "--no_functions", dest="functions", action="store_false",
                     help="leave the functions of the graph's library (loop and branch bodies, called functions) "
                     "as they are; by default each is fused as a graph of its own, its signature kept")
    run.add_argument("--no-hints", "--no_hints", dest="hints", action="store_false",
                     help="do not try the passes the run leaves out (a scope pass not enabled, a graph pass "
                     "switched off) for hints; saves about a tenth of a run on a large graph")
    run.add_argument("--signature", help="SavedModel signature to freeze (default: serving_default, or the only "
                     "signature; several others need this option)")
    run.add_argument("--strict", action="store_true", help="a pass that raises is an error, not skipped")
    run.add_argument("--pass-timeout", "--pass_timeout", dest="pass_timeout", type=float, default=None,
                     metavar="SECONDS", help="stop and report (--strict: fail on) a pass that runs longer than this "
                     "(default: 600; inf: no limit)")
    add_run_partition_arguments(run)
    run.add_argument("--verify", action="store_true",
                     help="run the original and the fused graph on the same feeds and compare every output")
    add_summary_arguments(run)
    run.add_argument("--input_shape", "--input-shape", dest="input_shape", default="", metavar="SPEC",
                     help='declare the shapes of inputs the graph leaves unknown, e.g. "ids:-1,128;mask:-1,128" '
                     "(-1: dynamic; a scalar is 0): written on the output graph's placeholders, and used for "
                     "shape inference and (unless --verify-shape is given) verification")
    _add_verify_options(run)
    _add_common(run)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="scopefusion",
        description="Fuse TensorFlow subgraphs found by name scope or op pattern into single operators.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    _add_run_parser(sub)

    ver = sub.add_parser("verify", help="compare a fused graph with the original in TensorFlow",
                         description="Run ORIGINAL and FUSED (its TensorFlow-runnable form; a fused-form graph "
                         "is converted) on the same feeds and compare every output tensor. Exits 1 on any "
                         "mismatch or on an output present in one graph only.")
    ver.add_argument("original", help="the original model (.pb, .pbtxt or SavedModel directory)")
    ver.add_argument("fused", help="the fused graph, in either form")
    ver.add_argument("--signature", help="signature to freeze when ORIGINAL is a SavedModel (default: "
                     "serving_default, or its only signature)")
    _add_verify_options(ver)
    ver.add_argument("--input_shape", "--input-shape", dest="verify_shape", help=argparse.SUPPRESS)  # older name
    ver.add_argument("--json", action="store_true", help="print the comparison as JSON (passed, runs, notes, "
                     "outputs with their errors) instead of the table")
    _add_common(ver)

    new = sub.add_parser("new-plugin", help="write a ready-to-install plugin package",
                         description="Write a plugin package: pyproject with the entry point, a working pass "
                         "with its fused-op definition and reference implementation, a test, a README.")
    new.add_argument("name", help="distribution name, e.g. my-passes")
    new.add_argument("--dir", default=".", help="where to create it (default: the current directory)")
    new.add_argument("--debug", action="store_true", help="show a traceback on errors")

    lst = sub.add_parser("list", help="show every registered pass", description="Show every registered pass: "
                         "scope passes (general or not, enabled) and graph passes (switch-file section, on or off), "
                         "with origin and what each overrides.")
    _add_enable_option(lst, "show these non-general passes as enabled")
    _add_switch_option(lst)
    lst.add_argument("--json", action="store_true", help="machine-readable output")
    lst.add_argument("--plugins", action="store_true", help="list plugin distributions and what each contributes")
    lst.add_argument("--ops", action="store_true", help="list every declared fused op instead: inputs, outputs, "
                     "attributes, origin")
    _add_common(lst)

    part = sub.add_parser("partition", help="show where a mixed run places every node",
                          description="Place a model between the back end and TensorFlow as a mixed run "
                          "(mix_compile_mode) would; print the segments and why each host node stays. Writes "
                          "nothing.")
    add_partition_arguments(part)
    _add_common(part)

    _add_common(add_explain_parser(sub))

    cfg = sub.add_parser("config", help="check an NpuOptimizer session configuration",
                         description="Read the NpuOptimizer options of a ConfigProto (.pbtxt or binary) and show "
                         "the effective value of every option.")
    actions = cfg.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    check = actions.add_parser("check", help="validate FILE and print the effective options as a table",
                               description="Print every option's value, whether it was set or is the default, and "
                               "whether this tool acts on it or records it for a back end; exit 1 on any error.")
    check.add_argument("file", help="a ConfigProto with an NpuOptimizer custom optimizer (.pbtxt or binary)")
    check.add_argument("--json", action="store_true", help="print the options as JSON instead of the table")
    _add_strict_options(check)
    check.add_argument("--debug", action="store_true", help="show a traceback on errors")
    cfg.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    return parser


def _version() -> str:
    return f"{__version__} ({native_summary()})"


# ------------------------------------------------------------------------- list
def cmd_list(args: argparse.Namespace) -> int:
    switch = load_switch(args.fusion_switch_file)
    registry = _registry(args)
    switch = switch.with_aliases(registry.aliases("graph"))
    enabled = enabled_passes(args.enable)
    with option_names(FUSE_OPTIONS):
        check_enabled_passes(registry, enabled)
    enabled = registry.canonical_names(enabled, "scope")
    if args.ops:
        return list_ops(registry, args.json)
    rows = list_rows(registry, enabled, switch)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_list(rows, args.plugins)
    for line in switch_warnings(switch, registry):
        print(f"scopefusion: warning: {line}", file=sys.stderr)
    for line in registry.errors:
        print(f"scopefusion: error: {line}", file=sys.stderr)
    return 0


# -------------------------------------------------------------------------- run
def _check_signature(args: argparse.Namespace, model: Path, kind: str) -> None:
    if args.signature and kind != "saved_model":
        raise OptionError(f"--signature {args.signature!r}: {model} is not a SavedModel directory")


def _load(path: Path, signature: str | None, debug: bool, needs_tensorflow: bool) -> Any:
    """Load a model; TensorFlow is imported (its start-up notices kept quiet) only when it is
    needed: to freeze a SavedModel, to emit the TensorFlow-runnable form, or to verify."""
    if not debug and needs_tensorflow:
        import_tensorflow_quietly()
    with native_stderr_quiet(not debug):  # SavedModel loading and freezing: CUDA and loader notices
        return load_model(path, signature)


def cmd_run(args: argparse.Namespace) -> int:
    """Check every option, load, fuse, verify if asked; then write the output and the
    report together, atomically, and print what was done."""
    switch = load_switch(args.fusion_switch_file)  # read before any other work
    model = Path(args.model) if args.model else EXAMPLE_MODEL
    kind = check_model_path(model)
    outputs = check_run_outputs(args, model)
    _check_signature(args, model, kind)
    int_range = check_verify_options(args) if args.verify else (0, 10)
    mixed = partition_options_from_args(args)
    if args.pass_timeout is not None and not args.pass_timeout > 0:  # before any work
        raise OptionError(f"--pass-timeout must be a positive number of seconds, not {args.pass_timeout}")
    registry = _registry(args)
    enabled = enabled_passes(args.enable)
    with option_names(FUSE_OPTIONS):
        check_enabled_passes(registry, enabled)
    if not args.model and not args.quiet:
        print(f"No model given: fusing the built-in example {model.name}", file=sys.stderr)
    with Progress() as progress:  # on a terminal only
        progress.update(f"loading {model.name}" + (" and freezing its signature" if kind == "saved_model" else ""))
        loaded = _load(model, args.signature, args.debug,
                       kind == "saved_model" or args.emit == "tf" or bool(args.verify) or args.mixed_run)
        original = loaded.graph_copy() if args.verify else None  # the loaded graph's columns kept for the run
        with option_names(FUSE_OPTIONS):
            result = fuse(loaded, enable_scope_fusion_passes=enabled or None, emit=args.emit,
                          outputs=args.outputs or None, strict=args.strict, registry=registry,
                          fusion_switch_file=switch if args.fusion_switch_file else None,
                          pass_timeout=args.pass_timeout, input_shapes=args.input_shape or None,
                          progress=progress.update, keep_places=outputs.html is not None,
                          functions=args.functions, hints=args.hints, **mixed)
        verification = None
        if original is not None:
            runnable = result.partition.runnable_graph_def if result.partition is not None else result.fused_graph_def
            verification = verify_all(args, original, runnable, registry, int_range, progress.update)
    if loaded.format == "saved_model":
        print(f"SavedModel signature frozen: inputs {', '.join(loaded.inputs) or '-'}; "
              f"outputs {', '.join(loaded.outputs) or '-'}", file=sys.stderr)
    write_run_partition(args, result, sys.stderr, write=not args.dry_run)  # --segments-dir, and the placement
    write_outputs(_run_files(args, outputs, result, model))
    return _print_run(args, result.report, outputs, verification)


def _run_files(args: argparse.Namespace, outputs: Any, result: Any, model: Path) -> list[tuple[Any, Payload]]:
    """What ``run`` writes, together: the fused graph, the report, the HTML page (a dry run: only
    what goes to standard output)."""
    def wanted(target: Any) -> bool:
        return target is not None and not (args.dry_run and not target.is_stdout)

    files = [] if args.dry_run else [(outputs.graph, graph_payload(result.graph_def, outputs.fmt))]
    if wanted(outputs.report):
        report = result.report.to_dict()
        if result.partition is not None:
            report["partition"] = result.partition.report.to_dict()
        files.append((outputs.report, (json.dumps(report, indent=2) + "\n").encode("utf-8")))
    if wanted(outputs.html):
        files.append((outputs.html, html_report(result.report, model.name).encode("utf-8")))
    return files


def _print_run(args: argparse.Namespace, report: Any, outputs: Any, verification: Any) -> int:
    # standard output carries the graph or the report (a dry run writes no graph)
    out = console(stderr=any(t is not None and t.is_stdout for t in (outputs.report, outputs.html))
                  or (outputs.graph.is_stdout and not args.dry_run))
    print_run_summary(report, str(outputs.graph), args.emit, out, verbose=args.verbose, dry_run=args.dry_run,
                      quiet=args.quiet)
    return 0 if verification is None else print_verifications(verification, out)


def cmd_verify(args: argparse.Namespace) -> int:
    original, fused = Path(args.original), Path(args.fused)
    _check_signature(args, original, check_model_path(original))
    check_model_path(fused)
    int_range = check_verify_options(args)
    registry = _registry(args)
    for line in registry.errors:
        print(f"scopefusion: error: {line}", file=sys.stderr)
    with Progress() as progress:  # on a terminal only
        progress.update(f"loading {original.name} and {fused.name}")
        loaded = _load(original, args.signature, args.debug, True)
        result = run_verification(args, loaded, _load(fused, None, args.debug, True), registry, int_range,
                                  args.verify_shape or None, progress.update)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return EXIT_OK if result.passed else EXIT_MISMATCH
    return print_verifications([(None, result)])


def cmd_new_plugin(args: argparse.Namespace) -> int:
    root = new_plugin(args.name, args.dir)
    print(f"wrote {root}: pip install {root} && python -m pytest {root / 'tests'}")
    return 0


# ----------------------------------------------------------------------- config
def cmd_config(args: argparse.Namespace) -> int:
    with native_stderr_quiet(not args.debug):  # reading a ConfigProto imports TensorFlow
        return config_check(args.file, console=console(), strict=args.strict_options, as_json=args.json)


# ------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    handlers = {"run": cmd_run, "list": cmd_list, "verify": cmd_verify, "new-plugin": cmd_new_plugin,
                "config": cmd_config, "partition": cmd_partition, "explain": cmd_explain}
    handler = handlers[args.command]
    try:
        return handler(args)
    except ScopeFusionError as exc:
        if args.debug:
            raise
        _error_line(" ".join(str(exc).split()))
        return EXIT_USAGE if isinstance(exc, OptionError) else EXIT_ERROR
    except KeyboardInterrupt:
        print("scopefusion: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away (| head)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        if getattr(args, "output", None) == "-":  # the graph itself was not delivered
            _error_line("standard output was closed before the fused graph was written (the reader went away)")
            return EXIT_ERROR
        return 0
    except Exception as exc:  # an unexpected failure: still one line unless --debug
        if args.debug:
            raise
        _error_line(f"{type(exc).__name__}: {' '.join(str(exc).split())}", "(run with --debug for a traceback)")
        return EXIT_ERROR


#: The longest error line printed: a longer one (a user's text echoed) has its middle cut.
MAX_ERROR_CHARS = 600


def _error_line(text: str, tail: str = "") -> None:
    if len(text) > MAX_ERROR_CHARS:
        text = f"{text[:MAX_ERROR_CHARS // 2]} [...{len(text) - MAX_ERROR_CHARS} characters...] " \
               f"{text[-MAX_ERROR_CHARS // 2:]}"
    with contextlib.suppress(OSError):
        print(f"scopefusion: error: {text}{' ' + tail if tail else ''}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
