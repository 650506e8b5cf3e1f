"""Typed option values written back in the options' own syntax, for tables
and for handing them on as text."""
from __future__ import annotations

import json
from typing import Any

NOT_SET = "not set"
_JOINERS = {
    "dump_step": "|",
    "input_shape": ";",
    "dynamic_inputs_shape_range": ";",
    "local_device_list": ",",
    "auto_tune_mode": ",",
    "enable_scope_fusion_passes": ",",
    "optypelist_for_implmode": ",",
}
_EMPTY = {"dump_step": "every step"}


def render_value(name: str, value: Any) -> str:
    """``value`` of option ``name`` as the option's syntax writes it
    (``"0|5|10-20"``, ``"data:1,-1"``, ...); ``"not set"`` when it has none."""
    if value is None:
        return NOT_SET
    if isinstance(value, tuple) and not value:
        return _EMPTY.get(name, NOT_SET)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    if name == "dynamic_dims":
        return ";".join(",".join(map(str, gear)) for gear in value)
    if name == "stream_max_parallel_num":
        return ",".join(f"{engine}:{count}" for engine, count in value)
    if name == "in_out_pair":
        return str([[list(pair.inputs), list(pair.outputs)] for pair in value])
    if isinstance(value, tuple):
        return _JOINERS.get(name, ",").join(map(str, value))
    return str(value)
