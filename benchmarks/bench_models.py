"""Benchmark: ``scopefusion run`` on real frozen models, against a Python floor.

Users convert one model of a few hundred to a few thousand nodes at a time, so the speed they
feel is the wall time of the command.  This script builds real models once with the libraries'
own code (random weights) and freezes each to a ``.pb`` in a cache directory (``--cache``,
default ``~/.cache/scopefusion-bench``; ``--rebuild`` builds them again):

* ``transformers-bert``: ``transformers.TFBertModel``, 12 layers;
* ``transformers-bart``: ``transformers.TFBartModel``, 6 encoder and 6 decoder layers;
* ``transformers-gpt2``: ``transformers.TFGPT2Model``, 12 layers;
* ``keras-mobilenet-v2``: ``keras.applications.MobileNetV2`` (Keras 3) on 32x32 images;
* ``keras-densenet``: the DenseNet of the concat tests (Keras 3 convolutions, batch norms, concats);
* ``tf-keras-lstm-gru``: a tf_keras ``Sequential`` of an ``LSTM`` and a ``GRU`` (loops lowered
  to TF1 control flow);
* ``tf-slim-bert``: a 12-layer BERT-style encoder with ``tf_slim.layers.layer_norm``.

Then, for each model, it times in fresh processes, each the median and the fastest of ``--repeat``
runs after one untimed run (as ``hyperfine`` does, with compiled bytecode kept in a temporary
directory, as an installed package has it):

* ``python -m scopefusion run MODEL -o OUT -q``;
* the *Python floor*: ``python -c`` importing numpy and protobuf and reading the same file, the
  least any fusion tool written in Python does.

It prints per model the node count, both medians, the ratio of the medians, and whether the run
imported TensorFlow (one more run, asked of ``sys.modules``); and the median and the largest ratio
over the models.

Usage::

    python benchmarks/bench_models.py [--repeat 5] [--models transformers-bert,tf-keras-lstm-gru]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the test suite's model builders (tests/models)

#: The Python floor: a process that imports numpy and protobuf and reads the model file.
FLOOR = "import sys, numpy, google.protobuf.message\nopen(sys.argv[1], 'rb').read()\n"


# --------------------------------------------------------------------------- models
def _transformers_bert() -> Any:
    from tests.models.activation_models import transformers_bert
    return transformers_bert(num_layers=12).graph_def


def _transformers_gpt2() -> Any:
    from tests.models.activation_models import transformers_gpt2
    return transformers_gpt2(num_layers=12).graph_def


def _transformers_bart() -> Any:
    import tensorflow as tf
    import tf_keras
    from transformers import BartConfig, TFBartModel

    from tests.helpers.freeze import freeze_function

    tf_keras.utils.set_random_seed(0)
    config = BartConfig(vocab_size=50, d_model=16, encoder_layers=6, decoder_layers=6, encoder_attention_heads=2,
                        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                        max_position_embeddings=32, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    model = TFBartModel(config, name="bart")
    names = ("input_ids", "attention_mask", "decoder_input_ids")
    model({k: tf.ones([2, 8], tf.int32) for k in names}, training=False)
    specs = {k: tf.TensorSpec([2, 8], tf.int32, name=k) for k in names}
    graph_def, _, _ = freeze_function(
        lambda **inputs: {"last_hidden_state": model(inputs, training=False).last_hidden_state}, specs)
    return graph_def


def _keras_mobilenet_v2() -> Any:
    from tests.models.corpus_models import keras_mobilenet_v2
    return keras_mobilenet_v2().graph_def


def _keras_densenet() -> Any:
    from tests.models.concat_models import keras_densenet
    return keras_densenet().graph_def


def _tf_keras_lstm_gru() -> Any:
    from tests.models.rnn_models import keras_lstm_gru
    return keras_lstm_gru().graph_def


def _tf_slim_bert() -> Any:
    from tests.models.model_builders import bert_style_encoder
    return bert_style_encoder(layers=12).graph_def


MODELS: dict[str, Callable[[], Any]] = {
    "transformers-bert": _transformers_bert,
    "transformers-bart": _transformers_bart,
    "transformers-gpt2": _transformers_gpt2,
    "keras-mobilenet-v2": _keras_mobilenet_v2,
    "keras-densenet": _keras_densenet,
    "tf-keras-lstm-gru": _tf_keras_lstm_gru,
    "tf-slim-bert": _tf_slim_bert,
}


def build_models(names: Sequence[str], cache: Path, rebuild: bool) -> dict[str, Path]:
    """Each model's ``.pb`` in ``cache``, built (in this process, with TensorFlow) when missing."""
    cache.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in names:
        path = cache / f"{name}.pb"
        if rebuild or not path.exists():
            print(f"building {name} ...", file=sys.stderr, flush=True)
            graph_def = MODELS[name]()
            path.write_bytes(graph_def.SerializeToString())
        paths[name] = path
    return paths


# --------------------------------------------------------------------------- timing
def child_environment(bytecode_dir: Path) -> dict[str, str]:
    """Fresh processes that keep compiled bytecode (as an installed package has it) and find
    this checkout's scopefusion."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(bytecode_dir)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def time_process(argv: Sequence[str], repeat: int, env: dict[str, str]) -> list[float]:
    """Wall times of ``repeat`` runs of a fresh process, after one untimed run."""
    subprocess.run(list(argv), capture_output=True, text=True, timeout=900, env=env)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run = subprocess.run(list(argv), capture_output=True, text=True, timeout=900, env=env)
        times.append(time.perf_counter() - t0)
        if run.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed:\n{run.stderr[-2000:]}")
    return times


#: Runs the command line and writes whether TensorFlow got imported to the file ``sys.argv[1]``.
_SEEN = ("import json, sys\n"
         "from scopefusion.cli import main\n"
         "main(json.loads(sys.argv[2]))\n"
         "open(sys.argv[1], 'w').write(str('tensorflow' in sys.modules))\n")


def imports_tensorflow(args: Sequence[str], env: dict[str, str], folder: Path) -> bool:
    """Whether ``scopefusion ARGS`` imports TensorFlow (one more run, asked of ``sys.modules``)."""
    seen = folder / "seen.txt"
    subprocess.run([sys.executable, "-c", _SEEN, str(seen), json.dumps(list(args))], capture_output=True, text=True,
                   timeout=900, env=env, check=True)
    return seen.read_text() == "True"


def node_count(path: Path) -> int:
    from scopefusion.core.graph.protos import message_class

    graph = message_class("GraphDef")()
    graph.ParseFromString(path.read_bytes())
    return len(graph.node)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated, of: " + ", ".join(MODELS))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "scopefusion-bench")
    parser.add_argument("--rebuild", action="store_true", help="build the cached models again")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"unknown model {unknown[0]!r}; known: {', '.join(MODELS)}")
    paths = build_models(names, args.cache, args.rebuild)
    ratios = []
    print(f"{'model':<20} {'nodes':>6} {'run':>7} {'max':>7} {'floor':>7} {'ratio':>6}  TensorFlow imported")
    with tempfile.TemporaryDirectory() as tmp:
        env = child_environment(Path(tmp) / "bytecode")
        for name in names:
            out = Path(tmp) / f"{name}_fused.pb"
            cli_args = ["run", str(paths[name]), "-o", str(out), "-q"]
            run = [sys.executable, "-m", "scopefusion", *cli_args]
            floor = [sys.executable, "-c", FLOOR, str(paths[name])]
            runs = time_process(run, args.repeat, env)
            floors = time_process(floor, args.repeat, env)
            ratio = statistics.median(runs) / statistics.median(floors)
            ratios.append(ratio)
            tensorflow = "yes" if imports_tensorflow(cli_args, env, Path(tmp)) else "no"
            print(f"{name:<20} {node_count(paths[name]):>6} {statistics.median(runs):>7.3f} {max(runs):>7.3f} "
                  f"{statistics.median(floors):>7.3f} {ratio:>6.1f}  {tensorflow}", flush=True)
    print(f"ratio to the Python floor over {len(ratios)} models: median {statistics.median(ratios):.1f}x, "
          f"largest {max(ratios):.1f}x")


if __name__ == "__main__":
    main()
