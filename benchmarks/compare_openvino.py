"""Compare: which attention blocks scopefusion fuses, and which OpenVINO's converter does, on the same graphs.

The graphs are real transformer code, tiny and with random weights, frozen: transformers' TF
``TFBertModel``, ``TFGPT2Model`` and ``TFViTModel``, keras-hub's ``LlamaBackbone`` and Keras 3
``MultiHeadAttention`` without and with a causal mask (the builders of ``tests/models/attention_models.py``,
two layers each, one attention per layer).

For each graph it prints:

* ``attn``: the attention blocks the model's code computes;
* ``scopefusion``: the ``ScaledDotProductAttention`` ops ``scopefusion.fuse`` made (the built-in passes),
  the run's time, and whether the fused graph verifies (TensorFlow runs it, the fused ops through their
  reference implementations, against the original; the largest difference);
* when ``openvino`` is installed (``pip install scopefusion[compare]``): its ``ScaledDotProductAttention``
  ops after ``openvino.convert_model`` (which applies its MOC transformations), after applying them once
  more (``apply_moc_transformations``), and the CPU plugin's attention nodes in the compiled model
  (runtime layer types naming attention), with the conversion's time.

Usage::

    python benchmarks/compare_openvino.py
    python benchmarks/compare_openvino.py --models transformers_bert,keras_mha_causal
    python benchmarks/compare_openvino.py --models all
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the model builders of the tests

SDPA = "ScaledDotProductAttention"


def builders() -> dict[str, Callable[[], Any]]:
    """The default set (six model codes), then every real model code of the attention tests (``--models all``)."""
    from tests.models import attention_models as atm

    return {
        "transformers_bert": atm.transformers_bert,
        "transformers_gpt2": atm.transformers_gpt2,
        "transformers_vit": atm.transformers_vit,
        "keras_hub_llama": lambda: atm.keras_hub_backbone("llama"),
        "keras_mha": lambda: atm.keras_mha("none"),
        "keras_mha_causal": lambda: atm.keras_mha("causal"),
    }


def all_builders() -> dict[str, Callable[[], Any]]:
    """Every real model code the attention tests build (not the hand-written forms; TF Model Garden
    where it is importable)."""
    from tests.models import attention_backbones as atb
    from tests.models import attention_models as atm

    real = {k: v for k, v in atm.ATTENTION_FORMS.items() if not k.startswith("hand_written")}
    real.update({"transformers_swin": atm.transformers_swin, **atb.BACKBONE_FORMS})
    try:
        import official.nlp.modeling  # noqa: F401  (TF Model Garden, when installed)
    except ImportError:
        pass
    else:
        real.update(atb.MODEL_GARDEN_FORMS)
    return real


def with_scopefusion(model: Any, registry: Any) -> dict[str, Any]:
    import scopefusion

    t0 = time.perf_counter()
    result = scopefusion.fuse(model.graph_def, registry=registry)
    seconds = time.perf_counter() - t0
    check = scopefusion.verify(model.graph_def, result.fused_graph_def, fused_ops=registry.fused_ops,
                               input_shapes=model.input_shapes, int_range=model.int_range, runs=2)
    error = max((o.max_abs_error for o in check.outputs), default=float("nan"))
    return {"fused": result.report.fused_count(SDPA), "seconds": seconds, "verified": check.passed, "error": error}


def with_openvino(model: Any, workdir: Path) -> dict[str, Any]:
    import openvino as ov
    from openvino._offline_transformations import apply_moc_transformations

    path = workdir / "model.pb"
    path.write_bytes(model.graph_def.SerializeToString())
    t0 = time.perf_counter()
    converted = ov.convert_model(str(path))
    seconds = time.perf_counter() - t0
    after_convert = _count(converted, SDPA)
    apply_moc_transformations(converted, cf=False)
    after_moc = _count(converted, SDPA)
    compiled = ov.Core().compile_model(converted, "CPU")
    runtime = compiled.get_runtime_model().get_ops()
    layers = collections.Counter(op.get_rt_info()["layerType"].astype(str) for op in runtime)
    cpu = sum(n for layer, n in layers.items() if "attn" in layer.lower() or "attention" in layer.lower())
    return {"convert": after_convert, "moc": after_moc, "cpu": cpu, "seconds": seconds,
            "softmax": _count(converted, "Softmax")}


def _count(model: Any, type_name: str) -> int:
    return sum(op.get_type_name() == type_name for op in model.get_ops())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="",
                        help="comma-separated model names, or 'all' for every real model code of the attention "
                             "tests (default: six of them)")
    args = parser.parse_args(argv)
    import tensorflow as tf

    from scopefusion import __version__, load_registry

    known = all_builders() if args.models == "all" else builders()
    names = [n for n in args.models.split(",") if n and n != "all"] or list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(known)}")
    try:
        import openvino as ov
        openvino = f"openvino {ov.__version__.split('-')[0]}"
    except ImportError:
        ov, openvino = None, "openvino not installed (pip install scopefusion[compare]): its columns are empty"
    print(f"scopefusion {__version__}, tensorflow {tf.__version__}, {openvino}")
    registry = load_registry()
    header = ("model", "attn", "scopefusion", "s", "verified (max err)", "ov convert", "ov MOC", "ov CPU attn",
              "ov Softmax left", "ov s")
    rows = []
    with tempfile.TemporaryDirectory(prefix="compare_openvino.") as tmp:
        for name in names:
            model = known[name]()
            ours = with_scopefusion(model, registry)
            row = [name, str(model.attentions), str(ours["fused"]), f"{ours['seconds']:.3f}",
                   f"{'yes' if ours['verified'] else 'NO'} ({ours['error']:.1e})"]
            if ov is None:
                row += ["", "", "", "", ""]
            else:
                try:
                    theirs = with_openvino(model, Path(tmp))
                    row += [str(theirs["convert"]), str(theirs["moc"]), str(theirs["cpu"]), str(theirs["softmax"]),
                            f"{theirs['seconds']:.3f}"]
                except Exception as error:  # a graph OpenVINO cannot convert: say so, keep going
                    row += [f"error: {type(error).__name__}: {str(error).splitlines()[0][:60]}", "", "", "", ""]
            rows.append(row)
            print("  " + " | ".join(row), flush=True)
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
