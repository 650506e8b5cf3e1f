"""Benchmark: the wall time of ``scopefusion run`` on a model of a few thousand nodes.

For the common case, a model of a few thousand nodes, the fusion itself takes
milliseconds: what the user waits for is the command.  This script generates a
BERT-style graph of ``--nodes`` nodes (default 5,000; see ``bench_graphs.py``),
then times, each as the best of ``--repeat`` fresh processes:

* ``scopefusion run MODEL -o OUT`` (the whole command);
* ``python -c "import scopefusion.cli"`` (starting Python and importing the command);
* ``python -c "import google.protobuf"`` (the floor: Python and protobuf), to which the
  parse of the same file (timed here, in process) is added.

Each command runs once untimed first, and all of them with compiled bytecode (in a
temporary directory), as from an installed package: a run that compiled the sources
every time would measure Python's compiler, not the command.

Usage::

    python benchmarks/bench_cli.py [--nodes 5000] [--repeat 3] [--graph bert]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_graphs import GRAPH_KINDS, make_generator  # noqa: E402


def child_environment(bytecode_dir: Path) -> dict[str, str]:
    """The environment of the timed processes: Python may write and read compiled bytecode,
    kept in ``bytecode_dir``, as an installed package has it (``pip install`` compiles every
    module).  Without it (``PYTHONDONTWRITEBYTECODE`` set and no ``__pycache__``), every run
    compiles the package's sources again, which no user's installation does."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(bytecode_dir)
    return env


def best_process(argv: Sequence[str], repeat: int, env: dict[str, str]) -> float:
    """The fastest wall time of ``repeat`` runs of a fresh process, after one untimed run
    (which compiles the bytecode and, on a new machine, builds the op cache)."""
    subprocess.run(list(argv), capture_output=True, text=True, timeout=600, env=env)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        run = subprocess.run(list(argv), capture_output=True, text=True, timeout=600, env=env)
        elapsed = time.perf_counter() - t0
        if run.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed:\n{run.stderr[-2000:]}")
        best = min(best, elapsed)
    return best


def parse_seconds(path: Path, repeat: int) -> float:
    from tensorflow.core.framework import graph_pb2

    data = path.read_bytes()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        graph_pb2.GraphDef().ParseFromString(data)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", choices=GRAPH_KINDS, default="bert")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    gen = make_generator(args.graph, hidden=16, heads=4, batch=2, seq=8, seed=0)
    generated = gen.build(gen.units_for(args.nodes))
    with tempfile.TemporaryDirectory(prefix="bench_cli.") as tmp:
        src, out = Path(tmp) / "model.pb", Path(tmp) / "fused.pb"
        src.write_bytes(generated.graph_def.SerializeToString())
        nodes = len(generated.graph_def.node)
        python = sys.executable
        env = child_environment(Path(tmp) / "bytecode")
        run = best_process([python, "-m", "scopefusion.cli", "run", str(src), "-o", str(out)], args.repeat, env)
        imports = best_process([python, "-c", "import scopefusion.cli"], args.repeat, env)
        protobuf = best_process([python, "-c", "import google.protobuf"], args.repeat, env)
        parse = parse_seconds(src, args.repeat)
    floor = protobuf + parse
    print(f"{args.graph} graph of {nodes} nodes ({src.name}), best of {args.repeat} processes, seconds:")
    print(f"   scopefusion run MODEL -o OUT          {run:7.3f}")
    print(f"   python -c 'import scopefusion.cli'    {imports:7.3f}")
    print(f"   python -c 'import google.protobuf'    {protobuf:7.3f}")
    print(f"   + parse of the same file               {parse:7.3f}")
    print(f"   floor (protobuf import + parse)        {floor:7.3f}")
    print(f"   ratio run / floor                      {run / floor:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
