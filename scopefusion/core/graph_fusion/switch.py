"""Reader for the fusion switch file.

A fusion switch file turns graph fusion passes on or off, per section
(``GraphFusion`` or ``UBFusion``), and may give passes a priority that changes
the order in which they run.  Two formats exist:

* JSON: ``{"Switch": {"GraphFusion": {"PassA": "off"}}, "Priority": {...}}``
* legacy: one ``PassName:on`` or ``PassName:off`` per line, for both sections.

The reference implementation silently ignores many mistakes (padded keys,
empty names, duplicate keys).  This reader reports every one of them as a
single-line :class:`FusionSwitchError` that names the file, the place in it,
what is wrong and what is allowed.
"""
from __future__ import annotations

import difflib
import json
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import OptionError
from .device_passes import DevicePass

SECTIONS: tuple[str, str] = ("GraphFusion", "UBFusion")
ALL = "ALL"
#: The source of the decision for a pass off by default that the file does not name.
OFF_BY_DEFAULT = "built-in default"
DOWN_OFFSET = 10000
_TOP_KEYS = ("Switch", "Priority")
_LEVELS: dict[str, tuple[int, int]] = {
    "Top": (0, 1000),
    "Main": (1000, 2000),
    "Down": (2000, 3000),
}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_LEGACY_HINT = "write PassName:on or PassName:off"
_SECTIONS_SHAPE = '{"GraphFusion": {...}, "UBFusion": {...}}'
_LEVELS_SHAPE = '{"Top": {...}, "Main": {...}, "Down": {...}}'


class FusionSwitchError(OptionError):
    """A malformed fusion switch file."""


@dataclass(frozen=True)
class SwitchDecision:
    """Whether one pass runs, and which rule of the switch file decided it."""

    on: bool
    source: str
    overridden: bool


class _Pairs(list[tuple[str, Any]]):
    """A JSON object kept as its list of (key, value) pairs, duplicates included."""


@dataclass
class _Parsed:
    """What a switch file configures, section by section."""

    switches: dict[str, dict[str, bool]] = field(
        default_factory=lambda: {s: {} for s in SECTIONS})
    priorities: dict[str, dict[str, int]] = field(
        default_factory=lambda: {s: {} for s in SECTIONS})
    mentioned: dict[str, list[str]] = field(
        default_factory=lambda: {s: [] for s in SECTIONS})

    def mention(self, section: str, name: str) -> None:
        """Remember that the file names ``name`` in ``section``."""
        if name != ALL and name not in self.mentioned[section]:
            self.mentioned[section].append(name)


# ----------------------------------------------------------------- messages

def _printable(text: str) -> str:
    """Escape characters that would break a one-line message."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _quote(text: str) -> str:
    """Quote ``text`` in double quotes for a message, on one line."""
    return _printable(json.dumps(text, ensure_ascii=False))


def _error(label: str, where: str | None, what: str, allowed: str = "") -> FusionSwitchError:
    """Build the one-line error ``fusion switch file <path>: <where>: <what>; <allowed>``."""
    message = f"fusion switch file {_printable(label)}: "
    if where:
        message += f"{where}: "
    message += what
    if allowed:
        message += f"; {allowed}"
    return FusionSwitchError(message)


def _describe(value: Any) -> str:
    """Name the JSON type of ``value`` for a message, with the value if short."""
    if isinstance(value, _Pairs):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({json.dumps(value)})"
    if isinstance(value, (int, float)):
        return f"a number ({_printable(repr(value))})"
    return f"a string ({_quote(str(value))})"


# ----------------------------------------------------------------- checks

def _switch_value(raw: str, label: str, where: str, owner: str = "") -> bool:
    """Turn an ``on``/``off`` string (surrounding whitespace allowed) into a bool, or fail."""
    value = raw.strip()
    if value in ("on", "off"):
        return value == "on"
    what = f"value {_quote(raw)}{owner} is not allowed"
    if value.lower() in ("on", "off"):
        raise _error(label, where, what, 'use lowercase "on" or "off"')
    raise _error(label, where, what, 'write "on" or "off"')


def _check_key(key: str, allowed: Sequence[str], label: str, where: str, kind: str) -> None:
    """Fail unless ``key`` is exactly one of ``allowed``."""
    if key in allowed:
        return
    names = ", ".join(_quote(a) for a in allowed)
    note = " (note the leading or trailing whitespace)" if key.strip() in allowed else ""
    raise _error(label, where, f"unknown {kind} {_quote(key)}{note}",
                 f"allowed {kind}s are {names}")


def _check_pass_name(name: str, label: str, where: str) -> None:
    """Fail on an empty, blank or whitespace-padded pass name."""
    if not name.strip():
        raise _error(label, where, "pass name is empty", 'write the pass name, or "ALL" in Switch')
    if name != name.strip():
        raise _error(label, where, "pass name has leading or trailing whitespace",
                     f"write {_quote(name.strip())}")


def _object(value: Any, label: str, where: str, shape: str) -> list[tuple[str, Any]]:
    """Return the pairs of a JSON object, failing on other types and duplicate keys."""
    if not isinstance(value, _Pairs):
        raise _error(label, where, f"value is {_describe(value)}, not an object", f"write {shape}")
    seen: set[str] = set()
    for key, _ in value:
        if key in seen:
            raise _error(label, where, f"key {_quote(key)} appears more than once",
                         "give each key only once")
        seen.add(key)
    return list(value)


def _priority_value(value: Any, level: str, label: str, where: str) -> int:
    """Check one priority value against its level's range and return it."""
    low, high = _LEVELS[level]
    allowed = f'write a whole number in [{low}, {high}) such as "{low}"'
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _error(label, where, f"value is {_describe(value)}, not an integer", allowed)
    text = value.strip() if isinstance(value, str) else str(value)
    if not _INTEGER.fullmatch(text):
        raise _error(label, where, f"value {_quote(str(value))} is not an integer", allowed)
    digits = text.lstrip("+-").lstrip("0")
    number = int(text) if len(digits) < 20 else None  # None: far too large either way
    if number is None or not low <= number < high:
        shown = _printable(text) if len(text) < 40 else "the value"
        raise _error(label, where, f"{shown} is out of range for {level}",
                     f"{level} priorities must be in [{low}, {high})")
    return number


# ----------------------------------------------------------------- parsers

def _parse_legacy(text: str, label: str) -> _Parsed:
    """Parse ``PassName:on`` lines; the result applies to both sections."""
    entries: dict[str, bool] = {}
    first_line: dict[str, int] = {}
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"line {number}"
        key, colon, value = line.partition(":")
        key = key.strip()
        if not colon:
            raise _error(label, where, f"{_quote(line)} has no ':'", _LEGACY_HINT)
        if not key:
            raise _error(label, where, f"{_quote(line)} has no pass name before ':'",
                         _LEGACY_HINT + ", or ALL:on / ALL:off")
        if key in first_line:
            raise _error(label, where,
                         f"{_quote(key)} is given twice (lines {first_line[key]} and {number})",
                         "give each pass only once")
        entries[key] = _switch_value(value, label, where, f" for {_quote(key)}")
        first_line[key] = number
    parsed = _Parsed()
    for section in SECTIONS:
        parsed.switches[section] = dict(entries)
        for key in entries:
            parsed.mention(section, key)
    return parsed


def _load_json(text: str, label: str) -> Any:
    """Decode JSON text, keeping every object as pairs so duplicates can be seen."""
    try:
        return json.loads(text, object_pairs_hook=_Pairs)
    except json.JSONDecodeError as exc:
        raise _error(label, None, f"not valid JSON at line {exc.lineno}, column {exc.colno}: "
                     f"{_printable(exc.msg)}") from None
    except RecursionError:
        raise _error(label, None, "not valid JSON: nested too deeply") from None
    except ValueError as exc:
        raise _error(label, None, f"not valid JSON: {_printable(str(exc))}") from None


def _parse_json(text: str, label: str) -> _Parsed:
    """Parse and fully validate the JSON format."""
    parsed = _Parsed()
    top = _object(_load_json(text, label), label, "top level",
                  '{"Switch": {...}, "Priority": {...}}')
    for key, value in top:
        _check_key(key, _TOP_KEYS, label, "top level", "key")
        for section, body in _object(value, label, key, _SECTIONS_SHAPE):
            _check_key(section, SECTIONS, label, key, "section")
            where = f"{key}.{section}"
            if key == "Switch":
                _read_switch(body, parsed, section, label, where)
            else:
                _read_priority(body, parsed, section, label, where)
    return parsed


def _read_switch(body: Any, parsed: _Parsed, section: str, label: str, where: str) -> None:
    """Read one ``Switch.<section>`` object of ``"PassName": "on"|"off"`` entries."""
    for name, value in _object(body, label, where, '{"PassName": "on", ...}'):
        entry = f"{where}.{_quote(name)}"
        _check_pass_name(name, label, entry)
        if not isinstance(value, str):
            raise _error(label, entry, f"value is {_describe(value)}, not a string",
                         'write "on" or "off"')
        parsed.switches[section][name] = _switch_value(value, label, entry)
        parsed.mention(section, name)


def _read_priority(body: Any, parsed: _Parsed, section: str, label: str, where: str) -> None:
    """Read one ``Priority.<section>`` object of ``Top``/``Main``/``Down`` levels."""
    first_seen: dict[str, str] = {}
    for level, entries in _object(body, label, where, _LEVELS_SHAPE):
        _check_key(level, tuple(_LEVELS), label, where, "level")
        level_where = f"{where}.{level}"
        for name, value in _object(entries, label, level_where, '{"PassName": "100", ...}'):
            entry = f"{level_where}.{_quote(name)}"
            _check_pass_name(name, label, entry)
            if name == ALL:
                raise _error(label, entry, '"ALL" cannot be given a priority',
                             "give each pass its own priority")
            if name in first_seen:
                raise _error(label, entry, f"pass {_quote(name)} already has a priority at "
                             f"{first_seen[name]}", "give each pass one priority per section")
            number = _priority_value(value, level, label, entry)
            parsed.priorities[section][name] = number + (DOWN_OFFSET if level == "Down" else 0)
            first_seen[name] = entry
            parsed.mention(section, name)


def _os_reason(exc: OSError) -> str:
    """The operating system's reason for a failed file access, on one line."""
    return _printable(exc.strerror or str(exc))


def _read_file(path: str | os.PathLike[str]) -> str:
    """Read a switch file as UTF-8 text, failing clearly on every file problem."""
    label = os.fspath(path)
    try:
        info = os.stat(label)
    except (FileNotFoundError, NotADirectoryError):
        raise _error(label, None, "no such file") from None
    except OSError as exc:
        raise _error(label, None, f"cannot be read ({_os_reason(exc)})") from None
    if stat.S_ISDIR(info.st_mode):
        raise _error(label, None, "is a directory", "give the path of the switch file itself")
    if not stat.S_ISREG(info.st_mode):
        raise _error(label, None, "is not a regular file")
    try:
        with open(label, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise _error(label, None, f"cannot be read ({_os_reason(exc)})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        bad = f"byte 0x{data[exc.start]:02x} on line {line}"
        raise _error(label, None, f"is not valid UTF-8 ({bad})",
                     "save the file as UTF-8") from None


def _check_section(section: str) -> str:
    """Return ``section`` if it is one of SECTIONS, else raise ValueError."""
    if section not in SECTIONS:
        raise ValueError(f"unknown fusion section {section!r}; expected one of {SECTIONS}")
    return section


# ----------------------------------------------------------------- public class

class FusionSwitch:
    """The parsed fusion switch file: which passes run and in which order.

    Build one with :meth:`default`, :meth:`load` or :meth:`from_text`.
    """

    path: str | None
    format: str

    def __init__(self, path: str | None, format: str, parsed: _Parsed) -> None:
        """Store an already validated configuration (use the class methods instead)."""
        self.path = path
        self.format = format
        self._parsed = parsed

    def __repr__(self) -> str:
        return f"FusionSwitch(path={self.path!r}, format={self.format!r})"

    @classmethod
    def default(cls) -> FusionSwitch:
        """The configuration used without a file: every pass on, no priorities."""
        return cls(None, "default", _Parsed())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> FusionSwitch:
        """Read and validate the switch file at ``path``."""
        return cls.from_text(_read_file(path), os.fspath(path))

    @classmethod
    def from_text(cls, text: str, source: str = "<text>") -> FusionSwitch:
        """Parse switch file content; ``source`` names it in messages and becomes ``path``."""
        if text.startswith("\ufeff"):
            text = text[1:]
        stripped = text.lstrip()
        if not stripped:
            what = "is empty" if not text else "is empty (it contains only whitespace)"
            raise _error(source, None, what,
                         'write PassName:on lines or a JSON object {"Switch": {...}}')
        if stripped[0] in "{[":
            return cls(source, "json", _parse_json(text, source))
        return cls(source, "legacy", _parse_legacy(text, source))

    def with_aliases(self, aliases: Mapping[str, str]) -> FusionSwitch:
        """This configuration with the passes' aliases (alias -> pass name) read as the passes'
        own names; an entry under the pass's own name wins over one under an alias."""
        if not any(alias in names for names in self._parsed.mentioned.values() for alias in aliases):
            return self
        parsed = _Parsed()
        for section in SECTIONS:
            _with_aliases(parsed.switches[section], self._parsed.switches[section], aliases)
            _with_aliases(parsed.priorities[section], self._parsed.priorities[section], aliases)
            for name in self._parsed.mentioned[section]:
                parsed.mention(section, aliases.get(name, name))
        return FusionSwitch(self.path, self.format, parsed)

    def decide(self, name: str, section: str, forbidden_close: bool = False,
               default_on: bool = True) -> SwitchDecision:
        """Decide whether pass ``name`` of ``section`` runs: the file's entry for it, else its
        ``ALL``, else the pass's own default (``default_on``; source ``"built-in default"`` when off)."""
        table = self._parsed.switches[_check_section(section)]
        exact = table.get(name)
        fallback = table.get(ALL)
        if forbidden_close:
            closed = exact is False or (exact is None and fallback is False)
            return SwitchDecision(True, "forbidden_close", closed)
        if exact is not None:
            return SwitchDecision(exact, "exact", False)
        if fallback is not None:
            return SwitchDecision(fallback, "ALL", False)
        return SwitchDecision(default_on, "default" if default_on else OFF_BY_DEFAULT, False)

    def priority(self, name: str, section: str) -> int | None:
        """The configured priority of a pass (Down already +10000), or None."""
        return self._parsed.priorities[_check_section(section)].get(name)

    def order(self, section: str, passes: Sequence[tuple[str, int]]) -> list[str]:
        """Sort ``(name, default_priority)`` pairs by effective priority, stably."""
        configured = self._parsed.priorities[_check_section(section)]
        ranked = sorted(passes, key=lambda item: configured.get(item[0], item[1]))
        return [name for name, _ in ranked]

    def mentioned(self) -> dict[str, list[str]]:
        """Every pass name the file names, per section, in file order, without "ALL"."""
        return {section: list(names) for section, names in self._parsed.mentioned.items()}

    def unknown_name_warnings(self, known: Mapping[str, Sequence[str]],
                              device: Mapping[str, DevicePass] | None = None) -> list[str]:
        """One warning line per name in the file that no registered pass has: for a name of
        ``device`` (the reference's passes that exist only on its device), what it is and why
        nothing here implements it (``device_passes.DEVICE_PASSES``); for any other, that it is not
        registered, with hints."""
        registered = {s: list(dict.fromkeys(known.get(s, ()))) for s in SECTIONS}
        device = device or {}
        label = f"fusion switch file {_printable(self.path or '<default>')}: "
        if self.format == "legacy":
            every = list(dict.fromkeys(registered[SECTIONS[0]] + registered[SECTIONS[1]]))
            return [label + (_device("pass", name, device[name]) if name in device
                             else _unknown("pass", name, every, None))
                    for name in self._parsed.mentioned[SECTIONS[0]] if name not in every]
        warnings: list[str] = []
        for section, other in (SECTIONS, SECTIONS[::-1]):
            for name in self._parsed.mentioned[section]:
                if name not in registered[section] and name in device and device[name].section == section:
                    warnings.append(label + _device(f"{section} pass", name, device[name]))
                elif name not in registered[section]:
                    in_other = name in registered[other] or (name in device and device[name].section == other)
                    elsewhere = other if in_other else None
                    warnings.append(label + _unknown(f"{section} pass", name,
                                                     registered[section], elsewhere))
        return warnings


def _device(kind: str, name: str, entry: DevicePass) -> str:
    """Word the warning for a pass that exists only on the reference's device."""
    return f"{kind} '{_printable(name)}' is {entry.describe()}"


def _unknown(kind: str, name: str, candidates: list[str], elsewhere: str | None) -> str:
    """Word one unknown-name warning, with hints when they help."""
    text = f"{kind} '{_printable(name)}' is not registered"
    if elsewhere:  # the exact name exists in the other section: that is the likely mistake
        return f"{text} (it is a {elsewhere} pass)"
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.7)
    if close:
        choices = " or ".join(f"'{_printable(c)}'" for c in close)
        return f"{text} (did you mean {choices}?)"
    return text


_V = TypeVar("_V")


def _with_aliases(target: dict[str, _V], source: Mapping[str, _V], aliases: Mapping[str, str]) -> None:
    """Copy ``source`` into ``target`` under each name's own name (an alias: under the name it stands for,
    unless that name is given too)."""
    for name, value in source.items():
        if name in aliases:
            target.setdefault(aliases[name], value)
        else:
            target[name] = value
