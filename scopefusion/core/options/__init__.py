"""NpuOptimizer session options: the configuration users of TensorFlow's own
sessions give in a ``ConfigProto`` (a ``custom_optimizers`` entry named
``NpuOptimizer`` and its ``parameter_map``), read and validated into one typed
:class:`NpuOptions`.

The reference ignores unknown keys and wrong value kinds and aborts the
process on most bad values; here each of those is one
:class:`SessionOptionError` naming the option, what was given and what is
allowed.
"""
from __future__ import annotations

from .errors import OPTIMIZER_NAME, SessionOptionError
from .in_out_pair import InOutPair, parse_in_out_pair
from .options import NpuOptions, build_npu_options, check_known, npu_options
from .profiling import parse_profiling_options
from .reader import (
    config_proto_class,
    load_config_proto,
    npu_optimizer_params,
    npu_options_from_config,
    parse_config_proto,
    read_npu_options,
)
from .render import render_value
from .rules import RULES, check_directory
from .spec import OptionSpec, RawValue
from .syntax import (
    DimRange,
    InputShape,
    ShapeRangeInput,
    StepRange,
    parse_dump_step,
    parse_dynamic_dims,
    parse_input_shape,
    parse_shape_ranges,
)
from .table import ACTED_ON, OPTION_BY_NAME, OPTION_NAMES, OPTIONS, SESSION_ONLY

__all__ = [
    "ACTED_ON",
    "OPTIMIZER_NAME",
    "OPTIONS",
    "OPTION_BY_NAME",
    "OPTION_NAMES",
    "RULES",
    "SESSION_ONLY",
    "DimRange",
    "InOutPair",
    "InputShape",
    "NpuOptions",
    "OptionSpec",
    "RawValue",
    "SessionOptionError",
    "ShapeRangeInput",
    "StepRange",
    "build_npu_options",
    "check_directory",
    "check_known",
    "config_proto_class",
    "load_config_proto",
    "npu_optimizer_params",
    "npu_options",
    "npu_options_from_config",
    "parse_config_proto",
    "parse_dump_step",
    "parse_dynamic_dims",
    "parse_in_out_pair",
    "parse_input_shape",
    "parse_profiling_options",
    "parse_shape_ranges",
    "read_npu_options",
    "render_value",
]
