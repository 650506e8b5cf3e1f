"""Tests of the fusion switch file reader (no TensorFlow needed)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from scopefusion.core.errors import OptionError
from scopefusion.core.graph_fusion.switch import (
    SECTIONS,
    FusionSwitch,
    FusionSwitchError,
    SwitchDecision,
)

GF, UB = SECTIONS


def write(tmp_path: Path, text: str | bytes, name: str = "cfg.json") -> Path:
    """Write a switch file into tmp_path and return its path."""
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def switch_json(graph: dict | None = None, ub: dict | None = None, **extra: object) -> str:
    """A JSON switch file with the given GraphFusion / UBFusion switch entries."""
    doc: dict[str, object] = {"Switch": {}}
    if graph is not None:
        doc["Switch"][GF] = graph  # type: ignore[index]
    if ub is not None:
        doc["Switch"][UB] = ub  # type: ignore[index]
    doc.update(extra)
    return json.dumps(doc)


def load_error(path: Path) -> str:
    """Load ``path``, expect a FusionSwitchError and return its message."""
    with pytest.raises(FusionSwitchError) as info:
        FusionSwitch.load(path)
    message = str(info.value)
    assert "\n" not in message and "\r" not in message
    assert message.startswith(f"fusion switch file {path}: ")
    return message


# ------------------------------------------------------------------ basics

def test_sections_and_error_class() -> None:
    assert SECTIONS == ("GraphFusion", "UBFusion")
    assert issubclass(FusionSwitchError, OptionError)


def test_default_switch_turns_everything_on() -> None:
    switch = FusionSwitch.default()
    assert switch.path is None and switch.format == "default"
    for section in SECTIONS:
        assert switch.decide("AnyPass", section) == SwitchDecision(True, "default", False)
        assert switch.priority("AnyPass", section) is None
    assert switch.mentioned() == {GF: [], UB: []}
    assert switch.unknown_name_warnings({GF: ["A"], UB: []}) == []


def test_json_happy_path(tmp_path: Path) -> None:
    path = write(tmp_path, switch_json({"SoftmaxFusionPass": "on", "GeluFusionPass": "off"},
                                       {"FusionVirtualOpSetSwitch": "off"}))
    switch = FusionSwitch.load(path)
    assert switch.format == "json" and switch.path == str(path)
    assert switch.decide("SoftmaxFusionPass", GF) == SwitchDecision(True, "exact", False)
    assert switch.decide("GeluFusionPass", GF) == SwitchDecision(False, "exact", False)
    assert switch.decide("FusionVirtualOpSetSwitch", UB) == SwitchDecision(False, "exact", False)
    # an entry of one section does not leak into the other
    assert switch.decide("GeluFusionPass", UB) == SwitchDecision(True, "default", False)
    assert switch.mentioned() == {GF: ["SoftmaxFusionPass", "GeluFusionPass"],
                                  UB: ["FusionVirtualOpSetSwitch"]}


def test_json_accepts_pathlike_and_trims_values(tmp_path: Path) -> None:
    switch = FusionSwitch.load(write(tmp_path, switch_json({"A": " off ", "B": "\ton"})))
    assert switch.decide("A", GF).on is False
    assert switch.decide("B", GF).on is True


def test_legacy_happy_path_applies_to_both_sections(tmp_path: Path) -> None:
    text = "# my switches\n\nGeluFusionPass:off\n   \n  # indented comment\nSoftmax : on \r\n"
    switch = FusionSwitch.load(write(tmp_path, text, "fusion_switch.cfg"))
    assert switch.format == "legacy"
    for section in SECTIONS:
        assert switch.decide("GeluFusionPass", section) == SwitchDecision(False, "exact", False)
        assert switch.decide("Softmax", section) == SwitchDecision(True, "exact", False)
        assert switch.decide("Other", section) == SwitchDecision(True, "default", False)
        assert switch.priority("GeluFusionPass", section) is None
    assert switch.mentioned() == {GF: ["GeluFusionPass", "Softmax"],
                                  UB: ["GeluFusionPass", "Softmax"]}


def test_from_text_uses_source_as_path() -> None:
    switch = FusionSwitch.from_text("A:off\n")
    assert switch.path == "<text>" and switch.format == "legacy"
    with pytest.raises(FusionSwitchError, match=r"^fusion switch file mem\.cfg: line 1: "):
        FusionSwitch.from_text("A on", source="mem.cfg")


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, "\ufeff" + switch_json({"A": "off"}), "bom.json")
    switch = FusionSwitch.load(path)
    assert switch.format == "json" and switch.decide("A", GF).on is False


# ------------------------------------------------------------------ deciding

DECIDE_CASES = [
    # (entries, name, forbidden_close, expected decision)
    ({"ALL": "off", "Keep": "on"}, "Keep", False, SwitchDecision(True, "exact", False)),
    ({"ALL": "off", "Keep": "on"}, "Other", False, SwitchDecision(False, "ALL", False)),
    ({"ALL": "on", "Drop": "off"}, "Drop", False, SwitchDecision(False, "exact", False)),
    ({"ALL": "on", "Drop": "off"}, "Other", False, SwitchDecision(True, "ALL", False)),
    ({"Drop": "off"}, "Other", False, SwitchDecision(True, "default", False)),
    ({"Drop": "off"}, "drop", False, SwitchDecision(True, "default", False)),  # case-sensitive
    ({"Drop": "off"}, "Drop", True, SwitchDecision(True, "forbidden_close", True)),
    ({"ALL": "off"}, "Drop", True, SwitchDecision(True, "forbidden_close", True)),
    ({"ALL": "off", "Drop": "on"}, "Drop", True, SwitchDecision(True, "forbidden_close", False)),
    ({"ALL": "on"}, "Drop", True, SwitchDecision(True, "forbidden_close", False)),
    ({"Drop": "on"}, "Drop", True, SwitchDecision(True, "forbidden_close", False)),
    ({}, "Drop", True, SwitchDecision(True, "forbidden_close", False)),
]


@pytest.mark.parametrize("entries, name, forbidden, expected", DECIDE_CASES)
@pytest.mark.parametrize("fmt", ["json", "legacy"])
def test_decide(tmp_path: Path, fmt: str, entries: dict, name: str, forbidden: bool,
                expected: SwitchDecision) -> None:
    if fmt == "json":
        text = switch_json(entries, entries)
    else:
        text = "".join(f"{k}:{v}\n" for k, v in entries.items()) or "# nothing\n"
    switch = FusionSwitch.load(write(tmp_path, text))
    assert switch.format == fmt
    for section in SECTIONS:
        assert switch.decide(name, section, forbidden_close=forbidden) == expected


def test_all_of_one_section_does_not_touch_the_other() -> None:
    switch = FusionSwitch.from_text(switch_json({"ALL": "off"}, {"Fused": "on"}))
    assert switch.decide("X", GF) == SwitchDecision(False, "ALL", False)
    assert switch.decide("X", UB) == SwitchDecision(True, "default", False)
    assert switch.mentioned() == {GF: [], UB: ["Fused"]}


@pytest.mark.parametrize("method, args", [("decide", ("A", "Graph")), ("priority", ("A", "ub")),
                                          ("order", ("UB", []))])
def test_unknown_section_argument_is_value_error(method: str, args: tuple) -> None:
    with pytest.raises(ValueError, match="section"):
        getattr(FusionSwitch.default(), method)(*args)


# ------------------------------------------------------------------ priority

PRIORITY_DOC = {
    "Priority": {
        GF: {
            "Top": {"TopPass": "100", "TopInt": 5},
            "Main": {"MainPass": "1500"},
            "Down": {"DownPass": "2100", "DownEdge": " 2999 "},
        },
        UB: {"Top": {"UbTop": "0"}},
    }
}


def test_priority_values() -> None:
    switch = FusionSwitch.from_text(json.dumps(PRIORITY_DOC))
    assert switch.priority("TopPass", GF) == 100
    assert switch.priority("TopInt", GF) == 5
    assert switch.priority("MainPass", GF) == 1500
    assert switch.priority("DownPass", GF) == 12100
    assert switch.priority("DownEdge", GF) == 12999
    assert switch.priority("UbTop", UB) == 0
    assert switch.priority("UbTop", GF) is None
    assert switch.priority("Unlisted", GF) is None
    assert switch.mentioned()[GF] == ["TopPass", "TopInt", "MainPass", "DownPass", "DownEdge"]
    # priorities do not switch anything
    assert switch.decide("DownPass", GF) == SwitchDecision(True, "default", False)


ORDER_CASES = [
    # registration order with default priorities -> expected order
    ([("DefA", 8000), ("DownPass", 8000), ("MainPass", 8000), ("DefB", 8000), ("TopPass", 8000)],
     ["TopPass", "MainPass", "DefA", "DefB", "DownPass"]),
    ([("Late", 9000), ("Early", 6000), ("TopInt", 9000), ("DownEdge", 1)],
     ["TopInt", "Early", "Late", "DownEdge"]),
    # ties keep the given order, configured or not
    ([("Z", 8000), ("Y", 8000), ("X", 8000)], ["Z", "Y", "X"]),
    ([("Z", 1500), ("MainPass", 8000), ("A", 1500)], ["Z", "MainPass", "A"]),
    ([], []),
]


@pytest.mark.parametrize("passes, expected", ORDER_CASES)
def test_order(passes: list[tuple[str, int]], expected: list[str]) -> None:
    switch = FusionSwitch.from_text(json.dumps(PRIORITY_DOC))
    assert switch.order(GF, passes) == expected


def test_order_uses_only_the_requested_section() -> None:
    switch = FusionSwitch.from_text(json.dumps(PRIORITY_DOC))
    assert switch.order(UB, [("TopPass", 9000), ("UbTop", 9000)]) == ["UbTop", "TopPass"]
    assert switch.order(UB, [("DownPass", 1), ("X", 2)]) == ["DownPass", "X"]


def test_order_without_priorities_keeps_defaults() -> None:
    for switch in (FusionSwitch.default(), FusionSwitch.from_text("A:on\n")):
        assert switch.order(GF, [("B", 2), ("A", 1), ("C", 2)]) == ["A", "B", "C"]


# ------------------------------------------------------------------ file errors

def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    assert load_error(path) == f"fusion switch file {path}: no such file"


def test_directory(tmp_path: Path) -> None:
    assert "is a directory" in load_error(tmp_path)


def test_empty_file(tmp_path: Path) -> None:
    assert "is empty" in load_error(write(tmp_path, ""))


@pytest.mark.parametrize("text", [" ", "\n\n", " \t\r\n  \n"])
def test_whitespace_only_file(tmp_path: Path, text: str) -> None:
    assert "is empty" in load_error(write(tmp_path, text))


def test_not_utf8(tmp_path: Path) -> None:
    message = load_error(write(tmp_path, b"A:on\nB\xff:off\n", "latin.cfg"))
    assert "not valid UTF-8" in message and "0xff" in message and "line 2" in message


def test_read_failure_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import scopefusion.core.graph_fusion.switch as switch_module

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    path = write(tmp_path, "A:on\n")
    monkeypatch.setattr(switch_module, "open", refuse, raising=False)
    assert load_error(path) == f"fusion switch file {path}: cannot be read (Permission denied)"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_not_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    assert "is not a regular file" in load_error(path)


@pytest.mark.parametrize("text", ["", "  \n", "\ufeff"])
def test_from_text_empty(text: str) -> None:
    with pytest.raises(FusionSwitchError, match=r"^fusion switch file <text>: is empty"):
        FusionSwitch.from_text(text)


# ------------------------------------------------------------------ JSON errors

JSON_ERRORS = [
    ('{\n  "Switch": {\n    "GraphFusion": {"A": "on" "B": "off"}\n  }\n}',
     ['not valid JSON at line 3, column 31: Expecting \',\' delimiter']),
    ('{"Switch": {}} trailing', ["not valid JSON at line 1, column 16: Extra data"]),
    ('["Switch"]', ["top level: value is an array, not an object"]),
    ('{"Switch": {}, "Swich": {}}', ['top level: unknown key "Swich"',
                                     'allowed keys are "Switch", "Priority"']),
    ('{" Switch": {"GraphFusion": {"A": "off"}}}',
     ['top level: unknown key " Switch"', "whitespace", 'allowed keys are "Switch", "Priority"']),
    ('{"Switch": {"GraphFusio": {}}}',
     ['Switch: unknown section "GraphFusio"', 'allowed sections are "GraphFusion", "UBFusion"']),
    ('{"Priority": {"UBFusion ": {}}}', ['Priority: unknown section "UBFusion "', "whitespace"]),
    ('{"Switch": ["GraphFusion"]}', ["Switch: value is an array, not an object"]),
    ('{"Switch": {"GraphFusion": "off"}}',
     ['Switch.GraphFusion: value is a string ("off"), not an object']),
    ('{"Switch": {"GraphFusion": {"GeluFusionPass": "maybe"}}}',
     ['Switch.GraphFusion."GeluFusionPass": value "maybe" is not allowed',
      'write "on" or "off"']),
    ('{"Switch": {"GraphFusion": {"GeluFusionPass": "On"}}}',
     ['Switch.GraphFusion."GeluFusionPass": value "On" is not allowed',
      'use lowercase "on" or "off"']),
    ('{"Switch": {"UBFusion": {"A": " OFF "}}}', ['use lowercase "on" or "off"']),
    ('{"Switch": {"GraphFusion": {"A": ""}}}', ['value "" is not allowed']),
    ('{"Switch": {"GraphFusion": {"A": 1}}}',
     ['Switch.GraphFusion."A": value is a number (1), not a string', 'write "on" or "off"']),
    ('{"Switch": {"GraphFusion": {"A": true}}}', ["value is a boolean (true), not a string"]),
    ('{"Switch": {"GraphFusion": {"A": null}}}', ["value is null, not a string"]),
    ('{"Switch": {"GraphFusion": {"A": {"on": 1}}}}', ["value is an object, not a string"]),
    ('{"Switch": {"GraphFusion": {"": "on"}}}', ['Switch.GraphFusion."": pass name is empty']),
    ('{"Switch": {"GraphFusion": {"  ": "on"}}}', ['Switch.GraphFusion."  ": pass name is empty']),
    ('{"Switch": {"GraphFusion": {" A": "on"}}}',
     ['Switch.GraphFusion." A": pass name has leading or trailing whitespace', 'write "A"']),
    ('{"Switch": {"GraphFusion": {"A": "on", "A": "off"}}}',
     ['Switch.GraphFusion: key "A" appears more than once']),
    ('{"Switch": {"UBFusion": {}, "UBFusion": {}}}', ['Switch: key "UBFusion" appears more']),
    ('{"Switch": {}, "Switch": {}}', ['top level: key "Switch" appears more than once']),
    ('{"Priority": {"GraphFusion": {"Top": {"A": "1"}, "Top": {}}}}',
     ['Priority.GraphFusion: key "Top" appears more than once']),
    ('{"Priority": {"GraphFusion": {"Middle": {"A": "1"}}}}',
     ['Priority.GraphFusion: unknown level "Middle"',
      'allowed levels are "Top", "Main", "Down"']),
    ('{"Priority": {"GraphFusion": {"Top": ["A"]}}}',
     ["Priority.GraphFusion.Top: value is an array, not an object"]),
    ('{"Priority": {"GraphFusion": {"Top": {"A": "ten"}}}}',
     ['Priority.GraphFusion.Top."A": value "ten" is not an integer', "[0, 1000)"]),
    ('{"Priority": {"GraphFusion": {"Top": {"A": "1.5"}}}}', ['value "1.5" is not an integer']),
    ('{"Priority": {"GraphFusion": {"Main": {"A": 1500.0}}}}',
     ["value is a number (1500.0), not an integer", "[1000, 2000)"]),
    ('{"Priority": {"GraphFusion": {"Top": {"A": true}}}}', ["boolean (true), not an integer"]),
    ('{"Priority": {"GraphFusion": {"Top": {"A": null}}}}', ["value is null, not an integer"]),
    ('{"Priority": {"GraphFusion": {"Top": {"A": "1000"}}}}',
     ['Priority.GraphFusion.Top."A": 1000 is out of range for Top',
      "Top priorities must be in [0, 1000)"]),
    ('{"Priority": {"GraphFusion": {"Main": {"A": 999}}}}',
     ["999 is out of range for Main", "Main priorities must be in [1000, 2000)"]),
    ('{"Priority": {"UBFusion": {"Down": {"A": "3000"}}}}',
     ['Priority.UBFusion.Down."A": 3000 is out of range for Down', "[2000, 3000)"]),
    ('{"Priority": {"UBFusion": {"Top": {"A": "-1"}}}}', ["-1 is out of range for Top"]),
    ('{"Priority": {"UBFusion": {"Top": {"A": "' + "9" * 5000 + '"}}}}',
     ["is out of range for Top"]),
    ('{"Priority": {"GraphFusion": {"Top": {"A": "1"}, "Down": {"A": "2100"}}}}',
     ['Priority.GraphFusion.Down."A": pass "A" already has a priority at '
      'Priority.GraphFusion.Top."A"', "one priority per section"]),
    ('{"Priority": {"GraphFusion": {"Top": {"ALL": "1"}}}}',
     ['Priority.GraphFusion.Top."ALL": "ALL" cannot be given a priority']),
    ('{"Priority": {"GraphFusion": {"Top": {"": "1"}}}}',
     ['Priority.GraphFusion.Top."": pass name is empty']),
    ('{"Switch": {"GraphFusion": {"Line\\nBreak": "maybe"}}}',
     ['Switch.GraphFusion."Line\\nBreak": value "maybe"']),
]


@pytest.mark.parametrize("text, parts", JSON_ERRORS)
def test_json_errors(tmp_path: Path, text: str, parts: list[str]) -> None:
    message = load_error(write(tmp_path, text))
    for part in parts:
        assert part in message


def test_bad_json_exact_message(tmp_path: Path) -> None:
    path = write(tmp_path, '{\n  "Switch": {\n    "GraphFusion" {}\n  }\n}', "f.json")
    assert load_error(path) == (f"fusion switch file {path}: not valid JSON at line 3, "
                                "column 19: Expecting ':' delimiter")


def test_json_error_exact_shape(tmp_path: Path) -> None:
    path = write(tmp_path, '{"Switch": {"GraphFusion": {"GeluFusionPass": "On"}}}')
    assert load_error(path) == (f'fusion switch file {path}: Switch.GraphFusion."GeluFusionPass": '
                                'value "On" is not allowed; use lowercase "on" or "off"')


def test_same_pass_in_both_sections_priority_is_fine() -> None:
    doc = {"Priority": {GF: {"Top": {"A": "1"}}, UB: {"Down": {"A": "2000"}}}}
    switch = FusionSwitch.from_text(json.dumps(doc))
    assert (switch.priority("A", GF), switch.priority("A", UB)) == (1, 12000)


def test_empty_json_object_is_valid() -> None:
    switch = FusionSwitch.from_text("{}")
    assert switch.format == "json"
    assert switch.decide("A", GF) == SwitchDecision(True, "default", False)


# ------------------------------------------------------------------ legacy errors

LEGACY_ERRORS = [
    ("A:on\nB:off\nGeluFusionPass on\n",
     'line 3: "GeluFusionPass on" has no \':\'; write PassName:on or PassName:off'),
    ("A:on\n:on\n", 'line 2: ":on" has no pass name before \':\'; '
                    "write PassName:on or PassName:off, or ALL:on / ALL:off"),
    ("  : off\n", 'line 1: ": off" has no pass name before \':\'; '
                  "write PassName:on or PassName:off, or ALL:on / ALL:off"),
    ("A:maybe\n", 'line 1: value "maybe" for "A" is not allowed; write "on" or "off"'),
    ("A:\n", 'line 1: value "" for "A" is not allowed; write "on" or "off"'),
    ("# c\nA:On\n", 'line 2: value "On" for "A" is not allowed; use lowercase "on" or "off"'),
    ("A:on # keep\n", 'line 1: value "on # keep" for "A" is not allowed; write "on" or "off"'),
    ("A:on\n\nB:off\n# c\nA:off\n",
     'line 5: "A" is given twice (lines 1 and 5); give each pass only once'),
    ("ALL:off\nALL:on\n", 'line 2: "ALL" is given twice (lines 1 and 2); give each pass only once'),
]


@pytest.mark.parametrize("text, tail", LEGACY_ERRORS)
def test_legacy_errors(tmp_path: Path, text: str, tail: str) -> None:
    path = write(tmp_path, text, "switch.cfg")
    assert load_error(path) == f"fusion switch file {path}: {tail}"


def test_legacy_all_and_colon_in_value(tmp_path: Path) -> None:
    switch = FusionSwitch.load(write(tmp_path, "ALL:off\nKeep:on\n", "s.cfg"))
    assert switch.decide("Keep", UB) == SwitchDecision(True, "exact", False)
    assert switch.decide("Other", GF) == SwitchDecision(False, "ALL", False)
    assert switch.mentioned() == {GF: ["Keep"], UB: ["Keep"]}
    with pytest.raises(FusionSwitchError, match='value "on:off" for "A"'):
        FusionSwitch.from_text("A:on:off\n")


# ------------------------------------------------------------------ warnings

KNOWN = {GF: ["GeluFusionPass", "SoftmaxFusionPass", "MatMulBiasAddFusionPass"],
         UB: ["FusionVirtualOpSetSwitch", "TbeConvFusionPass"]}


def test_unknown_name_warnings_json(tmp_path: Path) -> None:
    doc = {"Switch": {GF: {"ALL": "off", "GeluFusionPas": "on", "SoftmaxFusionPass": "on",
                           "TbeConvFusionPass": "off", "Zzz": "off"},
                      UB: {"GeluFusionPass": "on"}},
           "Priority": {GF: {"Top": {"GeluFusionPas": "1", "Qqq": "2"}}}}
    path = write(tmp_path, json.dumps(doc))
    prefix = f"fusion switch file {path}: "
    assert FusionSwitch.load(path).unknown_name_warnings(KNOWN) == [
        prefix + "GraphFusion pass 'GeluFusionPas' is not registered "
                 "(did you mean 'GeluFusionPass'?)",
        prefix + "GraphFusion pass 'TbeConvFusionPass' is not registered "
                 "(it is a UBFusion pass)",
        prefix + "GraphFusion pass 'Zzz' is not registered",
        prefix + "GraphFusion pass 'Qqq' is not registered",
        prefix + "UBFusion pass 'GeluFusionPass' is not registered (it is a GraphFusion pass)",
    ]


def test_unknown_name_warnings_legacy(tmp_path: Path) -> None:
    path = write(tmp_path, "ALL:on\nGeluFusionPass:off\nTbeConvFusionPas:off\nNothingLike:on\n"
                           "FusionVirtualOpSetSwitch:off\n", "s.cfg")
    prefix = f"fusion switch file {path}: "
    assert FusionSwitch.load(path).unknown_name_warnings(KNOWN) == [
        prefix + "pass 'TbeConvFusionPas' is not registered (did you mean 'TbeConvFusionPass'?)",
        prefix + "pass 'NothingLike' is not registered",
    ]


def test_no_warnings_when_everything_is_known() -> None:
    switch = FusionSwitch.from_text(switch_json({"GeluFusionPass": "off"},
                                                {"FusionVirtualOpSetSwitch": "on"}))
    assert switch.unknown_name_warnings(KNOWN) == []
    # a section missing from ``known`` means nothing is registered there
    assert switch.unknown_name_warnings({GF: ["GeluFusionPass"]}) == [
        "fusion switch file <text>: UBFusion pass 'FusionVirtualOpSetSwitch' is not registered"]
