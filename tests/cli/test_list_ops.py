"""``scopefusion list --ops``: every declared fused op with inputs, outputs, attributes and origin."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from scopefusion.cli import main
from scopefusion.core.fusion.fused_ops import REQUIRED
from scopefusion.plugins.registry import load_registry

PLUGIN = textwrap.dedent('''
    from scopefusion import AttrDef, FusedOpDef, TensorArg, hookimpl


    def _reference(x, *, alpha, T):
        return (x * alpha,)


    SCALED = FusedOpDef(
        "ScaledCopy",
        inputs=(TensorArg("x", type_attr="T"),),
        outputs=(TensorArg("y", type_attr="T"), TensorArg("count", dtype="int32")),
        attrs=(AttrDef("alpha", "float", 0.5), AttrDef("T", "type")),
        reference=_reference,
        description="x times alpha",
    )


    @hookimpl
    def scopefusion_fused_ops():
        return [SCALED]
''')


def _install(site):
    """A distribution as pip lays it out: the package and its dist-info with the entry point."""
    (site / "ops_plugin").mkdir(parents=True)
    (site / "ops_plugin" / "__init__.py").write_text(PLUGIN)
    info = site / "sf_ops_demo-0.3.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sf-ops-demo\nVersion: 0.3.1\n")
    (info / "entry_points.txt").write_text("[scopefusion]\nops = ops_plugin\n")


def test_every_built_in_op_is_listed_with_its_declaration(capsys, monkeypatch):
    monkeypatch.setenv("SCOPEFUSION_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert main(["list", "--ops", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    declared = load_registry(autoload=False).fused_ops
    assert list(rows) == list(declared) and {"LayerNorm", "Gelu", "InstanceNorm"} <= set(rows)
    for name, op in declared.items():
        row = rows[name]
        assert [(i["name"], i["optional"]) for i in row["inputs"]] == [(i.name, i.optional) for i in op.inputs], name
        assert [(o["type_attr"], o["dtype"]) for o in row["outputs"]] == [(o.type_attr, o.dtype) for o in op.outputs]
        assert [(a["name"], a["type"], a["required"]) for a in row["attrs"]] == \
            [(a.name, a.type, a.default is REQUIRED) for a in op.attrs], name
        assert row["origin"] == "built-in" and row["reference"] is True
    assert main(["list", "--ops"]) == 0
    text = capsys.readouterr().out
    assert "LayerNorm  (built-in)" in text
    assert "  inputs:     x: T, gamma: T, beta: T" in text
    assert "  outputs:    y: T, mean: T, variance: T" in text
    assert "  attributes: begin_norm_axis: int; begin_params_axis: int; epsilon: float; T: type" in text
    assert "outputs:    nmsed_boxes: float32, nmsed_scores: float32, nmsed_classes: float32, num_detections: int32" \
        in text
    assert "approximate: bool = False" in text and f"{len(declared)} fused op(s)." in text


def test_optional_inputs_are_marked(capsys, monkeypatch):
    """DynamicRNN's LSTMCell options and seq_length are optional: marked in the text, flagged in the
    JSON, with the attribute that lists a node's optional inputs."""
    monkeypatch.setenv("SCOPEFUSION_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert main(["list", "--ops"]) == 0
    text = capsys.readouterr().out
    assert ("  inputs:     x: T, w: T, b: T, init_h: T, init_c: T, w_i_diag: T (optional), w_f_diag: T (optional), "
            "w_o_diag: T (optional), proj: T (optional), seq_length: int32 (optional)\n") in text
    assert "; T: type; optional_inputs: list(string) = []\n" in text
    assert "A node has an (optional) input when its optional_inputs attribute names it" in text
    assert main(["list", "--ops", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    row = rows["DynamicGRUV2"]
    assert [i["name"] for i in row["inputs"] if i["optional"]] == ["candidate_recurrent_bias", "seq_length"]
    assert row["signature"] == ("DynamicGRUV2(x, gate_kernel, gate_bias, candidate_kernel, candidate_bias, "
                                "init_h[, candidate_recurrent_bias][, seq_length]) -> (y, h)")
    assert row["attrs"][-1]["name"] == "optional_inputs" and row["attrs"][-1]["default"] == []
    reset_after = {a["name"]: a for a in row["attrs"]}["reset_after"]
    assert reset_after["type"] == "bool" and reset_after["default"] is False and not reset_after["required"]
    assert rows["GRUCell"]["signature"] == ("GRUCell(x, h, gate_kernel, gate_bias, candidate_kernel, candidate_bias"
                                            "[, candidate_recurrent_bias]) -> (h)")
    assert "reset_after: bool = False" in text
    assert not any(i["optional"] for i in rows["LayerNorm"]["inputs"])


def test_a_plugin_op_names_its_distribution(tmp_path):
    _install(tmp_path / "site")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCOPEFUSION_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "site"), env.get("PYTHONPATH", "")])
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    ran = subprocess.run([sys.executable, "-m", "scopefusion.cli", "list", "--ops", "--only-plugins", "sf-ops-demo"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert "ScaledCopy  (sf-ops-demo 0.3.1)" in ran.stdout
    assert "  inputs:     x: T\n  outputs:    y: T, count: int32\n  attributes: alpha: float = 0.5; T: type" \
        in ran.stdout
    ran = subprocess.run([sys.executable, "-m", "scopefusion.cli", "list", "--ops", "--json", "--only-plugins",
                          "sf-ops-demo"], capture_output=True, text=True, env=env, timeout=120)
    (row,) = [r for r in json.loads(ran.stdout) if r["name"] == "ScaledCopy"]
    assert row["origin"] == "sf-ops-demo 0.3.1" and row["attrs"][0] == {
        "name": "alpha", "type": "float", "required": False, "description": "", "default": 0.5}
