"""``scopefusion explain MODEL SCOPE_OR_NODE [--pass NAME]``: every pass's verdict on one place,
feature by feature for scope passes, the failing step for graph passes, and what was produced."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..core.fusion.options import parse_pass_list
from ..core.graph.io import check_model_path
from ..core.graph_fusion.switch import FusionSwitch
from ..core.scope.patterns import found_text
from ..core.native_output import import_tensorflow_quietly, native_stderr_quiet
from ..explain.explanation import Explanation, PassVerdict, explain
from ..plugins.registry import load_registry
from .progress import Progress

#: Scope patterns shown per pass without -v: those that hold, else those missing the fewest features.
PATTERNS_SHOWN = 2


def add_explain_parser(sub: Any) -> argparse.ArgumentParser:
    parser = sub.add_parser("explain", help="every pass's verdict on one scope or node",
                            description="Fuse MODEL with every pass on and say what each pass makes of "
                            "SCOPE_OR_NODE: fused, refused (why), dropped (to what), a near miss or no match; scope "
                            "passes' patterns feature by feature, graph passes' patterns at its nodes, and the fused "
                            "op produced there. Writes nothing.")
    parser.add_argument("model", help="a .pb / .pbtxt GraphDef or a SavedModel directory")
    parser.add_argument("place", metavar="SCOPE_OR_NODE", help="a scope (e.g. encoder/LayerNorm) or node name")
    parser.add_argument("--pass", dest="pass_name", metavar="NAME", help="only this pass")
    parser.add_argument("--signature", default=None, help="SavedModel signature to freeze")
    parser.add_argument("--fusion_switch_file", "--fusion-switch-file", dest="fusion_switch_file", default=None,
                        metavar="FILE", help="show graph passes' default state as this switch file leaves them")
    parser.add_argument("-v", "--verbose", action="store_true", help="every pattern of every scope pass")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def cmd_explain(args: argparse.Namespace) -> int:
    model = Path(args.model)
    kind = check_model_path(model)
    switch = FusionSwitch.load(args.fusion_switch_file) if args.fusion_switch_file else None
    only = parse_pass_list(args.only_plugins) if args.only_plugins is not None else None
    block = [n for value in args.block_plugins for n in parse_pass_list(value)]
    with Progress() as progress, native_stderr_quiet(not args.debug):  # progress: on a terminal only
        progress.update(f"loading {model.name}")
        registry = load_registry(block=block, only=only)
        if not args.debug and kind == "saved_model":  # freezing needs TensorFlow; a graph file does not
            import_tensorflow_quietly()
        progress.update(f"explaining {args.place!r}: fusing with every pass on, then checking each pass")
        result = explain(model, args.place, pass_name=args.pass_name, registry=registry,
                         signature=args.signature, switch=switch)
    if args.json:
        print(json.dumps(asdict(result), indent=2))
    else:
        print_explanation(result, args.verbose)
    return 0


def print_explanation(result: Explanation, verbose: bool = False, out: Any = None) -> None:
    """The verdicts first (one line per pass that fused, refused or came close; the passes that found
    nothing counted), then the details of each of those passes (of every pass with ``verbose``)."""
    out = out or sys.stdout
    where = f" (in scope {result.scope!r})" if result.kind == "node" and result.scope else ""
    print(f"{result.kind} {result.place!r}{where}: {len(result.verdicts)} pass(es)", file=out)
    telling = [v for v in result.verdicts if v.verdict != "no match"]
    for v in telling:
        print(f"  {v.verdict}: {v.name}" + (f": {v.reason}" if v.reason else ""), file=out)
    quiet = len(result.verdicts) - len(telling)
    if quiet:
        names = ", ".join(v.name for v in result.verdicts if v.verdict == "no match")
        print(f"  no match: {quiet} pass(es)" + (f" ({names})" if verbose else " (-v shows why)"), file=out)
    for v in result.verdicts if verbose else telling:
        print(file=out)
        print(f"{v.name} ({v.engine} pass, {v.default}): {v.verdict}" + (f": {v.reason}" if v.reason else ""),
              file=out)
        if v.engine == "scope":
            _print_patterns(v, verbose, out)
        for a in v.attempts:
            what = "matches" if not a.failure else f"fails: {a.failure}"
            at = "" if a.node == "-" else f" at {a.node!r}"
            print(f"  pattern {a.pattern}{at} {what}" if a.node != "-" else f"  pattern {a.pattern}: {a.failure}",
                  file=out)
        for p in v.produced:
            verb = "produces" if v.verdict == "fused" else "would produce"
            print(f"  {verb} {p.type} {p.name!r}", file=out)
            if p.attrs:
                print("    attributes: " + ", ".join(f"{k}={val}" for k, val in p.attrs.items()), file=out)
            for k, tensor in enumerate(p.inputs):
                print(f"    input {k}: {tensor}", file=out)
            for k, tensors in enumerate(p.outputs):
                print(f"    output {k}: replaces {tensors}", file=out)


def _print_patterns(v: PassVerdict, verbose: bool, out: Any) -> None:
    checks = v.patterns
    if not checks:
        return
    holding = [c for c in checks if c.holds]
    shown = checks if verbose else holding or sorted(
        checks, key=lambda c: (not c.can_match, sum(not f.ok for f in c.features)))[:PATTERNS_SHOWN]
    for c in shown:
        state = "holds" if c.holds else ("cannot match this scope (the root, or it holds a return node)"
                                         if not c.can_match else
                                         f"{sum(not f.ok for f in c.features)} of {len(c.features)} feature(s) miss")
        print(f"  pattern {c.label} ({c.where}): {state}", file=out)
        for f in c.features:
            print(f"    [{'x' if f.ok else ' '}] wanted {f.wanted}; {found_text(f.found)}", file=out)
    if len(shown) < len(checks):
        print(f"  ({len(checks) - len(shown)} more pattern(s): -v shows all)", file=out)
