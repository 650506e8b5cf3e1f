"""The string syntaxes of the NpuOptimizer options, parsed into typed values.

Each parser takes the option's text and returns a typed value, or raises
:class:`ValueProblem` saying what exactly is wrong; the option table turns
that into the one-line error naming the option and what it allows.

Separators follow the reference: a ';' list may end with one ';' (the
reference splits it line-reader style, so ``"a:1;"`` has one item), the
other lists may not, and an empty item is an error.  Whitespace around items
and numbers is trimmed.
"""
from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from .errors import ValueProblem

MAX_DUMP_STEPS = 100
MAX_MEMORY_BYTES = 256 * 1024 ** 3
SHAPE_RANGE_KINDS = ("data", "getnext")

_DIGITS = re.compile(r"[0-9]+")
_STEP = re.compile(r"([0-9]+)(?:\s*-\s*([0-9]+))?")
_ENGINE = re.compile(r"[A-Za-z0-9_]+")
_DIM_RANGE = re.compile(r"([0-9]+)\s*~\s*([0-9]+)")


# ------------------------------------------------------------ typed values

class StepRange(NamedTuple):
    """Dump steps ``first`` to ``last``, both included (one step: equal)."""

    first: int
    last: int

    def __str__(self) -> str:
        return str(self.first) if self.first == self.last else f"{self.first}-{self.last}"


class InputShape(NamedTuple):
    """One ``name:d1,d2`` item of ``input_shape``; -1 is a dynamic dimension,
    an empty ``dims`` a scalar (written ``name:0``)."""

    name: str
    dims: tuple[int, ...]

    @property
    def dynamic_count(self) -> int:
        """How many dimensions are dynamic (-1): each gear gives that many values."""
        return sum(1 for d in self.dims if d == -1)

    def __str__(self) -> str:
        return f"{self.name}:{','.join(map(str, self.dims)) if self.dims else '0'}"


class DimRange(NamedTuple):
    """One dimension of a shape range: ``low``..``high``; ``None`` is no bound."""

    low: int | None
    high: int | None

    def __str__(self) -> str:
        if self.low is None and self.high is None:
            return "-1"
        return str(self.low) if self.low == self.high else f"{self.low}~{self.high}"


class ShapeRangeInput(NamedTuple):
    """The shape ranges of the ``data`` (placeholder) or ``getnext`` (dataset)
    inputs, one shape per input in order."""

    kind: str
    shapes: tuple[tuple[DimRange, ...], ...]

    def __str__(self) -> str:
        shapes = ",".join("[" + ",".join(map(str, shape)) + "]" for shape in self.shapes)
        return f"{self.kind}:{shapes}"


# ---------------------------------------------------------------- helpers

def split_items(text: str, sep: str, what: str, *, trailing: bool = False) -> list[str]:
    """``text`` split at ``sep`` and trimmed; an empty item is a problem, except
    after a trailing separator when ``trailing`` allows one."""
    items = [item.strip() for item in text.split(sep)]
    if trailing and len(items) > 1 and items[-1] == "":
        items.pop()
    for number, item in enumerate(items, 1):
        if item == "":
            raise ValueProblem(f"has an empty {what} (number {number})")
    return items


def _natural(text: str, where: str) -> int:
    if not _DIGITS.fullmatch(text):
        raise ValueProblem(f"has {text!r} {where}, which is not a whole number")
    return int(text)


# ---------------------------------------------------------------- parsers

def parse_dump_step(text: str) -> tuple[StepRange, ...]:
    """``"0|5|10-20"`` -> steps 0, 5 and 10 to 20; at most 100 items."""
    steps = []
    items = split_items(text, "|", "step")
    if len(items) > MAX_DUMP_STEPS:
        raise ValueProblem(f"has {len(items)} items, more than {MAX_DUMP_STEPS}")
    for item in items:
        match = _STEP.fullmatch(item)
        if match is None:
            raise ValueProblem(f"has the item {item!r}, which is neither a step N nor a range N-M")
        first = int(match.group(1))
        last = first if match.group(2) is None else int(match.group(2))
        if match.group(2) is not None and first >= last:
            raise ValueProblem(f"has the range {item!r}, whose first step is not below its last")
        steps.append(StepRange(first, last))
    return tuple(steps)


def parse_input_shape(text: str) -> tuple[InputShape, ...]:
    """``"data:1,-1;label:1"`` -> one :class:`InputShape` per input."""
    shapes: list[InputShape] = []
    for item in split_items(text, ";", "input", trailing=True):
        name, sep, dims_text = item.rpartition(":")
        name = name.strip()
        if not sep or not name:
            raise ValueProblem(f"has the item {item!r}, which is not name:d1,d2,...")
        if any(s.name == name for s in shapes):
            raise ValueProblem(f"gives the input {name!r} twice")
        if not dims_text.strip():
            raise ValueProblem(f"gives no dimension in {item!r} (a scalar is written name:0)")
        dims = []
        for dim in (d.strip() for d in dims_text.split(",")):
            if dim == "-1":
                dims.append(-1)
            elif _DIGITS.fullmatch(dim):
                dims.append(int(dim))
            else:
                raise ValueProblem(f"has the dimension {dim!r} in {item!r}; a dimension is a whole number "
                                   "or -1 (dynamic)")
        shapes.append(InputShape(name, () if dims == [0] else tuple(dims)))
    return tuple(shapes)


def parse_dynamic_dims(text: str) -> tuple[tuple[int, ...], ...]:
    """``"20,20;40,40"`` -> gears ``(20, 20)`` and ``(40, 40)``, all of one length, at least two
    of them (the seed: "the gears must be more than one group")."""
    gears: list[tuple[int, ...]] = []
    for number, item in enumerate(split_items(text, ";", "gear", trailing=True), 1):
        gear = tuple(_natural(v.strip(), f"in gear {number}") for v in item.split(","))
        if gears and len(gear) != len(gears[0]):
            raise ValueProblem(f"has {len(gear)} value(s) in gear {number} but {len(gears[0])} in gear 1")
        gears.append(gear)
    if len(gears) < 2:
        raise ValueProblem("has a single gear; dynamic gears need at least two")
    return tuple(gears)


def _dim_range(text: str, kind: str) -> DimRange:
    if text == "-1":
        return DimRange(None, None)
    if _DIGITS.fullmatch(text):
        return DimRange(int(text), int(text))
    match = _DIM_RANGE.fullmatch(text)
    if match is None:
        raise ValueProblem(f"has the dimension {text!r} in {kind}; a dimension is N, LOW~HIGH or -1")
    low, high = int(match.group(1)), int(match.group(2))
    if low > high:
        raise ValueProblem(f"has the range {text!r} in {kind}, whose low end is above its high end")
    return DimRange(low, high)


def _shapes(text: str, kind: str) -> tuple[tuple[DimRange, ...], ...]:
    shapes = []
    rest = text.strip()
    while rest:
        if not rest.startswith("[") or "]" not in rest:
            raise ValueProblem(f"has {rest!r} in {kind}, which is not a shape [d1,d2,...]")
        inside, rest = rest[1:].split("]", 1)
        if "[" in inside:
            raise ValueProblem(f"has a nested '[' in {kind}")
        dims = [d.strip() for d in inside.split(",")] if inside.strip() else []
        shapes.append(tuple(_dim_range(d, kind) for d in dims))
        rest = rest.strip()
        if rest:
            if not rest.startswith(","):
                raise ValueProblem(f"has {rest!r} after a shape in {kind}; shapes are separated by ','")
            rest = rest[1:].strip()
            if not rest:
                raise ValueProblem(f"ends {kind} with ','")
    if not shapes:
        raise ValueProblem(f"gives no shape for {kind}")
    return tuple(shapes)


def parse_shape_ranges(text: str) -> tuple[ShapeRangeInput, ...]:
    """``"getnext:[1~4,3];data:[-1]"`` -> the shape ranges of at most two input
    kinds, each named once."""
    inputs: list[ShapeRangeInput] = []
    items = split_items(text, ";", "input kind", trailing=True)
    if len(items) > len(SHAPE_RANGE_KINDS):
        raise ValueProblem(f"has {len(items)} input kinds, more than {len(SHAPE_RANGE_KINDS)}")
    for item in items:
        if item.count(":") != 1:
            raise ValueProblem(f"has the item {item!r}, which is not kind:[shape],[shape]...")
        kind, shapes = (part.strip() for part in item.split(":"))
        if kind not in SHAPE_RANGE_KINDS:
            raise ValueProblem(f"names the input kind {kind!r}")
        if any(i.kind == kind for i in inputs):
            raise ValueProblem(f"gives {kind!r} twice")
        inputs.append(ShapeRangeInput(kind, _shapes(shapes, kind)))
    return tuple(inputs)


def parse_device_list(text: str) -> tuple[int, ...]:
    """``"0,1,3"`` -> device ids, each listed once."""
    devices: list[int] = []
    for item in split_items(text, ",", "device"):
        device = _natural(item, "as a device")
        if device in devices:
            raise ValueProblem(f"lists device {device} twice")
        devices.append(device)
    return tuple(devices)


def parse_name_list(text: str) -> tuple[str, ...]:
    """``"A, B,,A"`` -> ``("A", "B")``: trimmed, blanks skipped, repeats dropped."""
    names: list[str] = []
    for item in text.split(","):
        name = item.strip()
        if name and name not in names:
            names.append(name)
    return tuple(names)


#: The engines whose parallelism the seed bounds: name -> (which engine, the most streams).
ENGINE_LIMITS = {"DNN_VM_TF": ("AICPU", 13), "DNN_V100": ("AICORE", 3)}


def parse_engine_parallelism(text: str) -> tuple[tuple[str, int], ...]:
    """``"DNN_VM_TF:10,DNN_V100:1"`` -> ``(("DNN_VM_TF", 10), ("DNN_V100", 1))``."""
    pairs: list[tuple[str, int]] = []
    for item in split_items(text, ",", "engine"):
        engine, sep, count = (part.strip() for part in item.partition(":"))
        if not sep or not _ENGINE.fullmatch(engine):
            raise ValueProblem(f"has the item {item!r}, which is not ENGINE:N")
        number = _natural(count, f"for {engine}")
        if number < 1:
            raise ValueProblem(f"gives {engine} {number} streams; at least 1 is needed")
        if any(e == engine for e, _ in pairs):
            raise ValueProblem(f"gives {engine} twice")
        limit = ENGINE_LIMITS.get(engine)
        if limit is not None and number > limit[1]:
            raise ValueProblem(f"gives {engine} ({limit[0]}) {number} streams; at most {limit[1]}")
        pairs.append((engine, number))
    return tuple(pairs)


def parse_byte_size(text: str) -> int:
    """A size in bytes, ``"0"`` to 256 GiB."""
    size = _natural(text.strip(), "as the size")
    if size > MAX_MEMORY_BYTES:
        raise ValueProblem(f"is above the maximum of {MAX_MEMORY_BYTES} bytes (256 GiB)")
    return size


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    for key in keys:
        if keys.count(key) > 1:
            raise ValueProblem(f"has the JSON key {key!r} twice")
    return dict(pairs)


def parse_json_object(text: str) -> dict[str, Any]:
    """A JSON object (no key repeated)."""
    try:
        value = json.loads(text, object_pairs_hook=_no_repeats)
    except json.JSONDecodeError as exc:
        raise ValueProblem(f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(value, dict):
        raise ValueProblem(f"is a JSON {type(value).__name__}, not an object")
    return value
