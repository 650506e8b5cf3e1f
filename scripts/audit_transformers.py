"""Audit the normalization and GELU passes on every TensorFlow model class of ``transformers``.

For each base model class of ``transformers``' TensorFlow auto mapping (``TFBertModel``,
``TFT5Model``, ...), the script builds the model from its configuration class at a tiny size
(small widths and depths, random weights: nothing is downloaded), traces it on its own dummy
inputs, freezes it, fuses it with the built-in passes, verifies the fused graph against the
original and prints one row per class:

* **found**, per op (``LayerNorm``, ``RMSNorm``, ``GroupNorm``, ``Gelu``), counted from the
  built Keras layers and never from the passes: layer norms are calls of tf_keras
  ``LayerNormalization`` layers and of transformers' own ``*LayerNorm`` layers (T5's is an RMS
  norm); RMS norms are calls of ``*RMSNorm`` layers and ``TFT5LayerNorm``; group norms are
  calls of ``*GroupNorm`` / ``GroupNormalization`` layers (a layer called twice, as Lxmert's
  shared cross-attention is, counts twice; a call whose result no output reads is pruned
  when the graph is frozen and counted apart, under **pruned**); GELUs are the layers that hold a GELU
  activation (``gelu``, ``gelu_new``, ``gelu_fast``, ``gelu_10`` of
  ``transformers.activations_tf``) as an attribute, so a GELU called inline (``tf.nn.gelu``
  in a ``call``) is not found, and a layer that calls its activation twice counts once;
* **fused**, per op, from the fusion report;
* the largest absolute difference between the original and the fused graph's outputs;
* for every op fused fewer times than found, the refusals and near misses of its passes.

A class that cannot be built at a tiny size from its configuration alone (it needs a
pretrained sub-model, a processor or inputs its dummy inputs do not provide) is listed as
skipped, with the error.  Usage::

    python scripts/audit_transformers.py [--only bert,t5,...] [--report audit.json]
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

OPS = ("LayerNorm", "RMSNorm", "GroupNorm", "Gelu")
PASSES = {
    "LayerNorm": ("ScopeLayerNormPass", "LayerNormFusionPass"),
    "RMSNorm": ("RMSNormFusionPass",),
    "GroupNorm": ("GroupNormFusionPass",),
    "Gelu": ("GeluFusionPass",),
}
#: Small values for the size fields configuration classes share (set where the class has them).
TINY = {
    "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 37, "max_position_embeddings": 64, "d_model": 32, "d_ff": 37, "d_kv": 16,
    "num_layers": 2, "num_decoder_layers": 2, "num_heads": 2, "encoder_layers": 2, "decoder_layers": 2,
    "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 37, "decoder_ffn_dim": 37,
    "n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 64, "n_ctx": 64, "embedding_size": 32,
    "emb_dim": 32, "dim": 32, "hidden_dim": 37, "n_layers": 2, "n_heads": 2, "ffn_dim": 37,
    "num_key_value_heads": 1, "image_size": 32, "patch_size": 4, "num_channels": 3, "embed_dim": 16,
    "projection_dim": 16, "max_source_positions": 32, "max_target_positions": 32, "num_mel_bins": 16,
    "input_feat_per_channel": 16, "conv_channels": 16, "rotary_dim": 8,
    "window_size": 2, "intra_bottleneck_size": 16, "true_hidden_size": 16, "block_sizes": [1, 1],
    "d_head": 8, "d_inner": 37, "mem_len": 8, "attention_window": 4, "layer_norm_eps": 1e-5,
    "num_conv_pos_embeddings": 4, "num_conv_pos_embedding_groups": 2, "conv_dim": (8, 8),
    "conv_stride": (5, 2), "conv_kernel": (10, 3), "tdnn_dim": (8,), "output_hidden_size": 32,
    "cross_attention_hidden_size": None, "cutoffs": [10, 50], "div_val": 1, "mlp_ratio": 2.0,
}
#: Per-stage lists of vision configurations: (first-stage value, growth per stage).
STAGES = {"hidden_sizes": (8, 2), "depths": (1, 1), "num_heads": (1, 1), "embed_dims": (8, 2),
          "neck_hidden_sizes": (8, 2), "num_attention_heads": (1, 1), "encoder_hidden_sizes": (8, 2),
          "decoder_hidden_size": (16, 1), "hidden_dims": (8, 2), "patch_sizes": (None, 1),
          "strides": (None, 1), "sr_ratios": (1, 1), "mlp_ratios": (2, 1), "num_encoder_blocks": (None, 1)}
#: Per model type: sizes its architecture needs on top of TINY (Swin's last stage must still
#: hold a whole window: 32 / 2 / 2**3 = 2 patches; XLNet's head size is d_model / n_head).
PER_TYPE = {
    "swin": {"patch_size": 2}, "xlnet": {"d_head": 16},
    "dpr": {"projection_dim": 0},  # 0: no projection (the default); a projection needs a static pooled shape
    "esm": {"pad_token_id": 1, "mask_token_id": 32, "vocab_size": 33},  # position ids count non-padding tokens
    # the spatial embeddings (4 coordinates, 2 sizes) concatenate to the hidden size
    "layoutlmv3": {"hidden_size": 36, "coordinate_size": 6, "shape_size": 6},
    # the last stage's width (8 * 2**3), where the attention blocks are, and its 1 x 1 resolution
    "efficientformer": {"dim": 64, "resolution": 1},
    # the prompt encoder's grid is the vision encoder's: 32 / 4 = 8 patches a side
    "sam": {"prompt_encoder_config": {"image_embedding_size": 8, "image_size": 32, "patch_size": 4}},
    "transfo-xl": {"div_val": 2, "d_embed": 32},  # div_val 1 is a path the TF model no longer implements
}
#: Per model type: attributes its configuration lacks for transformers to tell the input
#: signature (``TFPreTrainedModel.input_signature`` reads the image size and channel count).
SIGNATURE_FIELDS = {"cvt": {"image_size": 64}, "blip": {"vision_config.num_channels": 3}}


@dataclass
class Row:
    name: str
    found: dict[str, int] = field(default_factory=dict)
    #: norm calls whose computation the frozen graph does not keep (no output reads them)
    pruned: dict[str, list[str]] = field(default_factory=dict)
    fused: dict[str, int] = field(default_factory=dict)
    max_error: float | None = None
    verified: bool | None = None
    misses: list[str] = field(default_factory=list)
    skipped: str = ""
    seconds: float = 0.0


def tiny_config(config_class: Any, extra: dict[str, Any] | None = None) -> Any:
    """The configuration class built with every size field it has made small (passed to the
    constructor, so that the fields it derives from them follow), then ``extra``."""
    defaults = config_class()
    overrides: dict[str, Any] = {}
    for key, value in TINY.items():
        if not hasattr(defaults, key):
            continue
        if isinstance(getattr(defaults, key), (list, tuple)) and not isinstance(value, (list, tuple)):
            continue  # a per-stage list: STAGES sizes it
        overrides[key] = value
    for key, (first, growth) in STAGES.items():
        current = getattr(defaults, key, None)
        if first is not None and isinstance(current, (list, tuple)) and current and \
                all(isinstance(v, (int, float)) for v in current):
            overrides[key] = [type(current[0])(first * growth ** k) for k in range(len(current))]
    for sub in ("text_config", "vision_config", "audio_config"):
        child = getattr(defaults, sub, None)
        if child is not None and hasattr(child, "to_dict"):
            overrides[sub] = tiny_config(type(child)).to_dict()
    overrides.update(extra or {})
    accepted = set(inspect.signature(config_class.__init__).parameters)
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(config_class.__init__).parameters.values())
    given = {k: v for k, v in overrides.items() if k in accepted or takes_kwargs}
    for key in list(given):  # fields a class refuses to take (Funnel's layer count, XLNet's length)
        try:
            config_class(**{key: given[key]})
        except NotImplementedError:
            del given[key]
        except Exception:  # noqa: BLE001 - valid together with the other fields (conv_dim with conv_stride)
            pass
    return config_class(**given)


def gelu_functions() -> set[Any]:
    from transformers import activations_tf

    return {activations_tf.get_tf_activation(name) for name in ("gelu", "gelu_new", "gelu_fast", "gelu_10")}


NORMS = ("LayerNorm", "RMSNorm", "GroupNorm")


def norm_kind(layer: Any) -> str | None:
    """Which normalization a Keras layer is, by its type (see the module doc)."""
    import tf_keras

    name = type(layer).__name__
    if name.endswith("RMSNorm") or name == "TFT5LayerNorm":
        return "RMSNorm"
    if name.endswith("GroupNorm") or isinstance(layer, tf_keras.layers.GroupNormalization):
        return "GroupNorm"
    if isinstance(layer, tf_keras.layers.LayerNormalization) or name.endswith(("LayerNorm", "LayerNormalization")):
        return "LayerNorm"
    return None


def count_gelus(model: Any, gelus: set[Any]) -> int:
    """Layers holding a GELU activation (see the module doc)."""
    return sum(1 for layer in model._flatten_layers(include_self=False)
               for value in vars(layer).values() if _is_in(value, gelus))


def record_norm_calls(model: Any) -> list[tuple[str, str]]:
    """Make every norm layer of ``model`` note ``(kind, name scope)`` each time it is called
    while a graph is traced; returns the list the calls are noted in."""
    import tensorflow as tf

    calls: list[tuple[str, str]] = []
    for layer in model._flatten_layers(include_self=False):
        kind = norm_kind(layer)
        if kind is None:
            continue

        def counted(*args: Any, __call=layer.call, __kind=kind, **kwargs: Any) -> Any:
            calls.append((__kind, tf.get_current_name_scope()))
            return __call(*args, **kwargs)

        layer.call = counted
    return calls


#: Ops that compute nothing of a norm (what freezing leaves of a pruned call).
INERT = frozenset({"Const", "Identity", "ReadVariableOp", "NoOp", "VarHandleOp"})


def norm_counts(calls: list[tuple[str, str]], graph_def: Any) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Per kind, the calls whose scope still computes something in the frozen graph, and the
    scopes of those it pruned."""
    computing: dict[str, int] = {}
    for node in graph_def.node:
        if node.op not in INERT:
            scope = node.name.rsplit("/", 1)[0]
            while scope:
                computing[scope] = computing.get(scope, 0) + 1
                scope = scope.rpartition("/")[0]
    found = dict.fromkeys(NORMS, 0)
    pruned: dict[str, list[str]] = {}
    for kind, scope in calls:
        if computing.get(scope.rstrip("/"), 0):
            found[kind] += 1
        else:
            pruned.setdefault(kind, []).append(scope.rstrip("/"))
    return found, pruned


def _is_in(value: Any, functions: set[Any]) -> bool:
    try:
        return value in functions
    except TypeError:  # unhashable attribute values
        return False


def _signature_fields(config: Any, model_type: str) -> None:
    """Set the SIGNATURE_FIELDS of ``model_type`` on ``config`` (dotted: on a sub-configuration)."""
    for dotted, value in SIGNATURE_FIELDS.get(model_type, {}).items():
        target = config
        *path, name = dotted.split(".")
        for part in path:
            target = getattr(target, part)
        setattr(target, name, value)


def build(model_type: str, class_name: str) -> tuple[Any, Any, dict[str, Any], dict[str, Any]]:
    """The tiny model, its traced function, its input specs and its dummy inputs (valid
    values for every input: ids in the vocabulary, boxes with x0 <= x1, ...)."""
    import numpy as np
    import tensorflow as tf
    import tf_keras
    import transformers

    tf_keras.backend.clear_session()
    tf_keras.utils.set_random_seed(0)
    if model_type == "vision-text-dual-encoder":  # two models of the user's choice: a tiny ViT and BERT
        config = transformers.VisionTextDualEncoderConfig.from_vision_text_configs(
            tiny_config(transformers.ViTConfig), tiny_config(transformers.BertConfig), projection_dim=16)
    else:
        config = tiny_config(transformers.CONFIG_MAPPING[model_type], PER_TYPE.get(model_type))
    _signature_fields(config, model_type)
    model = getattr(transformers, class_name)(config)
    dummy = {k: v for k, v in model.dummy_inputs.items() if v is not None}
    model(dummy, training=False)
    rng = np.random.default_rng(0)
    model.set_weights([w + rng.normal(0.0, 0.05, np.shape(w)).astype(w.dtype) for w in model.get_weights()])
    specs = {k: tf.TensorSpec(v.shape, v.dtype, name=k) for k, v in dummy.items()}

    def fn(**inputs: Any) -> dict[str, Any]:
        out = model(inputs, training=False)
        items = out.items() if hasattr(out, "items") else enumerate(out if isinstance(out, (tuple, list)) else [out])
        return {str(k): v for k, v in items if isinstance(v, tf.Tensor)}

    return model, fn, specs, {f"{k}:0": v.numpy() for k, v in dummy.items()}


def audit(model_type: str, class_name: str, registry: Any, gelus: set[Any]) -> Row:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from tests.helpers.freeze import freeze_function

    import scopefusion

    row = Row(class_name)
    started = time.perf_counter()
    try:
        model, fn, specs, feeds = build(model_type, class_name)
        calls = record_norm_calls(model)
        graph_def, _, _ = freeze_function(fn, specs)
        row.found, row.pruned = norm_counts(calls, graph_def)
        row.found["Gelu"] = count_gelus(model, gelus)
    except Exception as exc:  # noqa: BLE001 - any failure to build is reported, not raised
        first_line = (str(exc).splitlines() or [""])[0][:160]
        row.skipped = f"could not build at a tiny size: {type(exc).__name__}: {first_line}"
        row.seconds = time.perf_counter() - started
        return row
    result = scopefusion.fuse(graph_def, registry=registry)
    report = result.report
    row.fused = {op: report.fused_count(op) for op in OPS}
    check = scopefusion.verify(graph_def, result.fused_graph_def, fused_ops=registry.fused_ops, feeds=feeds)
    row.verified = check.passed
    errors = [o.max_abs_error for o in check.outputs if o.max_abs_error is not None]
    row.max_error = max(errors) if errors else None
    for op in OPS:
        if row.fused[op] < row.found[op]:
            for name in PASSES[op]:
                pr = next((p for p in report.passes if p.name == name), None)
                if pr is None:
                    continue
                row.misses += [f"{op}: {name} refused {r.name}: {r.reason}" for r in pr.refused[:3]]
                row.misses += [f"{op}: {name} near miss {r.name}: {r.reason}" for r in pr.near_misses[:2]]
            if not row.misses or not row.misses[-1].startswith(op):
                row.misses.append(f"{op}: no pass matched or refused anything more")
    row.seconds = time.perf_counter() - started
    return row


def classes(only: set[str] | None) -> list[tuple[str, str]]:
    from transformers.models.auto.modeling_tf_auto import TF_MODEL_MAPPING_NAMES

    out = []
    for model_type, names in TF_MODEL_MAPPING_NAMES.items():
        for name in (names,) if isinstance(names, str) else names:
            if (only is None or model_type in only) and (model_type, name) not in out:
                out.append((model_type, name))
    return out


def table(rows: list[Row]) -> str:
    head = f"{'class':34} " + " ".join(f"{op:>9}" for op in OPS) + f" {'max err':>9} {'s':>5}"
    lines = [head, "-" * len(head)]
    for row in rows:
        if row.skipped:
            lines.append(f"{row.name:34} skipped: {row.skipped}")
            continue
        cells = " ".join(f"{row.fused[op]:>4}/{row.found[op]:<4}" for op in OPS)
        err = "n/a" if row.max_error is None else f"{row.max_error:.1e}"
        mark = "" if row.verified else "  VERIFY FAILED"
        lines.append(f"{row.name:34} {cells} {err:>9} {row.seconds:5.1f}{mark}")
        lines.extend(f"{'':36}{miss}" for miss in row.misses)
        lines.extend(f"{'':36}{kind}: {len(scopes)} call(s) pruned when frozen (no output reads them): "
                     f"{', '.join(scopes[:3])}" for kind, scopes in row.pruned.items())
    lines.append("cells: fused/found")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="model types to audit, comma-separated (default: all)")
    parser.add_argument("--report", help="also write the rows as JSON to this file")
    args = parser.parse_args(argv)
    import warnings

    warnings.filterwarnings("ignore")
    import scopefusion

    registry = scopefusion.load_registry(autoload=False)
    gelus = gelu_functions()
    only = set(args.only.split(",")) if args.only else None
    rows = []
    for model_type, name in classes(only):
        try:
            rows.append(audit(model_type, name, registry, gelus))
        except Exception:  # noqa: BLE001 - a failure past building is a finding: show it and go on
            rows.append(Row(name, skipped="failed after building:\n" + traceback.format_exc(limit=3)))
        print(table(rows[-1:]).splitlines()[2], flush=True)
    print()
    print(table(rows))
    if args.report:
        with open(args.report, "w") as handle:
            json.dump([asdict(r) for r in rows], handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
