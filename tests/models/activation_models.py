"""Frozen graphs with GELU activations and matmul + bias products, built by the
real libraries that produce them (TensorFlow, tf_slim, tf_keras, Keras 3,
keras-hub, transformers) or, where the code is not a pip package
(google-research BERT, openai GPT-2), by the few lines those repositories
write, copied as they write them.

Every builder returns an :class:`ActivationModel`: the frozen GraphDef, a
realistic feed, and what is known about the model by construction: how many
GELUs (``gelus``) and matmul + bias products (``matmul_bias_adds``) its code
computes, with the attributes the fused ops must carry, and op types the form
must contain (``signature``), so that a test can tell the builder produced
the form it claims. Sizes are tiny (hidden 8-32, 1-2 layers, batch 2); the
weights are random (nothing is downloaded). Written against TensorFlow 2.21,
Keras 3.15, tf_keras 2.21, keras-hub 0.32, tf_slim 1.1 and transformers 4.57
(the last series with TensorFlow classes).

``GELU_FORMS``, ``GELU_LOOK_ALIKES``, ``MATMUL_BIAS_FORMS`` and
``MATMUL_BIAS_REFUSALS`` name every builder, for parametrized tests.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from tests.helpers.freeze import freeze_function, freeze_graph
from tests.models.model_builders import FrozenModel


@dataclass(repr=False)
class ActivationModel(FrozenModel):
    """A frozen model and the fused ops its code calls for."""

    name: str = ""
    gelus: int = 0  # GELUs in the model code: ``Gelu`` nodes expected after fusion
    approximate: bool | None = None  # the ``approximate`` attribute of every expected Gelu
    matmul_bias_adds: int = 0  # matmul + 1-D bias products: ``MatMulBiasAdd`` nodes expected
    transpose: tuple[bool, bool] = (False, False)  # (transpose_a, transpose_b) of every expected MatMulBiasAdd
    signature: tuple[str, ...] = ()  # op types the form is made of (each present in the graph)
    gelu_input: str | None = None  # the tensor every fused Gelu must read, where no other pass renames it
    input_shapes: str | None = None  # for ``scopefusion.verify`` where an input has unknown dimensions
    int_range: tuple[int, int] = (0, 10)  # a range valid for every int input

    def __repr__(self) -> str:  # short, for assertion messages
        return f"ActivationModel({self.name!r}, gelus={self.gelus}, matmul_bias_adds={self.matmul_bias_adds})"


# ------------------------------------------------------------------ helpers


def tf1_layers():
    """The module ``tf.compat.v1.layers`` resolves to (tf_keras' legacy layers);
    with Keras 3 installed ``tf.compat.v1.layers.dense`` itself refuses to run."""
    from tf_keras.api._v1.keras.__internal__.legacy import layers

    return layers


def _traced(name: str, fn: Callable, specs: dict, rng: np.random.Generator, **known: Any) -> ActivationModel:
    """Trace ``fn(**specs)`` (a ``tf.function``), freeze it, and feed it normal floats / small ints."""
    graph_def, outputs, _ = freeze_function(fn, specs)
    lo, hi = known.get("int_range", (0, 10))
    feeds = {}
    for key, spec in specs.items():
        shape = [2 if d is None else d for d in spec.shape.as_list()]
        if spec.dtype.is_floating:
            feeds[f"{key}:0"] = rng.normal(size=shape).astype(spec.dtype.as_numpy_dtype)
        else:
            feeds[f"{key}:0"] = rng.integers(lo, hi, size=shape).astype(spec.dtype.as_numpy_dtype)
    return ActivationModel(graph_def, feeds, outputs, name=name, **known)


def _tf1(name: str, build: Callable, seed: int = 0, **known: Any) -> ActivationModel:
    """A TF1 graph (``tests.helpers.freeze.freeze_graph``): ``build()`` returns (feeds, output tensors)."""
    with warnings.catch_warnings():  # tf.compat.v1.layers and tf_slim say they are deprecated
        warnings.filterwarnings("ignore", r".*(is deprecated|`layer.apply`)", UserWarning)
        graph_def, feeds, outputs = freeze_graph(build, seed)
    return ActivationModel(graph_def, feeds, outputs, name=name, **known)


def _spec(shape, name: str = "x", dtype: str = "float32"):
    import tensorflow as tf

    return tf.TensorSpec(shape, tf.as_dtype(dtype), name=name)


def _randomize_keras(layers, seed: int, scale: float = 0.5) -> None:
    """Give every weight (biases too, which start at zero) random values."""
    rng = np.random.default_rng(seed)
    for layer in layers:
        layer.set_weights([rng.normal(0.0, scale, np.shape(w)).astype(np.float32) for w in layer.get_weights()])


def _perturb_keras(model, seed: int, scale: float = 0.05) -> None:
    """Add noise to every weight of a whole model (keeps layer-norm gammas near 1)."""
    rng = np.random.default_rng(seed)
    model.set_weights([w + rng.normal(0.0, scale, np.shape(w)).astype(w.dtype) for w in model.get_weights()])


def _initializers(seed: int):
    import tensorflow as tf

    tf1 = tf.compat.v1
    return (tf1.random_normal_initializer(stddev=0.5, seed=seed),
            tf1.random_normal_initializer(stddev=0.5, seed=seed + 100))


def run(model: FrozenModel) -> list[np.ndarray]:
    """Run the frozen graph in plain TensorFlow on ``model.inputs``."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(model.graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as sess:
        return sess.run(list(model.outputs), dict(model.inputs))


def expression(graph_def, tensor: str, *, stop: Callable[[Any], bool] | None = None, depth: int = 16,
               names: bool = False) -> str:
    """The subgraph that computes ``tensor``, as a nested expression of op types:
    ``Mul(Mul(x, Const 0.5), AddV2(Const 1.0, Erf(...)))``, operands in input-slot
    order. Constants show their value (small ones) and dtype; placeholders and the
    nodes ``stop`` accepts are leaves shown by name; ``names`` adds ``@node`` to ops."""
    from tensorflow.python.framework import tensor_util

    nodes = {n.name: n for n in graph_def.node}

    def show(ref: str, level: int) -> str:
        name, _, port = ref.lstrip("^").partition(":")
        node = nodes[name]
        suffix = f":{port}" if port not in ("", "0") else ""
        if node.op == "Const":
            value = tensor_util.MakeNdarray(node.attr["value"].tensor)
            dtype = value.dtype.name
            text = np.array2string(value, precision=9) if value.size <= 4 else f"{list(value.shape)}"
            return f"Const {text} {dtype}" + (f"@{name}" if names else "")
        if node.op == "Placeholder" or (stop is not None and stop(node)):
            return f"{name}{suffix}"
        if level >= depth:
            return f"{node.op}@{name}..."
        args = ", ".join(show(i, level + 1) for i in node.input if not i.startswith("^"))
        return f"{node.op}{'@' + name if names else ''}({args}){suffix}"

    return show(tensor, 0)


# ------------------------------------------------------- GELU as libraries write it


def bert_gelu_erf(input_tensor):
    """google-research/bert ``modeling.py`` ``gelu``, the original erf version (that
    repository is not a pip package, so its lines are written here as it writes them,
    with ``tf.math.erf`` for TF1's ``tf.erf``)."""
    import tensorflow as tf

    cdf = 0.5 * (1.0 + tf.math.erf(input_tensor / tf.sqrt(2.0)))
    return input_tensor * cdf


def bert_gelu_tanh(x):
    """google-research/bert ``modeling.py`` ``gelu``, the later tanh version (written here as there)."""
    import tensorflow as tf

    cdf = 0.5 * (1.0 + tf.tanh(
        (np.sqrt(2 / np.pi) * (x + 0.044715 * tf.pow(x, 3)))))
    return x * cdf


def gpt2_gelu(x):
    """openai/gpt-2 ``src/model.py`` ``gelu`` (written here as there)."""
    import tensorflow as tf

    return 0.5*x*(1+tf.tanh(np.sqrt(2/np.pi)*(x+0.044715*tf.pow(x, 3))))


def _bert_ffn(name: str, gelu: Callable, approximate: bool, layers: int = 2, hidden: int = 8,
              intermediate: int = 16, seed: int = 0, signature=()) -> ActivationModel:
    """BERT's transformer feed-forward (google-research/bert ``transformer_model``):
    ``tf.layers.dense(..., activation=intermediate_act_fn)`` then a dense back and a
    residual, ``layers`` times, in a TF1 graph; the activation runs unscoped inside
    the dense layer's scope (``layer_<i>/intermediate/dense/...``)."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    dense = tf1_layers().dense
    rng = np.random.default_rng(seed)

    def build():
        x = tf1.placeholder(tf.float32, [2, hidden], name="x")
        h = x
        for i in range(layers):
            kernel, bias = _initializers(seed + i)
            with tf1.variable_scope(f"layer_{i}"):
                with tf1.variable_scope("intermediate"):
                    inter = dense(h, intermediate, activation=gelu, kernel_initializer=kernel,
                                  bias_initializer=bias)
                with tf1.variable_scope("output"):
                    h = dense(inter, hidden, kernel_initializer=kernel, bias_initializer=bias) + h
        return {x: rng.normal(size=(2, hidden)).astype(np.float32)}, [tf.identity(h, name="out")]

    return _tf1(name, build, seed, gelus=layers, approximate=approximate, matmul_bias_adds=2 * layers,
                signature=signature)


def bert_erf(layers: int = 2) -> ActivationModel:
    return _bert_ffn("bert_erf", bert_gelu_erf, False, layers, signature=("Erf", "RealDiv", "Sqrt"))


def bert_tanh(layers: int = 2) -> ActivationModel:
    return _bert_ffn("bert_tanh", bert_gelu_tanh, True, layers, signature=("Tanh", "Pow"))


def gpt2_mlp(layers: int = 2, n_embd: int = 8, seq: int = 4, seed: int = 0) -> ActivationModel:
    """openai/gpt-2 ``model.py`` ``mlp`` with its ``conv1d`` (written here as there:
    ``reshape(matmul(reshape(x, [-1, nx]), reshape(w, [-1, nf])) + b, start + [nf])``),
    ``layers`` residual blocks in a TF1 graph; larger initial weights than GPT-2's
    0.02 and a random bias, so that the activation sees values of order 1."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def shape_list(x):
        static = x.shape.as_list()
        dynamic = tf.shape(x)
        return [dynamic[i] if s is None else s for i, s in enumerate(static)]

    def conv1d(x, scope, nf, *, w_init_stdev=0.5):
        with tf1.variable_scope(scope):
            *start, nx = shape_list(x)
            w = tf1.get_variable('w', [1, nx, nf], initializer=tf1.random_normal_initializer(stddev=w_init_stdev))
            b = tf1.get_variable('b', [nf], initializer=tf1.random_normal_initializer(stddev=0.5))
            c = tf.reshape(tf.matmul(tf.reshape(x, [-1, nx]), tf.reshape(w, [-1, nf]))+b, start+[nf])
            return c

    def mlp(x, scope, n_state):
        with tf1.variable_scope(scope):
            nx = x.shape[-1]
            h = gpt2_gelu(conv1d(x, 'c_fc', n_state))
            h2 = conv1d(h, 'c_proj', nx)
            return h2

    def build():
        x = tf1.placeholder(tf.float32, [2, seq, n_embd], name="x")
        h = x
        with tf1.variable_scope("model"):
            for i in range(layers):
                with tf1.variable_scope(f"h{i}"):
                    h = h + mlp(h, "mlp", 4 * n_embd)
        return {x: rng.normal(size=(2, seq, n_embd)).astype(np.float32)}, [tf.identity(h, name="out")]

    return _tf1("gpt2", build, seed, gelus=layers, approximate=True, matmul_bias_adds=2 * layers,
                signature=("Tanh", "Pow", "MatMul", "AddV2"))


def tf_nn_gelu(approximate: bool) -> ActivationModel:
    """``tf.nn.gelu`` on a tensor computed from the input (a traced function)."""
    import tensorflow as tf

    def fn(x):
        return tf.nn.gelu(x * 2.0, approximate=approximate)

    return _traced(f"tf_nn_gelu[approximate={approximate}]", fn, {"x": _spec([2, 8])}, np.random.default_rng(0),
                   gelus=1, approximate=approximate, signature=("Tanh", "Pow") if approximate else ("Erfc",),
                   gelu_input="mul")


def keras_gelu(library: str, how: str, seed: int = 0) -> ActivationModel:
    """Keras 3 (``library="keras"``) or tf_keras: ``how="dense"`` stacks two
    ``Dense(activation="gelu")``; ``how="exact"`` / ``"tanh"`` applies
    ``activations.gelu(approximate=False / True)`` to a Dense output."""
    lib = __import__(library)
    lib.utils.set_random_seed(seed)
    if how == "dense":
        layers = [lib.layers.Dense(16, activation="gelu", name="ffn_in"),
                  lib.layers.Dense(8, activation="gelu", name="ffn_out")]
        widths = [8, 16]

        def fn(x):
            return layers[1](layers[0](x))
    else:
        layers = [lib.layers.Dense(16, name="ffn_in")]
        widths = [8]

        def fn(x):
            return lib.activations.gelu(layers[0](x), approximate=how == "tanh")
    for layer, width in zip(layers, widths, strict=True):
        layer.build((2, width))
    _randomize_keras(layers, seed)
    approximate = how == "tanh"
    return _traced(f"{library}[{how}]", fn, {"x": _spec([2, 8])}, np.random.default_rng(seed),
                   gelus=len(layers) if how == "dense" else 1, approximate=approximate,
                   matmul_bias_adds=len(layers), signature=("Tanh", "Pow") if approximate else ("Erfc",))


def keras_hub_bert(num_layers: int = 2, seed: int = 0) -> ActivationModel:
    """``keras_hub.models.BertBackbone``: its feed-forward activation is
    ``keras_hub.src.utils.keras_utils.gelu_approximate`` (``keras.activations.gelu(x,
    approximate=True)``), one per transformer layer."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=50, num_layers=num_layers, num_heads=2, hidden_dim=16, intermediate_dim=32,
        max_sequence_length=8, dropout=0.0, name="bert_backbone")
    specs = {k: _spec([2, 8], k, "int32") for k in ("token_ids", "segment_ids", "padding_mask")}

    def fn(**features):
        return backbone(features, training=False)

    return _traced("keras_hub_bert", fn, specs, np.random.default_rng(seed), gelus=num_layers, approximate=True,
                   int_range=(0, 2), signature=("Tanh", "Pow"))


def tf_slim_dense_stack(activation: Callable, widths: Sequence[int], seed: int = 0) -> Callable:
    """The ``build`` of a TF1 graph: ``tf_slim.fully_connected(activation_fn=activation)`` layers of
    ``widths`` units on an input [2, 8], seeded weights, the output ``out``."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def build():
        x = tf1.placeholder(tf.float32, [2, 8], name="x")
        h = x
        for i, width in enumerate(widths):
            kernel, bias = _initializers(seed + i)
            h = tf_slim.fully_connected(h, width, activation_fn=activation, weights_initializer=kernel,
                                        biases_initializer=bias, scope=f"fc{i}")
        return {x: rng.normal(size=(2, 8)).astype(np.float32)}, [tf.identity(h, name="out")]

    return build


def tf_slim_gelu(layers: int = 2, seed: int = 0) -> ActivationModel:
    """``tf_slim.fully_connected(activation_fn=tf.nn.gelu)`` in a TF1 graph."""
    import tensorflow as tf

    build = tf_slim_dense_stack(tf.nn.gelu, [16 if i % 2 == 0 else 8 for i in range(layers)], seed)
    return _tf1("tf_slim", build, seed, gelus=layers, approximate=False, matmul_bias_adds=layers,
                signature=("Erfc", "BiasAdd"))


# ------------------------------------------------------------------ transformers


def transformers_activation(name: str, seed: int = 0) -> ActivationModel:
    """``transformers.activations_tf.get_tf_activation(name)`` (or one of that
    module's own functions, ``_gelu`` / ``_gelu_new``: the forms it uses on
    TensorFlow < 2.4) applied to the input of a traced function.

    GELUs: ``gelu`` is ``tf_keras.activations.gelu`` (erf), ``gelu_new`` is it with
    ``approximate=True``, ``gelu_fast`` is ``0.5 x (1 + tanh(x 0.7978845608 (1 +
    0.044715 x x)))``, ``gelu_10`` clips an erf GELU to [-10, 10];
    ``quick_gelu`` (``x sigmoid(1.702 x)``), ``silu``/``swish`` and ``mish`` are not GELUs."""
    from transformers import activations_tf

    gelus = {"gelu": False, "gelu_new": True, "gelu_fast": True, "gelu_10": False, "_gelu": False, "_gelu_new": True}
    signatures = {"gelu": ("Erfc",), "gelu_new": ("Tanh", "Pow"), "gelu_fast": ("Tanh",),
                  "gelu_10": ("Erf", "Minimum", "Maximum"), "_gelu": ("Erf", "Sqrt"),
                  "_gelu_new": ("Tanh", "Sqrt", "Pow"), "quick_gelu": ("Sigmoid",), "silu": ("Sigmoid",),
                  "mish": ("Softplus", "Tanh")}
    act = getattr(activations_tf, name) if name.startswith("_") else activations_tf.get_tf_activation(name)

    def fn(x):
        return act(x * 2.0)

    return _traced(f"transformers[{name}]", fn, {"x": _spec([2, 8])}, np.random.default_rng(seed),
                   gelus=int(name in gelus), approximate=gelus.get(name), signature=signatures[name],
                   gelu_input="mul" if name in gelus else None)


def _transformers_model(model, seed: int, names: tuple[str, ...]):
    import tensorflow as tf

    dummy = {k: tf.ones([2, 8], tf.int32) for k in names}
    model(dummy, training=False)  # builds the weights
    _perturb_keras(model, seed)
    specs = {k: _spec([2, 8], k, "int32") for k in names}

    def fn(**inputs):
        out = model(inputs, training=False)
        return {"last_hidden_state": out.last_hidden_state}

    return fn, specs


def transformers_bert(num_layers: int = 2, seed: int = 0) -> ActivationModel:
    """``transformers.TFBertModel`` (hidden_act ``"gelu"``: one erf GELU per layer).
    Its dense layers (tf_keras ``Dense`` on [batch, seq, hidden], so ``Tensordot``):
    query, key, value, attention output, intermediate and output per layer, and the
    pooler (rank 2, not an output here, so pruned)."""
    import tf_keras
    from transformers import BertConfig, TFBertModel

    tf_keras.utils.set_random_seed(seed)
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=num_layers, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16, hidden_act="gelu",
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = TFBertModel(config, name="bert")
    fn, specs = _transformers_model(model, seed, ("input_ids", "attention_mask", "token_type_ids"))
    return _traced("transformers_bert", fn, specs, np.random.default_rng(seed),
                   gelus=config.num_hidden_layers, approximate=False,
                   matmul_bias_adds=6 * config.num_hidden_layers, int_range=(0, 2), signature=("Erfc",))


def transformers_gpt2(num_layers: int = 2, seed: int = 0) -> ActivationModel:
    """``transformers.TFGPT2Model`` (activation_function ``"gelu_new"``: one tanh
    GELU per layer). Its ``TFConv1D`` (c_attn and c_proj in the attention, c_fc and
    c_proj in the MLP) is ``reshape(matmul(reshape(x), w) + b)`` with a bias of
    shape [1, nf]: four MatMulBiasAdds per layer."""
    import tf_keras
    from transformers import GPT2Config, TFGPT2Model

    tf_keras.utils.set_random_seed(seed)
    config = GPT2Config(vocab_size=50, n_positions=16, n_embd=16, n_layer=num_layers, n_head=2,
                        activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = TFGPT2Model(config, name="gpt2")
    fn, specs = _transformers_model(model, seed, ("input_ids", "attention_mask"))
    return _traced("transformers_gpt2", fn, specs, np.random.default_rng(seed),
                   gelus=config.n_layer, approximate=True, matmul_bias_adds=4 * config.n_layer,
                   int_range=(0, 2), signature=("Tanh", "Pow"))


# ------------------------------------------------------------ GELU look-alikes


def wrong_constant(which: str) -> ActivationModel:
    """A GELU as BERT or GPT-2 writes it with one constant changed: not a GELU.

    ``half``: BERT's erf form with 0.6 for 0.5; ``cube``: GPT-2's with 0.05 for
    0.044715; ``sqrt_2_pi``: GPT-2's with 0.8 for sqrt(2/pi); ``sqrt_2``: BERT's
    erf form dividing by 1.5 instead of sqrt(2.0)."""
    import tensorflow as tf

    def fn(x):
        x = x * 2.0
        if which == "half":
            return x * (0.6 * (1.0 + tf.math.erf(x / tf.sqrt(2.0))))
        if which == "sqrt_2":
            return x * (0.5 * (1.0 + tf.math.erf(x / 1.5)))
        if which == "cube":
            return 0.5*x*(1+tf.tanh(np.sqrt(2/np.pi)*(x+0.05*tf.pow(x, 3))))
        if which == "sqrt_2_pi":
            return 0.5*x*(1+tf.tanh(0.8*(x+0.044715*tf.pow(x, 3))))
        raise ValueError(which)

    return _traced(f"wrong_constant[{which}]", fn, {"x": _spec([2, 8])}, np.random.default_rng(0), gelus=0,
                   signature=("Erf",) if which in ("half", "sqrt_2") else ("Tanh", "Pow"))


def mismatched_operand() -> ActivationModel:
    """``0.5 * a * (1 + erf(b / sqrt(2)))`` with ``a`` and ``b`` different tensors:
    a Gaussian gate of ``a`` by ``b``, not a GELU of either."""
    import tensorflow as tf

    def fn(a, b):
        return 0.5 * a * (1.0 + tf.math.erf(b / tf.sqrt(2.0)))

    return _traced("mismatched_operand", fn, {"a": _spec([2, 8], "a"), "b": _spec([2, 8], "b")},
                   np.random.default_rng(0), gelus=0, signature=("Erf",))


def shared_intermediate() -> ActivationModel:
    """BERT's erf GELU whose ``Erf`` output is also a graph output of its own
    (``erf * 3``): fusing would lose that tensor."""
    import tensorflow as tf

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [2, 8], name="x")
        h = x * 2.0
        erf = tf.math.erf(h / tf.sqrt(2.0), name="erf")
        y = h * (0.5 * (1.0 + erf))
        return {x: np.linspace(-3, 3, 16, dtype=np.float32).reshape(2, 8)}, [
            tf.identity(y, name="gelu_out"), tf.identity(erf * 3.0, name="erf_out")]

    return _tf1("shared_intermediate", build, gelus=0, signature=("Erf",))


GELU_FORMS: dict[str, Callable[[], ActivationModel]] = {
    "bert_erf": bert_erf,
    "bert_tanh": bert_tanh,
    "gpt2": gpt2_mlp,
    "tf_nn_gelu_exact": lambda: tf_nn_gelu(False),
    "tf_nn_gelu_tanh": lambda: tf_nn_gelu(True),
    **{f"{lib}_{how}": (lambda lib=lib, how=how: keras_gelu(lib, how))
       for lib in ("keras", "tf_keras") for how in ("dense", "exact", "tanh")},
    "keras_hub_bert": keras_hub_bert,
    "tf_slim": tf_slim_gelu,
    "transformers_bert": transformers_bert,
    "transformers_gpt2": transformers_gpt2,
    **{f"transformers_{a}": (lambda a=a: transformers_activation(a))
       for a in ("gelu", "gelu_new", "gelu_fast", "gelu_10", "_gelu", "_gelu_new")},
}

GELU_LOOK_ALIKES: dict[str, Callable[[], ActivationModel]] = {
    **{f"transformers_{a}": (lambda a=a: transformers_activation(a)) for a in ("quick_gelu", "silu", "mish")},
    **{f"wrong_constant_{w}": (lambda w=w: wrong_constant(w)) for w in ("half", "sqrt_2", "cube", "sqrt_2_pi")},
    "mismatched_operand": mismatched_operand,
}


# --------------------------------------------------------------- matmul + bias


def tf1_matmul_bias(form: str, seed: int = 0) -> ActivationModel:
    """``a @ w`` plus a bias ``b`` of shape [n], spelled as TF users write it (TF1 graph, variables).

    ``add``: ``tf.matmul(a, w) + b`` (AddV2); ``radd``: ``b + tf.matmul(a, w)``;
    ``tf_add``: ``tf.compat.v1.add(tf.matmul(a, w), b)``; ``raw_add``: the ``Add``
    op of TensorFlow 1.x graphs (``tf.raw_ops.Add``); ``bias_add``:
    ``tf.nn.bias_add(tf.matmul(a, w), b)``; ``transpose_a`` / ``transpose_b`` /
    ``transpose_ab``: ``tf.nn.bias_add(tf.matmul(a, w, transpose_a=..., transpose_b=...), b)``
    with a and w stored transposed; ``transpose_b_add``: ``tf.matmul(a, w, transpose_b=True) + b``."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    ta = form in ("transpose_a", "transpose_ab")
    tb = form in ("transpose_b", "transpose_ab", "transpose_b_add")
    m, k, n = 2, 8, 4

    def build():
        a = tf1.placeholder(tf.float32, [k, m] if ta else [m, k], name="x")
        kernel, bias = _initializers(seed)
        with tf1.variable_scope("dense"):
            w = tf1.get_variable("kernel", [n, k] if tb else [k, n], initializer=kernel)
            b = tf1.get_variable("bias", [n], initializer=bias)
            y = tf.matmul(a, w, transpose_a=ta, transpose_b=tb)
            if form in ("add", "transpose_b_add"):
                y = y + b
            elif form == "radd":
                y = b + y
            elif form == "tf_add":
                y = tf1.add(y, b)
            elif form == "raw_add":
                y = tf.raw_ops.Add(x=y, y=b)
            else:
                y = tf.nn.bias_add(y, b)
        feed = rng.normal(size=a.shape.as_list()).astype(np.float32)
        return {a: feed}, [tf.identity(y, name="out")]

    op = {"add": "AddV2", "radd": "AddV2", "tf_add": "AddV2", "transpose_b_add": "AddV2", "raw_add": "Add"}.get(
        form, "BiasAdd")
    return _tf1(f"tf1[{form}]", build, seed, matmul_bias_adds=1, transpose=(ta, tb), signature=("MatMul", op))


def slim_fully_connected(layers: int = 2, seed: int = 0) -> ActivationModel:
    """``tf_slim.fully_connected`` (MatMul + BiasAdd), ``layers`` of them, ReLU between."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def build():
        x = tf1.placeholder(tf.float32, [2, 8], name="x")
        h = x
        for i in range(layers):
            kernel, bias = _initializers(seed + i)
            h = tf_slim.fully_connected(h, 16, activation_fn=tf.nn.relu if i < layers - 1 else None,
                                        weights_initializer=kernel, biases_initializer=bias, scope=f"fc{i}")
        return {x: rng.normal(size=(2, 8)).astype(np.float32)}, [tf.identity(h, name="out")]

    return _tf1("tf_slim_fully_connected", build, seed, matmul_bias_adds=layers, signature=("MatMul", "BiasAdd"))


def keras_dense(library: str, rank: int, batch: int | None = 2, seed: int = 0) -> ActivationModel:
    """Keras 3 (``library="keras"``) or tf_keras ``Dense(16)`` then ``Dense(8)`` on a
    rank-``rank`` input ([batch, 8] or [batch, 3, 8]); ``batch=None`` traces an
    unknown batch dimension (as SavedModel signatures do)."""
    lib = __import__(library)
    lib.utils.set_random_seed(seed)
    layers = [lib.layers.Dense(16, name="dense_in"), lib.layers.Dense(8, name="dense_out")]
    shape = [batch, 8] if rank == 2 else [batch, 3, 8]
    for layer, width in zip(layers, (8, 16), strict=True):
        layer.build(tuple(shape[:-1]) + (width,))
    _randomize_keras(layers, seed)

    def fn(x):
        return layers[1](layers[0](x))

    suffix = "" if batch else ",batch=None"
    shapes = None if batch else ("x:" + ",".join(str(d or 2) for d in shape))
    ops = ("MatMul", "BiasAdd") + (("Reshape",) if rank == 3 else ())
    return _traced(f"{library}_dense[rank={rank}{suffix}]", fn, {"x": _spec(shape)}, np.random.default_rng(seed),
                   matmul_bias_adds=len(layers), signature=ops, input_shapes=shapes)


def batch_matmul_bias(seed: int = 0) -> ActivationModel:
    """``tf.matmul`` of rank-3 tensors (``BatchMatMulV2``) plus a 1-D bias of the last dimension's length."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def build():
        a = tf1.placeholder(tf.float32, [2, 3, 8], name="x")
        kernel, bias = _initializers(seed)
        with tf1.variable_scope("proj"):
            w = tf1.get_variable("kernel", [2, 8, 4], initializer=kernel)
            b = tf1.get_variable("bias", [4], initializer=bias)
            y = tf.matmul(a, w) + b
        return {a: rng.normal(size=(2, 3, 8)).astype(np.float32)}, [tf.identity(y, name="out")]

    return _tf1("batch_matmul_bias", build, seed, matmul_bias_adds=1, signature=("BatchMatMulV2", "AddV2"))


def unit_axes_bias(form: str, seed: int = 0) -> ActivationModel:
    """A product plus a bias with unit axes before it (TF1 graph, variables):

    ``1xn``: ``tf.matmul(a, w) + b``, b of shape [1, n] (as transformers ``TFConv1D``
    holds it); ``1x1xn_tensordot``: ``tf.tensordot(a, w, 1) + b`` on a [2, 3, 8] input,
    b of shape [1, 1, n] (Reshape -> MatMul -> Reshape -> AddV2); ``1x1xn_batch``:
    ``tf.matmul`` of rank-3 tensors (``BatchMatMulV2``) plus a [1, 1, n] bias."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    shape = [2, 8] if form == "1xn" else [2, 3, 8]

    def build():
        a = tf1.placeholder(tf.float32, shape, name="x")
        kernel, bias = _initializers(seed)
        with tf1.variable_scope("dense"):
            b = tf1.get_variable("bias", [1, 4] if form == "1xn" else [1, 1, 4], initializer=bias)
            if form == "1x1xn_batch":
                y = tf.matmul(a, tf1.get_variable("kernel", [2, 8, 4], initializer=kernel))
            else:
                w = tf1.get_variable("kernel", [8, 4], initializer=kernel)
                y = tf.matmul(a, w) if form == "1xn" else tf.tensordot(a, w, 1)
            y = y + b
        return {a: rng.normal(size=shape).astype(np.float32)}, [tf.identity(y, name="out")]

    product = "BatchMatMulV2" if form == "1x1xn_batch" else "MatMul"
    return _tf1(f"bias[{form}]", build, seed, matmul_bias_adds=1, signature=(product, "AddV2"))


def matmul_bias_refusal(which: str, seed: int = 0) -> ActivationModel:
    """Matmuls plus something that MatMulBiasAdd cannot take over:

    ``product_read_elsewhere``: ``y = a @ w``; outputs ``y + b`` and ``y * 2``;
    ``bias_nx1``: a [2, 1] tensor added to a [2, n] product (one value per row, not per
    column); ``bias_adds_axis``: a [1, 1, n] bias added to a rank-2 product (the sum has
    rank 3); ``bias_length_1``: a 1-D bias of length 1 broadcast over n columns;
    ``two_matmuls``: ``a @ w1 + a @ w2``."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def build():
        a = tf1.placeholder(tf.float32, [2, 8], name="x")
        kernel, bias = _initializers(seed)
        w = tf1.get_variable("kernel", [8, 4], initializer=kernel)
        y = tf.matmul(a, w)
        if which == "product_read_elsewhere":
            outs = [y + tf1.get_variable("bias", [4], initializer=bias), y * 2.0]
        elif which == "bias_nx1":
            outs = [y + tf1.get_variable("bias", [2, 1], initializer=bias)]
        elif which == "bias_adds_axis":
            outs = [y + tf1.get_variable("bias", [1, 1, 4], initializer=bias)]
        elif which == "bias_length_1":
            outs = [y + tf1.get_variable("bias", [1], initializer=bias)]
        elif which == "two_matmuls":
            outs = [y + tf.matmul(a, tf1.get_variable("kernel_2", [8, 4], initializer=bias))]
        else:
            raise ValueError(which)
        feed = rng.normal(size=(2, 8)).astype(np.float32)
        return {a: feed}, [tf.identity(o, name=f"out{i}") for i, o in enumerate(outs)]

    return _tf1(f"refusal[{which}]", build, seed, matmul_bias_adds=0, signature=("MatMul", "AddV2"))


MATMUL_BIAS_FORMS: dict[str, Callable[[], ActivationModel]] = {
    **{f"tf1_{f}": (lambda f=f: tf1_matmul_bias(f))
       for f in ("add", "radd", "tf_add", "raw_add", "bias_add", "transpose_a", "transpose_b", "transpose_ab",
                 "transpose_b_add")},
    "tf_slim_fully_connected": slim_fully_connected,
    **{f"{lib}_dense_rank{r}": (lambda lib=lib, r=r: keras_dense(lib, r))
       for lib in ("keras", "tf_keras") for r in (2, 3)},
    **{f"{lib}_dense_rank3_unknown_batch": (lambda lib=lib: keras_dense(lib, 3, batch=None))
       for lib in ("keras", "tf_keras")},
    "batch_matmul": batch_matmul_bias,
    "gpt2_conv1d": gpt2_mlp,
    "bert_ffn": bert_erf,
    "transformers_bert": transformers_bert,
    **{f"bias_{f}": (lambda f=f: unit_axes_bias(f)) for f in ("1xn", "1x1xn_tensordot", "1x1xn_batch")},
    "transformers_gpt2_conv1d_bias_1xn": transformers_gpt2,  # TFConv1D's bias is [1, nf]
}

MATMUL_BIAS_REFUSALS: dict[str, Callable[[], ActivationModel]] = {
    **{w: (lambda w=w: matmul_bias_refusal(w))
       for w in ("product_read_elsewhere", "bias_nx1", "bias_adds_axis", "bias_length_1", "two_matmuls")},
}
