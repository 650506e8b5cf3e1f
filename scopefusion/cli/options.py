"""The command line's own checks, made before any work (before TensorFlow is
imported and the model loaded), and the translation of the Python API's
parameter errors into the names of the options that fed them."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from ..core.errors import OptionError
from ..core.fusion.options import parse_pass_list
from ..core.graph.io import GRAPH_FORMATS, GRAPH_SUFFIXES, allowed_extensions, default_output_path
from ..core.graph.output_paths import STDOUT, OutputTarget, resolve_output
from ..core.parameters import ParameterError
from ..core.verify.feeds import parse_input_shapes
from ..core.verify.verify import check_verify_parameters
from ..plugins.blocked import BlockedPassError
from ..plugins.registry import ALLOW_ENV, BLOCK_ENV, NO_AUTOLOAD_ENV, PluginInfo, normalise_distribution

#: API parameter -> option, per API call.
FUSE_OPTIONS = {"enable_scope_fusion_passes": "--enable_scope_fusion_passes", "outputs": "--outputs",
                "emit": "--emit", "signature": "--signature", "fusion_switch_file": "--fusion_switch_file",
                "pass_timeout": "--pass-timeout", "input_shapes": "--input_shape", "config": "--config",
                "session_options": "--config"}
VERIFY_OPTIONS = {"input_shapes": "--verify-shape", "outputs": "--verify-outputs", "runs": "--runs",
                  "seed": "--seed", "atol": "--atol", "rtol": "--rtol", "int_range": "--int-range",
                  "feeds": "--feeds"}
#: What left a plugin out, as the command line spells it.
BLOCK_WORDING = {"block list": "--block-plugin", "allow list": "--only-plugins", NO_AUTOLOAD_ENV: NO_AUTOLOAD_ENV}


@contextlib.contextmanager
def option_names(options: Mapping[str, str]) -> Iterator[None]:
    """Re-raise the API's parameter errors of the block naming the options in ``options``."""
    try:
        yield
    except ParameterError as exc:
        raise exc.for_option(options.get(exc.parameter, exc.parameter)) from exc
    except BlockedPassError as exc:
        raise OptionError(exc.describe(BLOCK_WORDING)) from exc


def enabled_passes(values: list[str]) -> list[str]:
    """Every ``--enable_scope_fusion_passes`` given (the option is repeatable), in order."""
    return parse_pass_list([name for value in values for name in parse_pass_list(value)])


# -------------------------------------------------------------- verification
def parse_int_range(text: str) -> tuple[int, int]:
    try:
        lo, hi = (int(v) for v in text.split(","))
    except ValueError:
        raise OptionError(f"--int-range must be LO,HI (two integers), not {text!r}") from None
    return lo, hi


def check_verify_options(args: argparse.Namespace) -> tuple[int, int]:
    """Check the verification options' values; return the integer range."""
    int_range = parse_int_range(args.int_range)
    with option_names(VERIFY_OPTIONS):
        check_verify_parameters(runs=args.runs, atol=args.atol, rtol=args.rtol, int_range=int_range)
        parse_input_shapes(args.verify_shape or None)
    if getattr(args, "input_shape", ""):
        with option_names({"input_shapes": "--input_shape"}):
            parse_input_shapes(args.input_shape)
    if args.feeds and not Path(args.feeds).is_file():
        raise OptionError(f"--feeds {args.feeds}: no such file (an .npz file whose keys are input names)")
    return int_range


# ------------------------------------------------------------------- outputs
@dataclass(frozen=True)
class RunOutputs:
    """Where ``run`` writes: the fused graph (and its format) and the report."""

    graph: OutputTarget
    fmt: str
    report: OutputTarget | None
    html: OutputTarget | None = None

    @property
    def uses_stdout(self) -> bool:
        return any(t is not None and t.is_stdout for t in (self.graph, self.report, self.html))


def output_format(given: str, chosen: str | None) -> str:
    """The format of the fused graph: ``--output-format``, else the extension's."""
    suffix = Path(given).suffix.lower()
    by_suffix = None if given == STDOUT else GRAPH_SUFFIXES.get(suffix)
    if chosen is not None:
        if by_suffix is not None and by_suffix != chosen:
            raise OptionError(f"-o {given}: the extension {suffix} means {by_suffix}, but --output-format is "
                              f"{chosen}")
        return chosen
    if given == STDOUT:
        if sys.stdout.isatty():
            raise OptionError("-o -: refusing to write a binary GraphDef to a terminal; redirect standard output "
                              "(-o - > fused.pb), write a file (-o fused.pbtxt), or use --output-format pbtxt")
        return "pb"
    if by_suffix is None:
        raise OptionError(f"-o {given}: unknown extension {suffix or '(none)'!r}; the fused graph is written to "
                          f"{allowed_extensions()}, or use --output-format {'|'.join(GRAPH_FORMATS)} to choose")
    return by_suffix


def check_run_outputs(args: argparse.Namespace, model: Path) -> RunOutputs:
    """Check ``-o`` (default ``<model>_fused<ext>`` in the current directory), ``--report`` and
    ``--html`` before any work."""
    given = args.output or str(default_output_path(model, Path.cwd()))
    html_given = getattr(args, "html", None)
    on_stdout = [option for option, value in (("-o", given), ("--report", args.report), ("--html", html_given))
                 if value == STDOUT]
    if len(on_stdout) > 1:
        raise OptionError(f"{' and '.join(o + ' -' for o in on_stdout)}: only one of them can go to standard "
                          "output")
    graph = resolve_output(given, "output")
    fmt = output_format(given, args.output_format)
    report = resolve_output(args.report, "report") if args.report else None
    html = resolve_output(html_given, "HTML page") if html_given else None
    _refuse_input(model, {"fused graph": graph, "report": report, "HTML page": html})
    return RunOutputs(graph, fmt, report, html)


def _refuse_input(model: Path, targets: Mapping[str, OutputTarget | None]) -> None:
    """Nothing written may be (or lie inside) the input model; the outputs must differ."""
    model_real = Path(os.path.realpath(model))
    seen: dict[Path, str] = {}
    for what, target in targets.items():
        if target is None or target.path is None:
            continue
        inside = model.is_dir() and model_real in target.path.parents
        if target.path == model_real or inside:
            where = " (it lies inside the SavedModel directory)" if inside else ""
            raise OptionError(f"{target.given}: refusing to overwrite the input model{where}")
        if target.path in seen:
            raise OptionError(f"{target.given}: the {what} and the {seen[target.path]} cannot go to the same "
                                   "file")
        seen[target.path] = what


# ------------------------------------------------------------------- plugins
def plugin_name_warnings(plugins: Sequence[PluginInfo], block: list[str], only: list[str] | None) -> list[str]:
    """Names in the block and allow lists (options or environment) that match none of ``plugins``."""
    found = {n for p in plugins for n in (p.name, normalise_distribution(p.distribution))}
    sources = [("--block-plugin", block), (BLOCK_ENV, parse_pass_list(os.environ.get(BLOCK_ENV, "")))]
    sources.append(("--only-plugins", only) if only is not None else
                   (ALLOW_ENV, parse_pass_list(os.environ.get(ALLOW_ENV, ""))))
    return [f"{source} {name}: no installed plugin has that entry-point or distribution name"
            for source, names in sources for name in names
            if name not in found and normalise_distribution(name) not in found]
