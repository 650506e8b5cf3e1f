"""The ``profiling_options`` option: a JSON object of profiler settings.

The reference passes the text on unread.  Here it must be a JSON object
whose documented keys have documented values; keys the documentation does
not list (newer profilers add some) are kept as they are.
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
                    f'"aic_metrics": one of {", ".join(AIC_METRICS)}}}; training_trace may only be "on"')


def parse_profiling_options(text: str) -> dict[str, Any]:
    """The profiler settings of ``profiling_options``."""
    settings = parse_json_object(text)
    for key, value in settings.items():
        if key not in PROFILING_KEYS:
            continue
        if not isinstance(value, str):
            raise ValueProblem(f"gives {key!r} the JSON {type(value).__name__} {value!r}, not a string")
        allowed = PROFILING_KEYS[key]
        if allowed is None:
            if not value.strip():
                raise ValueProblem(f"gives {key!r} an empty string")
        elif value not in allowed:
            raise ValueProblem(f"gives {key!r} the value {value!r}, not {' or '.join(allowed)}")
    return settings
