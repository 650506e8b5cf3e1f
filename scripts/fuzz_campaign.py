"""A long fuzzing campaign, beyond the suite's fuzz tests: many more cases of the same mutations
(tests/robustness/test_fuzz.py: spoilt real graphs, broken function libraries, constants and
import rules, truncated, random and deeply nested bytes) plus hostile passes whose results are
stock TensorFlow ops that do not fit TensorFlow's op definitions.

Each case is fused (``scopefusion.fuse``, then ``emit="tf"``) in a worker process; whatever is
accepted is imported into TensorFlow.  A worker that dies (a signal, an abort inside TensorFlow)
is counted as a process death and replaced, the campaign going on with the next case.  Printed:

* cases, and per category how they ended (refused, accepted);
* process deaths; tracebacks (anything but the tool's own ``ScopeFusionError`` escaping);
* graphs written that TensorFlow refuses to import; hangs (a case running past 30 s).

Graph cases are the suite's own, numbered on past its 25 per category (the byte cases take
``--seed``).

Usage::

    python scripts/fuzz_campaign.py                 # 200 cases per category
    python scripts/fuzz_campaign.py --cases 1000 --seed 7
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ("missing_required_attr", "extra_input", "string_for_bool", "wrong_input_dtype", "unknown_dtype_enum")


def _hostile_pass(kind: str):
    """A graph pass whose result is a stock op TensorFlow would refuse, ``kind`` telling how."""
    from scopefusion import FusedOp, OpPattern, PatternFusionBasePass, op

    class Hostile(PatternFusionBasePass):
        def define_patterns(self):
            return [OpPattern("R", op("Relu", "$x", label="relu"))]

        def fusion(self, match):
            if kind == "missing_required_attr":
                return FusedOp("Identity", inputs=["x"], attrs={})
            if kind == "extra_input":
                return FusedOp("Relu", inputs=["x", "x"], attrs={"T": 1})
            if kind == "string_for_bool":
                return FusedOp("MatMul", inputs=["x", "x"], attrs={"T": 1, "transpose_b": "yes"})
            if kind == "wrong_input_dtype":
                return FusedOp("Cast", inputs=["x"], attrs={"SrcT": 3, "DstT": 1})
            return FusedOp("Relu", inputs=["x"], attrs={"T": 77})

    Hostile.__name__ = f"Hostile_{kind}"
    return Hostile


def _worker(seed: int, cases: int, categories: list[str], start: int) -> None:
    """Run cases from position ``start`` on, one JSON line per case (written before and after)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf  # noqa: F401 - the graphs are built and imported with it
    from tests.robustness import test_fuzz as fz

    import scopefusion
    from scopefusion.plugins.registry import load_registry
    from scopefusion.testing import PassTester, graph_from_function

    registry = load_registry(autoload=False)
    graphs = {"dense_gelu": fz._dense_gelu(), "bert": fz.bert_style_encoder(layers=1, hidden=16, heads=2, seq=4,
                                                                         batch=1, seed=0).graph_def,
              "tf1_while": graph_from_function(fz._loop, tf.TensorSpec([2, 3], tf.float32, "x")),
              "functional_while": fz._functional_loop()}
    plan = [(c, k) for k in range(cases) for c in categories]
    for position in range(start, len(plan)):
        category, k = plan[position]
        print(json.dumps({"position": position, "category": category, "started": True}), flush=True)
        verdict, detail = "accepted", ""
        try:
            if category in HOSTILE:
                graph = graph_from_function(lambda x: tf.nn.relu(x * 2.0), tf.TensorSpec([2, 3], tf.float32, "x"))
                result = PassTester().with_passes([_hostile_pass(category)]).run(graph, strict=False)
                graph_def = result.fused_graph_def
            else:
                rng = random.Random(f"{seed}:{category}:{k}")
                if category in fz.BYTE_MUTATIONS:
                    data, fmt, _ = fz.BYTE_MUTATIONS[category](graphs, rng)
                    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"campaign_{os.getpid()}.{fmt}"
                    path.write_bytes(data)
                    target = str(path)
                else:
                    target = fz._graph_case(graphs, category, k).graph  # the suite's case ``k`` of it
                with fz.time_limit():
                    graph_def = scopefusion.fuse(target, emit="tf", registry=registry).graph_def
            problem = fz.import_problem(graph_def)
            if problem:
                verdict, detail = "written_refused_by_tf", problem[:300]
        except scopefusion.ScopeFusionError as exc:
            verdict, detail = "refused", str(exc)[:200]
        except fz.CaseTimeout as exc:
            verdict, detail = "hang", str(exc)
        except Exception as exc:  # noqa: BLE001 - what the campaign looks for
            verdict, detail = "traceback", f"{type(exc).__name__}: {str(exc)[:300]}"
        print(json.dumps({"position": position, "category": category, "verdict": verdict, "detail": detail}),
              flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200, help="cases per category")
    parser.add_argument("--seed", type=int, default=20240917)
    parser.add_argument("--case-seconds", type=float, default=120)
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.worker:
        _worker(args.seed, args.cases, args.worker[0].split(","), int(args.worker[1]))
        return 0
    from tests.robustness import test_fuzz as fz

    categories = [*fz.GRAPH_CATEGORIES, *fz.BYTE_CATEGORIES, *HOSTILE]
    total = args.cases * len(categories)
    outcomes: dict[str, Counter] = {}
    deaths, examples, position, started = 0, [], 0, time.monotonic()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    while position < total:
        command = [sys.executable, __file__, "--cases", str(args.cases), "--seed", str(args.seed),
                   "--worker", ",".join(categories), str(position), "-"]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        current = position
        assert proc.stdout is not None
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            current = record["position"]
            if "verdict" in record:
                outcomes.setdefault(record["category"], Counter())[record["verdict"]] += 1
                if record["verdict"] not in ("refused", "accepted") and len(examples) < 20:
                    examples.append(f"{record['category']} #{current}: {record['verdict']}: {record['detail']}")
                current += 1
        code = proc.wait()
        if current < total and code != 0:  # the worker died during case ``current``
            deaths += 1
            category = categories[current % len(categories)]
            outcomes.setdefault(category, Counter())["process_death"] += 1
            examples.append(f"{category} #{current}: the worker died with status {code}")
            current += 1
        position = max(current, position + 1) if code != 0 else total
    verdicts = Counter()
    for category, counter in sorted(outcomes.items()):
        verdicts.update(counter)
        print(f"{category:24s} " + ", ".join(f"{n} {v}" for v, n in sorted(counter.items())))
    print(f"\n{sum(verdicts.values())} cases in {time.monotonic() - started:.0f} s: "
          f"{verdicts['refused']} refused with a reason, {verdicts['accepted']} accepted (imported by TensorFlow), "
          f"{deaths} process deaths, {verdicts['traceback']} tracebacks, "
          f"{verdicts['written_refused_by_tf']} graphs written that TensorFlow refuses")
    for line in examples:
        print("  " + line)
    return 0 if not (deaths or verdicts["traceback"] or verdicts["written_refused_by_tf"]) else 1


if __name__ == "__main__":
    sys.exit(main())
