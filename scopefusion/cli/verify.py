"""Verification as ``scopefusion run --verify`` and ``scopefusion verify`` do it: once, or once
per gear of the session configuration's ``dynamic_dims`` (each gear's concrete input shapes)."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from .options import VERIFY_OPTIONS, option_names
from ..core.native_output import native_stderr_quiet
from ..core.partition.segments import tf_calls
from ..core.partition.request import session_options
from ..core.options.gears import PLACEHOLDER_INPUTS, gear_shapes, shape_spec
from ..core.verify.verify import verify
from .console import print_verification


def verification_shapes(args: argparse.Namespace) -> list[str | None]:
    """The input shapes of each verification run: ``--verify-shape`` if given, else ``run``'s declared
    ``--input_shape``, else one per gear of the configuration's ``dynamic_dims`` (placeholder inputs),
    else one run on the graph's shapes."""
    if args.verify_shape or getattr(args, "input_shape", ""):
        return [args.verify_shape or args.input_shape]
    config = getattr(args, "config", None)
    if config:
        session = session_options(config)
        if session.dynamic_node_type == PLACEHOLDER_INPUTS and session.dynamic_dims:
            return [shape_spec(gear) for gear in gear_shapes(session)]
    return [None]


def run_verification(args: argparse.Namespace, original: Any, fused: Any, registry: Any,
                     int_range: tuple[int, int], shapes: str | None,
                     progress: Callable[[str], None] | None = None) -> Any:
    called = tf_calls(getattr(fused, "graph_def", fused))  # a mixed run's output: run each segment's function
    if called is not None:
        fused = called
    if progress is not None:
        progress("verifying: starting sessions")
    with native_stderr_quiet(not args.debug), option_names(VERIFY_OPTIONS):  # sessions start here
        return verify(
            original, fused, input_shapes=shapes or None, outputs=args.verify_outputs or None,
            runs=args.runs, seed=args.seed, atol=args.atol, rtol=args.rtol, int_range=int_range,
            feeds=args.feeds, fused_ops=registry.fused_ops, progress=progress,
        )


def verify_all(args: argparse.Namespace, original: Any, fused: Any, registry: Any, int_range: tuple[int, int],
               progress: Callable[[str], None] | None = None) -> list[tuple[str | None, Any]]:
    """``(gear label, result)`` per verification run (label None for a single run)."""
    shapes = verification_shapes(args)
    if len(shapes) == 1:
        return [(None, run_verification(args, original, fused, registry, int_range, shapes[0], progress))]
    return [(f"gear {k} of {len(shapes)}: {spec}",
             run_verification(args, original, fused, registry, int_range, spec, progress))
            for k, spec in enumerate(shapes, 1)]


def print_verifications(results: list[tuple[str | None, Any]], out: Any = None) -> int:
    """Print each run's table; 0 when every run passed, else 1."""
    failed = 0
    for label, result in results:
        for note in result.notes:
            print(note, file=sys.stderr)
        print_verification(result, out, title=label)
        if not result.passed:
            failed += 1
            where = f" ({label})" if label else ""
            print(f"scopefusion: verification failed{where}: {len(result.failures)} of {len(result.outputs)} "
                  "output(s) differ", file=sys.stderr)
    return 1 if failed else 0
