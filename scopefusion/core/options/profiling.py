"""The ``profiling_options`` option: a JSON object of profiler settings.

The reference passes the text on unread.  Here it must be a JSON object
whose documented keys have documented values; keys the documentation does
not list (newer profilers add some) are kept as they are.  As the seed reads
them, a ``task_trace`` or ``aicpu`` value other than on/off counts as off (with
a warning, :func:`profiling_warnings`), and ``training_trace`` can only be
"on" (the rule that it needs ``fp_point``, ``bp_point`` and training is in
:mod:`.rules`).
"""
from __future__ import annotations

from typing import Any

from .errors import ValueProblem
from .syntax import parse_json_object

ON_OFF = ("on", "off")
AIC_METRICS = ("ArithmeticUtilization", "PipeUtilization", "Memory", "MemoryL0", "ResourceConflictRatio")
#: Documented keys and the values each may take (``None``: any text).
PROFILING_KEYS: dict[str, tuple[str, ...] | None] = {
    "output": None,
    "training_trace": ("on",),
    "task_trace": ON_OFF,
    "aicpu": ON_OFF,
    "fp_point": None,
    "bp_point": None,
    "aic_metrics": AIC_METRICS,
}
PROFILING_SYNTAX = ('a JSON object such as {"output": "/tmp/profiling", "training_trace": "on", '
                    '"task_trace": "on", "aicpu": "on", "fp_point": "...", "bp_point": "...", '
                    f'"aic_metrics": one of {", ".join(AIC_METRICS)}}}; training_trace may only be "on" and needs '
                    'fp_point, bp_point and training (graph_run_mode 1); task_trace and aicpu other than on/off '
                    'count as off')
#: Keys whose values other than on/off count as off.
OFF_UNLESS_ON_OFF = ("task_trace", "aicpu")


def parse_profiling_options(text: str) -> dict[str, Any]:
    """The profiler settings of ``profiling_options``."""
    settings = parse_json_object(text)
    for key, value in settings.items():
        if key not in PROFILING_KEYS or key in OFF_UNLESS_ON_OFF:
            continue
        if not isinstance(value, str):
            raise ValueProblem(f"gives {key!r} the JSON {type(value).__name__} {value!r}, not a string")
        allowed = PROFILING_KEYS[key]
        if allowed is None:
            if not value.strip():
                raise ValueProblem(f"gives {key!r} an empty string")
        elif value not in allowed:
            raise ValueProblem(f"gives {key!r} the value {value!r}, not {' or '.join(allowed)}")
    for key in OFF_UNLESS_ON_OFF:
        if key in settings and settings[key] not in ON_OFF:
            settings[key] = "off"
    return settings


def profiling_warnings(text: str) -> list[str]:
    """The values of ``text`` that count as off although they are not "off" (text already parsed
    by :func:`parse_profiling_options`)."""
    settings = parse_json_object(text)
    return [f"NpuOptimizer option profiling_options: {key!r} is {settings[key]!r}, not on or off; counted as off"
            for key in OFF_UNLESS_ON_OFF if key in settings and settings[key] not in ON_OFF]
