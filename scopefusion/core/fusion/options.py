"""Options of a fusion run and the parsing of ``enable_scope_fusion_passes``."""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Iterable, Sequence, Union

from ..errors import OptionError
from ..parameters import ParameterError

PassList = Union[str, Sequence[str], None]

EMIT_FORMS = ("fused", "tf")
#: Seconds a pass may run, unless told otherwise: far beyond what any pass takes on the largest
#: graphs (a 200k-node graph fuses in seconds), short enough that a pass that never returns does
#: not hang a run.
DEFAULT_PASS_TIMEOUT = 600.0


def parse_pass_list(value: PassList) -> list[str]:
    """Comma-separated names (or a sequence): whitespace trimmed, blanks skipped,
    duplicates dropped, order kept."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        name = str(item).strip()
        if name and name not in out:
            out.append(name)
    return out


def check_pass_names(names: Iterable[str], known: Sequence[str], what: str = "pass") -> None:
    """Raise :class:`OptionError` for names that are not in ``known``, with close matches."""
    problems = []
    for name in names:
        if name in known:
            continue
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        lowered = [k for k in known if k.lower() == name.lower()]
        hint = lowered or close
        problems.append(
            f"unknown {what} {name!r}" + (f" (did you mean {', '.join(repr(h) for h in hint)}?)" if hint else "")
        )
    if problems:
        raise OptionError("; ".join(problems) + f"; known: {', '.join(known) or 'none'}")


@dataclass
class FusionOptions:
    """Everything that steers one fusion run."""

    enable_scope_fusion_passes: list[str] = field(default_factory=list)
    emit: str = "fused"
    outputs: list[str] = field(default_factory=list)
    strict: bool = False
    #: A fusion switch file (JSON or ``Name:on|off`` lines) turning graph passes on or off.
    fusion_switch_file: str | None = None
    #: Seconds a pass may run before it is stopped and reported (``math.inf``: no limit; None: the
    #: default of :data:`DEFAULT_PASS_TIMEOUT`).
    pass_timeout: float | None = None
    #: Names of the only nodes fusion may touch (a back end's device segments); None: all.
    fusible_nodes: frozenset[str] | None = None
    #: Re-index the whole output graph; otherwise only what the rewrite touched
    #: is checked (acyclicity is established before rewriting).
    validate_output: bool = False
    #: The graph is trained (a session's ``graph_run_mode`` 1): graph passes whose class sets
    #: ``training_safe = False`` (such as batch-norm folding) are skipped and reported.
    training: bool = False
    #: Record in the report the place of every fused op, refusal and near miss (the nodes as
    #: their stage saw them, capped): what drawings of the run need.
    keep_places: bool = False

    def __post_init__(self) -> None:
        self.enable_scope_fusion_passes = parse_pass_list(self.enable_scope_fusion_passes)
        if self.emit not in EMIT_FORMS:
            raise OptionError(f"--emit must be one of {', '.join(EMIT_FORMS)}, not {self.emit!r}")
        self.outputs = parse_pass_list(self.outputs)
        if self.pass_timeout is None:
            self.pass_timeout = DEFAULT_PASS_TIMEOUT
        if not isinstance(self.pass_timeout, (int, float)) or isinstance(self.pass_timeout, bool) \
                or not self.pass_timeout > 0:
            raise ParameterError("pass_timeout", f"must be a positive number of seconds (math.inf: no limit), "
                                 f"not {str(self.pass_timeout)[:80]!r}")
