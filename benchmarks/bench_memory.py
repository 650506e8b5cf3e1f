"""Peak memory of a fusion run above the parsed graph, measured in a process of its own.

The child process imports scopefusion and loads the registry, parses the graph file
(``scopefusion.load_model``), notes its resident set size, resets the kernel's
high-water mark (``/proc/self/clear_refs``, value 5), fuses and saves, and reads the
high-water mark again (``VmHWM``).  What the run adds on top of the parsed protobuf is
``VmHWM - VmRSS after the parse``; divided by the node count it is the figure issue
targets speak of (bytes per node).  Linux only (it reads ``/proc``).
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_CHILD = r"""
import json, sys
from pathlib import Path

def status(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise SystemExit(f"no {key} in /proc/self/status")

import scopefusion
registry = scopefusion.load_registry()
loaded = scopefusion.load_model(sys.argv[1])
nodes = len(loaded.graph_def.node)
parsed = status("VmRSS")
Path("/proc/self/clear_refs").write_text("5")
result = scopefusion.fuse(loaded, registry=registry)
scopefusion.save_graph(result.graph_def, sys.argv[2])
print(json.dumps({"nodes": nodes, "parsed_rss": parsed, "peak": status("VmHWM")}))
"""


@dataclass
class Memory:
    nodes: int
    parsed_rss: int  # bytes resident after the parse
    peak: int  # the high-water mark while fusing and saving

    @property
    def above(self) -> int:
        return self.peak - self.parsed_rss

    @property
    def per_node(self) -> float:
        return self.above / self.nodes


def measure(src: Path, dest: Path) -> Memory:
    """Fuse ``src`` into ``dest`` in a fresh process and return its memory figures."""
    run = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(dest)], capture_output=True, text=True,
                         timeout=3600)
    if run.returncode != 0:
        raise SystemExit(f"memory measurement failed:\n{run.stderr[-2000:]}")
    return Memory(**json.loads(run.stdout.strip().splitlines()[-1]))
