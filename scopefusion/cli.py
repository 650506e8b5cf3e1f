"""The ``scopefusion`` command.

``list`` and ``--help`` never import TensorFlow; ``run`` does, when it loads
the model.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn, Sequence

from .core.errors import ScopeFusionError
from .core.fusion.options import check_pass_names, parse_pass_list
from .core.native_output import import_tensorflow_quietly, native_stderr_quiet

EXAMPLE_MODEL = Path(__file__).with_name("examples") / "bert_tiny.pb"


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--block-plugin", "--block_plugin", dest="block_plugins", action="append", default=[],
                   metavar="NAME", help="do not load this plugin (entry-point or distribution name); repeatable. "
                   "Also: SCOPEFUSION_BLOCK_PLUGINS=a,b")
    p.add_argument("--only-plugins", "--only_plugins", dest="only_plugins", default=None, metavar="A,B",
                   help="load only these plugins (entry-point or distribution names); also SCOPEFUSION_PLUGINS=a,b")
    p.add_argument("--debug", action="store_true", help="show a traceback on errors")


def _registry(args: argparse.Namespace) -> Any:
    from .plugins.registry import load_registry, normalise_distribution

    only = parse_pass_list(args.only_plugins) if args.only_plugins is not None else None
    block = [name for value in args.block_plugins for name in parse_pass_list(value)]
    registry = load_registry(block=block, only=only, strict=getattr(args, "strict", False))
    found = {n for p in registry.plugins for n in (p.name, normalise_distribution(p.distribution))}
    for option, names in (("--block-plugin", block), ("--only-plugins", only or [])):
        for name in names:
            if name not in found and normalise_distribution(name) not in found:
                print(f"scopefusion: warning: {option} {name}: no installed plugin has that entry-point or "
                      "distribution name", file=sys.stderr)
    return registry


def _add_switch_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fusion_switch_file", "--fusion-switch-file", dest="fusion_switch_file", default=None,
                   metavar="FILE", help='turn graph passes on or off: JSON {"Switch": {"GraphFusion": {"ALL": "off", '
                   '"GeluFusionPass": "on"}, "UBFusion": {...}}, "Priority": {...}} or Name:on|off lines')


def _add_verify_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("verification")
    g.add_argument("--input_shape", "--input-shape", dest="input_shape", default="", metavar="SPEC",
                   help='shapes for inputs with unknown dimensions, e.g. "ids:1,128;mask:1,128" (a scalar is 0); '
                   "unknown dimensions not given default to 2")
    g.add_argument("--runs", type=int, default=3, help="how many random feeds to compare on (default 3)")
    g.add_argument("--seed", type=int, default=0, help="seed of the first random feed (default 0)")
    g.add_argument("--atol", type=float, default=None,
                   help="absolute tolerance (default by dtype: float32 1e-4, float16 1e-2, integers exact)")
    g.add_argument("--rtol", type=float, default=None, help="relative tolerance (default by dtype, as --atol)")
    g.add_argument("--int-range", "--int_range", dest="int_range", default="0,10", metavar="LO,HI",
                   help="integer inputs are drawn from [LO, HI) (default 0,10); set it for ids and indices")
    g.add_argument("--feeds", metavar="FILE.npz", help="real input values instead of random ones")
    g.add_argument("--verify-outputs", "--verify_outputs", dest="verify_outputs", default="", metavar="T1,T2",
                   help="compare only these output tensors (default: every sink of both graphs)")


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line, like every other error, with status 2."""

    def error(self, message: str) -> "NoReturn":  # type: ignore[override]
        self.exit(2, f"scopefusion: error: {self.prog}: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="scopefusion",
        description="Fuse TensorFlow subgraphs found by name scope or op pattern into single operators.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="fuse a model (.pb, .pbtxt or SavedModel directory)",
                         description="Fuse a model and write the result. Without MODEL, fuses a built-in "
                         "example (a tiny BERT-style encoder built with tf_slim).")
    run.add_argument("model", nargs="?", help="a .pb / .pbtxt GraphDef or a SavedModel directory")
    run.add_argument("-o", "--output", help="where to write the fused graph (.pb, or .pbtxt for text); "
                     "default: <model name>_fused.pb in the current directory")
    run.add_argument("--enable_scope_fusion_passes", "--enable-scope-fusion-passes", dest="enable",
                     default="", metavar="A,B", help="non-general passes to run (comma-separated)")
    run.add_argument("--emit", choices=("fused", "tf"), default="fused",
                     help="fused: fused ops as nodes of their own type (default); tf: every fused node calls "
                     "its TensorFlow reference implementation, so stock TensorFlow runs the graph")
    run.add_argument("--report", metavar="FILE", help="write the full report as JSON")
    run.add_argument("--outputs", default="", metavar="T1,T2",
                     help="graph output tensors to keep fetchable (default: the graph's sinks)")
    _add_switch_option(run)
    run.add_argument("--signature", help="SavedModel signature to freeze (default: serving_default)")
    run.add_argument("--strict", action="store_true", help="a pass that raises is an error, not skipped")
    run.add_argument("--verify", action="store_true",
                     help="run the original and the fused graph on the same feeds and compare every output")
    _add_verify_options(run)
    _add_common(run)

    ver = sub.add_parser("verify", help="compare a fused graph with the original in TensorFlow",
                         description="Run ORIGINAL and FUSED (its TensorFlow-runnable form; a fused-form graph "
                         "is converted) on the same feeds and compare every output tensor. Exits 1 on any "
                         "mismatch or on an output present in one graph only.")
    ver.add_argument("original", help="the original model (.pb, .pbtxt or SavedModel directory)")
    ver.add_argument("fused", help="the fused graph, in either form")
    _add_verify_options(ver)
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
    lst.add_argument("--enable_scope_fusion_passes", "--enable-scope-fusion-passes", dest="enable", default="",
                     metavar="A,B", help="show these non-general passes as enabled")
    _add_switch_option(lst)
    lst.add_argument("--json", action="store_true", help="machine-readable output")
    lst.add_argument("--plugins", action="store_true", help="list plugin distributions and what each contributes")
    _add_common(lst)
    return parser


def _version() -> str:
    from . import __version__

    return __version__


# ------------------------------------------------------------------------- list
def cmd_list(args: argparse.Namespace) -> int:
    from .api import load_switch, switch_warnings
    from .console import list_rows, print_list

    switch = load_switch(args.fusion_switch_file)
    registry = _registry(args)
    enabled = parse_pass_list(args.enable)
    check_pass_names(enabled, registry.pass_names())
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
def _default_output(model: Path) -> Path:
    stem = model.name if model.is_dir() else model.stem
    return Path.cwd() / f"{stem}_fused.pb"


def _check_output_paths(model: Path, output: Path, report: Path | None) -> None:
    """Refuse, before any work, a file to write that is (or lies inside) the input
    model, is a directory, or has no directory to go to."""
    model_real = model.resolve() if model.exists() else None
    for what, path in (("output", output), ("report", report)):
        if path is None:
            continue
        real = path.resolve()
        if model_real is not None and (real == model_real or (model.is_dir() and model_real in real.parents)):
            where = " (it lies inside the SavedModel directory)" if real != model_real else ""
            raise ScopeFusionError(f"{path}: refusing to overwrite the input model{where}")
        if path.is_dir():
            raise ScopeFusionError(f"{path}: is a directory; give a file name for the {what}")
        if not real.parent.is_dir():
            raise ScopeFusionError(f"{path}: directory {path.parent} does not exist")
    if report is not None and report.resolve() == output.resolve():
        raise ScopeFusionError(f"{report}: the report and the fused graph cannot go to the same file")


def cmd_run(args: argparse.Namespace) -> int:
    from .api import fuse, load_switch
    from .console import print_summary
    from .core.graph.io import load_model, save_graph, write_atomically

    model = Path(args.model) if args.model else EXAMPLE_MODEL
    if not args.model:
        print(f"No model given: fusing the built-in example {model.name}", file=sys.stderr)
    output = Path(args.output) if args.output else _default_output(model)
    report_path = Path(args.report) if args.report else None
    _check_output_paths(model, output, report_path)
    if args.signature and not model.is_dir():
        raise ScopeFusionError(f"--signature {args.signature!r}: {model} is not a SavedModel directory")
    switch = load_switch(args.fusion_switch_file)
    loaded = load_model(model, args.signature)
    original = None
    if args.verify:
        from tensorflow.core.framework import graph_pb2

        original = graph_pb2.GraphDef()
        original.CopyFrom(loaded.graph_def)
    if loaded.format == "saved_model":
        print(f"SavedModel signature frozen: inputs {', '.join(loaded.inputs) or '-'}; "
              f"outputs {', '.join(loaded.outputs) or '-'}", file=sys.stderr)
    registry = _registry(args)
    result = fuse(loaded, enable_scope_fusion_passes=args.enable, emit=args.emit, outputs=args.outputs or None,
                  strict=args.strict, registry=registry, fusion_switch_file=switch)
    report = result.report
    save_graph(result.graph_def, output)
    if report_path is not None:
        write_atomically(report_path, (report.to_json() + "\n").encode("utf-8"))
    print_summary(report, output, args.emit)
    if original is not None:
        return _verify_and_print(args, original, result.fused_graph_def, registry)
    return 0


def _int_range(text: str) -> tuple[int, int]:
    try:
        lo, hi = (int(v) for v in text.split(","))
    except ValueError:
        raise ScopeFusionError(f"--int-range must be LO,HI, not {text!r}") from None
    if hi <= lo:
        raise ScopeFusionError(f"--int-range {text!r}: HI must be greater than LO")
    return lo, hi


def _verify_and_print(args: argparse.Namespace, original: Any, fused: Any, registry: Any) -> int:
    from .console import print_verification
    from .core.verify.verify import verify

    with native_stderr_quiet(not args.debug):  # sessions start here: no CUDA notices
        result = verify(
            original, fused, input_shapes=args.input_shape or None, outputs=args.verify_outputs or None,
            runs=args.runs, seed=args.seed, atol=args.atol, rtol=args.rtol, int_range=_int_range(args.int_range),
            feeds=args.feeds, fused_ops=registry.fused_ops,
        )
    for note in result.notes:
        print(note, file=sys.stderr)
    print_verification(result)
    if result.passed:
        return 0
    print(f"scopefusion: verification failed: {len(result.failures)} of {len(result.outputs)} output(s) differ",
          file=sys.stderr)
    return 1


def cmd_verify(args: argparse.Namespace) -> int:
    from .core.graph.io import load_model

    registry = _registry(args)
    for line in registry.errors:
        print(f"scopefusion: error: {line}", file=sys.stderr)
    return _verify_and_print(args, load_model(args.original), load_model(args.fused), registry)


def cmd_new_plugin(args: argparse.Namespace) -> int:
    from .scaffold import new_plugin

    root = new_plugin(args.name, args.dir)
    print(f"wrote {root}: pip install {root} && python -m pytest {root / 'tests'}")
    return 0


# ------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    handler = {"run": cmd_run, "list": cmd_list, "verify": cmd_verify, "new-plugin": cmd_new_plugin}[args.command]
    try:
        if args.command in ("run", "verify") and not args.debug:
            import_tensorflow_quietly()
        return handler(args)
    except ScopeFusionError as exc:
        if args.debug:
            raise
        print(f"scopefusion: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("scopefusion: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (| head): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:  # an unexpected failure: still one line unless --debug
        if args.debug:
            raise
        print(f"scopefusion: error: {type(exc).__name__}: {' '.join(str(exc).split())} "
              "(run with --debug for a traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
