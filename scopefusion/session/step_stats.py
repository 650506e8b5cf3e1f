"""Profiling output: per-op times of a run, read from TensorFlow's step statistics.

With ``profiling_mode``, every run is traced and two files are written to the
``output`` directory of ``profiling_options``:

* ``run_<k>.op_times.json``: every node TensorFlow executed (name, op type,
  device, start relative to the run's first node, duration in microseconds),
  the total time per fused op and per op type;
* ``run_<k>.trace.json``: the same as a Chrome trace (``chrome://tracing`` or
  Perfetto), one row per device and thread.

A fused op runs as a call of its reference implementation, which TensorFlow
inlines: the nodes it executes are named ``<fused op>/...`` (and
``Func/<fused op>/...`` for the call's own plumbing) and are no nodes of the
graph.  Such nodes are counted towards the fused op.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

FUNC_PREFIX = "Func/"


def _fused_owner(node: str, graph_nodes: Mapping[str, str], fused: Mapping[str, str]) -> str | None:
    """The fused op a node belongs to: itself, or the longest fused-op name its
    name starts with when it is no node of the graph."""
    if node in fused:
        return node
    if node in graph_nodes:
        return None
    name = node[len(FUNC_PREFIX):] if node.startswith(FUNC_PREFIX) else node
    owner, prefix = None, ""
    for part in name.split("/")[:-1]:
        prefix = f"{prefix}/{part}" if prefix else part
        if prefix in fused:
            owner = prefix
    return owner


def _op_type(node: str, label: str, graph_nodes: Mapping[str, str]) -> str:
    if node in graph_nodes:
        return graph_nodes[node]
    _, sep, call = label.partition(" = ")
    return call.split("(")[0].strip() if sep else ""


def profile(step_stats: Any, run: int, step: int | None, graph_nodes: Mapping[str, str],
            fused: Mapping[str, str]) -> dict[str, Any]:
    """The per-op times of one run.  ``graph_nodes``: node name -> op type (a fused
    op's type for fused ops); ``fused``: fused op name -> fused op type."""
    stats = [(dev.device, ns) for dev in step_stats.dev_stats for ns in dev.node_stats]
    start = min((ns.all_start_micros for _, ns in stats), default=0)
    nodes: list[dict[str, Any]] = []
    per_fused: dict[str, dict[str, Any]] = {}
    per_type: dict[str, dict[str, int]] = {}
    for device, ns in sorted(stats, key=lambda item: item[1].all_start_micros):
        owner = _fused_owner(ns.node_name, graph_nodes, fused)
        op = _op_type(ns.node_name, ns.timeline_label, graph_nodes)
        duration = int(ns.all_end_rel_micros)
        nodes.append({"node": ns.node_name, "op": op, "device": device, "thread": int(ns.thread_id),
                      "start_us": int(ns.all_start_micros - start), "duration_us": duration, "fused_op": owner})
        if owner is not None:
            entry = per_fused.setdefault(owner, {"name": owner, "type": fused[owner], "duration_us": 0, "nodes": 0})
            entry["duration_us"] += duration
            entry["nodes"] += 1
        kind = fused[owner] if owner is not None else op
        totals = per_type.setdefault(kind, {"duration_us": 0, "nodes": 0})
        totals["duration_us"] += duration
        totals["nodes"] += 1
    end = max((n["start_us"] + n["duration_us"] for n in nodes), default=0)
    return {"run": run, "step": step, "total_us": end, "nodes": nodes, "fused_ops": list(per_fused.values()),
            "op_types": dict(sorted(per_type.items(), key=lambda kv: -kv[1]["duration_us"]))}


def chrome_trace(times: Mapping[str, Any]) -> dict[str, Any]:
    """A Chrome trace of one run's per-op times."""
    devices: dict[str, int] = {}
    events: list[dict[str, Any]] = []
    for n in times["nodes"]:
        if n["device"] not in devices:
            devices[n["device"]] = len(devices)
            events.append({"ph": "M", "name": "process_name", "pid": devices[n["device"]],
                           "args": {"name": n["device"]}})
        name = n["op"] or n["node"]
        args = {"node": n["node"]}
        if n["fused_op"] is not None:
            args["fused_op"] = n["fused_op"]
        events.append({"ph": "X", "name": name, "cat": "fused" if n["fused_op"] else "op",
                       "pid": devices[n["device"]], "tid": n["thread"], "ts": n["start_us"],
                       "dur": n["duration_us"], "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_profile(directory: str, times: Mapping[str, Any]) -> list[str]:
    """Write the op-times JSON and the Chrome trace of one run; returns their paths."""
    stem = os.path.join(directory, f"run_{times['run']}")
    paths = [f"{stem}.op_times.json", f"{stem}.trace.json"]
    for path, content in zip(paths, (times, chrome_trace(times)), strict=True):
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(content, handle, indent=1)
    return paths
