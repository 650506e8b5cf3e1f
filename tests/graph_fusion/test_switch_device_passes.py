"""The switch file and the reference's pass names that exist only on its device (what the warning says
of them), and passes that are off unless the switch file turns them on (no TensorFlow needed)."""
from __future__ import annotations

import json
from pathlib import Path

from scopefusion.core.graph_fusion.device_passes import DEVICE_PASSES
from scopefusion.core.graph_fusion.switch import SECTIONS, FusionSwitch, SwitchDecision

GF, UB = SECTIONS
KNOWN = {GF: ["SoftmaxFusionPass"], UB: ["EpilogueFusionPass"]}


def test_device_pass_is_explained_not_unregistered() -> None:
    switch = FusionSwitch.from_text(json.dumps({"Switch": {
        GF: {"ConvConcatFusionPass": "on", "PoolingFusionPass": "off", "Conv2DQuantProcessFusionPass": "on",
             "FusionVirtualOpSetSwitch": "on", "Nonsense": "on"},
        UB: {"FusionVirtualOpSetSwitch": "on", "TfMergeSubFusionPass": "on"}}}))
    warnings = switch.unknown_name_warnings(KNOWN, DEVICE_PASSES)
    prefix = "fusion switch file <text>: "
    assert warnings[0].startswith(prefix + "GraphFusion pass 'ConvConcatFusionPass' is the reference's device pass "
                                  "that lets each convolution feeding a channel concat write its output straight "
                                  "into the concat's buffer")
    assert "not implemented here: strided writes into the device's 5-D channel-blocked layout" in warnings[0]
    assert warnings[1].startswith(prefix + "GraphFusion pass 'PoolingFusionPass' is the reference's rewrite of a "
                                  "Caffe average Pooling op")
    assert "the reference's quantization pass for Conv2D" in warnings[2]
    # a device name in the other section is a mistake: said as for a registered pass
    assert warnings[3] == (prefix + "GraphFusion pass 'FusionVirtualOpSetSwitch' is not registered "
                           "(it is a UBFusion pass)")
    assert warnings[4] == prefix + "GraphFusion pass 'Nonsense' is not registered"
    assert warnings[5].startswith(prefix + "UBFusion pass 'FusionVirtualOpSetSwitch' is not a pass: ")
    assert warnings[6] == prefix + "UBFusion pass 'TfMergeSubFusionPass' is not registered (it is a GraphFusion pass)"
    assert len(warnings) == 7
    for line in warnings[:3] + warnings[5:6]:
        assert line.endswith("; the switch file accepts the name, it has no effect")
    # without the table, every one is simply unknown
    assert all("is not registered" in w for w in switch.unknown_name_warnings(KNOWN))


def test_device_pass_in_legacy_file(tmp_path: Path) -> None:
    path = tmp_path / "s.cfg"
    path.write_text("TfMergeSubFusionPass:on\nFusionVirtualOpSetSwitch:off\nSoftmaxFusionPass:on\n")
    warnings = FusionSwitch.load(path).unknown_name_warnings(KNOWN, DEVICE_PASSES)
    assert warnings == [
        f"fusion switch file {path}: pass 'TfMergeSubFusionPass' is {DEVICE_PASSES['TfMergeSubFusionPass'].describe()}",
        f"fusion switch file {path}: pass 'FusionVirtualOpSetSwitch' is "
        f"{DEVICE_PASSES['FusionVirtualOpSetSwitch'].describe()}",
    ]
    assert "its source is not public, so what it matches and what it makes are unknown" in warnings[0]


def test_every_device_pass_has_a_section_and_reasons() -> None:
    for name, entry in DEVICE_PASSES.items():
        assert entry.section in SECTIONS and entry.what and entry.why, name


def test_a_pass_off_by_default() -> None:
    none = FusionSwitch.default()
    assert none.decide("P", GF, default_on=False) == SwitchDecision(False, "built-in default", False)
    assert none.decide("P", GF) == SwitchDecision(True, "default", False)
    named = FusionSwitch.from_text(json.dumps({"Switch": {GF: {"P": "on"}}}))
    assert named.decide("P", GF, default_on=False) == SwitchDecision(True, "exact", False)
    every = FusionSwitch.from_text(json.dumps({"Switch": {GF: {"ALL": "on"}}}))
    assert every.decide("P", GF, default_on=False) == SwitchDecision(True, "ALL", False)
    assert FusionSwitch.from_text("P:off\n").decide("P", UB, default_on=False) == SwitchDecision(False, "exact", False)
