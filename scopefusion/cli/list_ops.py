"""``scopefusion list --ops``: every declared fused op with its inputs, outputs, attributes and
origin (built-in, or the plugin distribution that declared it)."""
from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from .console import console

from ..core.fusion.fused_ops import REQUIRED, AttrDef, TensorArg

if TYPE_CHECKING:  # pragma: no cover
    from ..plugins.registry import Registry

def _tensor(arg: TensorArg) -> dict[str, Any]:
    return {"name": arg.name, "type_attr": arg.type_attr, "dtype": arg.dtype, "optional": arg.optional,
            "description": arg.description}


def _attr(attr: AttrDef) -> dict[str, Any]:
    row: dict[str, Any] = {"name": attr.name, "type": attr.type, "required": attr.default is REQUIRED,
                           "description": attr.description}
    if attr.default is not REQUIRED:
        row["default"] = attr.default if isinstance(attr.default, (int, float, str, bool, list, type(None))) \
            else repr(attr.default)
    return row


def fused_op_rows(registry: "Registry") -> list[dict[str, Any]]:
    """Every fused op of ``registry`` (declaration order) as plain data (``--ops --json``)."""
    return [
        {"name": op.name, "signature": op.signature(), "inputs": [_tensor(i) for i in op.inputs],
         "outputs": [_tensor(o) for o in op.outputs], "attrs": [_attr(a) for a in op.attrs],
         "origin": op.origin or "built-in", "description": op.description,
         "reference": op.reference is not None}
        for op in registry.fused_ops.values()
    ]


def _tensor_text(t: dict[str, Any]) -> str:
    return f"{t['name']}: {t['type_attr'] or t['dtype']}" + (" (optional)" if t["optional"] else "")


def _attr_text(a: dict[str, Any]) -> str:
    text = f"{a['name']}: {a['type']}"
    return text + ("" if a["required"] else f" = {a['default']!r}")


def print_fused_ops(rows: list[dict[str, Any]], out: Any) -> None:
    """One block per fused op: name and origin, description, inputs, outputs, attributes."""
    if not rows:
        out.print("No fused ops declared.")
        return
    for r in rows:
        out.print(f"{r['name']}  ({r['origin']})", markup=False)
        if r["description"]:
            out.print(f"  {r['description']}", markup=False)
        out.print(f"  inputs:     {', '.join(_tensor_text(t) for t in r['inputs']) or '-'}", markup=False)
        out.print(f"  outputs:    {', '.join(_tensor_text(t) for t in r['outputs']) or '-'}", markup=False)
        out.print(f"  attributes: {'; '.join(_attr_text(a) for a in r['attrs']) or '-'}", markup=False)
    out.print(f"{len(rows)} fused op(s). A tensor's type is the name of the type attribute that sets it (T) or a "
              "fixed dtype; an attribute without '= value' is required.", markup=False)
    if any(t["optional"] for r in rows for t in r["inputs"]):
        out.print("A node has an (optional) input when its optional_inputs attribute names it; its inputs are the "
                  "required ones, then the optional ones it names, in order.", markup=False)


def list_ops(registry: "Registry", as_json: bool) -> int:
    """``scopefusion list --ops [--json]``."""
    rows = fused_op_rows(registry)
    if as_json:
        print(json.dumps(rows, indent=2))
    else:
        print_fused_ops(rows, console())
    for line in registry.errors:
        print(f"scopefusion: error: {line}", file=sys.stderr)
    return 0
