"""Graph generators for ``bench_fuse.py``: large frozen GraphDefs stamped out of blocks.

A :class:`FrozenTemplate` holds the nodes of one small graph that TensorFlow built and
froze (its input placeholder and function boundary removed); ``BlockBuilder.template``
copies it under a scope into a block, and a generator stamps blocks into one GraphDef
under renamed scopes, as many as the requested node count needs (the templates are built
in ``bench_templates.py``).  Three graph kinds:

* ``bert``: a BERT-style encoder whose layer norms are copies of a real
  ``tf_slim.layers.layer_norm`` (the rest of each layer is written op by op);
* ``dense-gelu``: a chain of blocks, each a copy of one real tf_keras (or Keras 3)
  ``Dense(hidden, activation="gelu")`` traced with ``tf.function`` and frozen with
  ``convert_variables_to_constants_v2``;
* ``ln-blocks``: a chain of blocks, each a copy of the real ``tf_slim.layers.layer_norm``;
* ``transformer``: a chain of blocks, each a copy of one real keras-hub ``TransformerEncoder``
  (Keras 3 multi-head self attention, layer norms, GELU feed-forward) traced with ``tf.function``
  and frozen.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from bench_templates import (LN_OUTPUT, FrozenTemplate, real_dense_gelu_template, real_layer_norm_template,
                             real_transformer_encoder_template)

DT_FLOAT = 1
DT_INT32 = 3
GRAPH_KINDS = ("bert", "transformer", "dense-gelu", "ln-blocks")
MOMENTS_MEAN = "/moments/mean"


# --------------------------------------------------------------------------- entries
@dataclass
class Entry:
    """One node of a block: a prototype NodeDef (attrs, no name, no inputs), its name
    relative to the block and its inputs (relative names; ``None``: the block's input)."""

    suffix: str
    proto: object
    inputs: list[str | None] = field(default_factory=list)
    random_shape: tuple[int, ...] | None = None  # Const whose value is drawn per instance


class BlockBuilder:
    """Collects the entries of one block (relative names)."""

    def __init__(self) -> None:
        from tensorflow.core.framework.node_def_pb2 import NodeDef

        self._NodeDef = NodeDef
        self.entries: list[Entry] = []

    def node(self, suffix: str, op: str, inputs: Sequence[str | None] = (), **attrs: object) -> str:
        proto = self._NodeDef(op=op)
        for key, value in attrs.items():
            attr = proto.attr[key]
            if isinstance(value, bool):
                attr.b = value
            elif isinstance(value, bytes):
                attr.s = value
            elif isinstance(value, int):
                attr.type = value  # only DataType enums are passed as ints here
            else:
                raise TypeError(f"{key}={value!r}")
        self.entries.append(Entry(suffix, proto, list(inputs)))
        return suffix

    def const(self, suffix: str, value: np.ndarray | float | Sequence[int], *, random: bool = False) -> str:
        from tensorflow.python.framework import tensor_util

        arr = np.asarray(value, dtype=np.float32 if isinstance(value, float) or random else None)
        proto = self._NodeDef(op="Const")
        proto.attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(arr))
        proto.attr["dtype"].type = proto.attr["value"].tensor.dtype
        self.entries.append(Entry(suffix, proto, [], tuple(arr.shape) if random else None))
        return suffix

    def dense(self, scope: str, x: str | None, n_in: int, n_out: int) -> str:
        kernel = self.const(f"{scope}/kernel", np.zeros((n_in, n_out), np.float32), random=True)
        bias = self.const(f"{scope}/bias", np.zeros((n_out,), np.float32), random=True)
        k_read = self.node(f"{scope}/MatMul/ReadVariableOp", "Identity", [kernel], T=DT_FLOAT)
        mm = self.node(f"{scope}/MatMul", "MatMul", [x, k_read], T=DT_FLOAT,
                       transpose_a=False, transpose_b=False, grad_a=False, grad_b=False)
        b_read = self.node(f"{scope}/BiasAdd/ReadVariableOp", "Identity", [bias], T=DT_FLOAT)
        return self.node(f"{scope}/BiasAdd", "BiasAdd", [mm, b_read], T=DT_FLOAT, data_format=b"NHWC")

    def template(self, scope: str, x: str | None, template: FrozenTemplate) -> str:
        """Copy the frozen template's nodes under ``scope`` (``""`` for the block root), reading ``x``."""
        prefix = f"{scope}/" if scope else ""
        feed = template.input_name
        for src in template.nodes:
            proto = self._NodeDef()
            proto.CopyFrom(src)
            inputs: list[str | None] = []
            for ref in src.input:
                control = ref.startswith("^")
                name = ref[1:] if control else ref
                if name == feed or name.startswith(feed + ":"):
                    if control:
                        raise RuntimeError("control input from the template's input")
                    inputs.append(x if name in (feed, feed + ":0") else f"{x}{name[len(feed):]}")
                else:
                    inputs.append(("^" if control else "") + prefix + name)
            del proto.input[:]
            proto.name = ""
            self.entries.append(Entry(prefix + src.name, proto, inputs))
        return prefix + template.output

    def layer_norm(self, scope: str, x: str | None, template: FrozenTemplate) -> str:
        """Copy the real layer norm under ``scope`` (``""`` for the block root)."""
        out = self.template(scope, x, template)
        assert out.endswith(LN_OUTPUT)
        return out


@dataclass
class Block:
    entries: list[Entry]
    output: str

    def norm_scopes(self) -> list[str]:
        """The block's layer norm scopes (relative names): each holds its ``moments/mean`` (tf_slim's
        and Keras' layer norms alike), or ends in tf_slim's output node."""
        scopes = {e.suffix[:-len(MOMENTS_MEAN)] for e in self.entries
                  if e.proto.op == "Mean" and e.suffix.endswith(MOMENTS_MEAN)}
        scopes |= {e.suffix.rsplit("/", 2)[0] for e in self.entries if e.suffix.endswith(LN_OUTPUT)}
        return sorted(scopes)

    def fused_ops(self) -> dict[str, int]:
        """Fused ops the block must become: one per layer norm, per BiasAdd (each reads a MatMul or
        an Einsum), per Erfc (GELU), per Softmax (scaled dot-product attention)."""
        return {
            "LayerNorm": len(self.norm_scopes()),
            "MatMulBiasAdd": sum(e.proto.op == "BiasAdd" for e in self.entries),
            "Gelu": sum(e.proto.op == "Erfc" for e in self.entries),
            "ScaledDotProductAttention": sum(e.proto.op == "Softmax" for e in self.entries),
        }


# --------------------------------------------------------------------------- BERT blocks
def embeddings_block(ln: FrozenTemplate) -> Block:
    b = BlockBuilder()
    mul = b.node("mul", "Mul", [None, b.const("mul/y", 2.0)], T=DT_FLOAT)
    add = b.node("add", "AddV2", [mul, b.const("add/y", 1.0)], T=DT_FLOAT)
    return Block(b.entries, b.layer_norm("", add, ln))


def encoder_layer_block(ln: FrozenTemplate, *, hidden: int, heads: int, batch: int, seq: int) -> Block:
    """One ``bert/encoder/layer_N`` block, as google-research/bert builds it."""
    b = BlockBuilder()
    head = hidden // heads
    inter = 4 * hidden
    s = "attention/self"
    q = b.dense(f"{s}/query", None, hidden, hidden)
    k = b.dense(f"{s}/key", None, hidden, hidden)
    v = b.dense(f"{s}/value", None, hidden, hidden)

    def split(t: str, reshape: str, transpose: str) -> str:
        shape = b.const(f"{s}/{reshape}/shape", np.array([batch, seq, heads, head], np.int32))
        r = b.node(f"{s}/{reshape}", "Reshape", [t, shape], T=DT_FLOAT, Tshape=DT_INT32)
        perm = b.const(f"{s}/{transpose}/perm", np.array([0, 2, 1, 3], np.int32))
        return b.node(f"{s}/{transpose}", "Transpose", [r, perm], T=DT_FLOAT, Tperm=DT_INT32)

    qt = split(q, "Reshape", "transpose")
    kt = split(k, "Reshape_1", "transpose_1")
    scores = b.node(f"{s}/MatMul", "BatchMatMulV2", [qt, kt], T=DT_FLOAT,
                    adj_x=False, adj_y=True, grad_x=False, grad_y=False)
    scaled = b.node(f"{s}/truediv", "RealDiv", [scores, b.const(f"{s}/truediv/y", float(math.sqrt(head)))],
                    T=DT_FLOAT)
    probs = b.node(f"{s}/Softmax", "Softmax", [scaled], T=DT_FLOAT)
    vt = split(v, "Reshape_2", "transpose_2")
    ctx = b.node(f"{s}/MatMul_1", "BatchMatMulV2", [probs, vt], T=DT_FLOAT,
                 adj_x=False, adj_y=False, grad_x=False, grad_y=False)
    perm = b.const(f"{s}/transpose_3/perm", np.array([0, 2, 1, 3], np.int32))
    ctx = b.node(f"{s}/transpose_3", "Transpose", [ctx, perm], T=DT_FLOAT, Tperm=DT_INT32)
    shape = b.const(f"{s}/Reshape_3/shape", np.array([batch * seq, hidden], np.int32))
    ctx = b.node(f"{s}/Reshape_3", "Reshape", [ctx, shape], T=DT_FLOAT, Tshape=DT_INT32)

    dense = b.dense("attention/output/dense", ctx, hidden, hidden)
    residual = b.node("attention/output/add", "AddV2", [dense, None], T=DT_FLOAT)
    attn = b.layer_norm("attention/output", residual, ln)

    g = "intermediate/dense/Gelu"
    pre = b.dense("intermediate/dense", attn, hidden, inter)
    half = b.node(f"{g}/mul", "Mul", [b.const(f"{g}/mul/x", 0.5), pre], T=DT_FLOAT)
    neg = b.node(f"{g}/Neg", "Neg", [pre], T=DT_FLOAT)
    arg = b.node(f"{g}/mul_1", "Mul", [neg, b.const(f"{g}/Cast/x", float(np.float32(1 / math.sqrt(2))))],
                 T=DT_FLOAT)
    erfc = b.node(f"{g}/Erfc", "Erfc", [arg], T=DT_FLOAT)
    gelu = b.node(f"{g}/mul_2", "Mul", [half, erfc], T=DT_FLOAT)

    dense = b.dense("output/dense", gelu, inter, hidden)
    residual = b.node("output/add", "AddV2", [dense, attn], T=DT_FLOAT)
    return Block(b.entries, b.layer_norm("output", residual, ln))


def pooler_block(hidden: int) -> Block:
    b = BlockBuilder()
    dense = b.dense("dense", None, hidden, hidden)
    return Block(b.entries, b.node("dense/Tanh", "Tanh", [dense], T=DT_FLOAT))


def template_block(template: FrozenTemplate) -> Block:
    """A block that is one copy of a frozen template, reading the block's input."""
    b = BlockBuilder()
    return Block(b.entries, b.template("", None, template))


# --------------------------------------------------------------------------- graphs
@dataclass
class GeneratedGraph:
    graph_def: object
    units: int  # repeated blocks (encoder layers, dense+gelu blocks)
    layer_norm_scopes: list[str]
    expected: dict[str, int]  # fused op type -> how many the fused graph must hold
    feed_name: str
    feed_shape: tuple[int, int]
    output: str


class Generator:
    """Stamps out blocks into one GraphDef: the ``head`` blocks, ``units`` copies of ``unit``,
    the ``tail`` blocks, each reading the previous block's output."""

    kind = ""
    unit_name = "blocks"
    unit_scope = "block_{}/"
    small_units = 2  # the instance run in TensorFlow before timing
    feed = "input"

    def __init__(self, *, rows: int, hidden: int, seed: int, producer: int, unit: Block,
                 head: Sequence[tuple[str, Block]] = (), tail: Sequence[tuple[str, Block]] = ()) -> None:
        self.rows, self.hidden, self.seed, self.producer = rows, hidden, seed, producer
        self.unit, self.head, self.tail = unit, list(head), list(tail)
        self.fixed_nodes = 1 + sum(len(block.entries) for _, block in self.head + self.tail)

    @property
    def nodes_per_unit(self) -> int:
        return len(self.unit.entries)

    def units_for(self, nodes: int) -> int:
        return max(1, math.ceil((nodes - self.fixed_nodes) / self.nodes_per_unit))

    def expected(self, units: int) -> dict[str, int]:
        out = {k: units * v for k, v in self.unit.fused_ops().items()}
        for _, block in self.head + self.tail:
            for k, v in block.fused_ops().items():
                out[k] += v
        return out

    def build(self, units: int) -> GeneratedGraph:
        from tensorflow.core.framework import graph_pb2

        rng = np.random.default_rng(self.seed)
        graph = graph_pb2.GraphDef()
        graph.versions.producer = self.producer
        feed = self.feed
        ph = graph.node.add(name=feed, op="Placeholder")
        ph.attr["dtype"].type = DT_FLOAT
        for d in (self.rows, self.hidden):
            ph.attr["shape"].shape.dim.add(size=d)
        ln_scopes: list[str] = []
        x = feed
        blocks = self.head + [(self.unit_scope.format(i), self.unit) for i in range(units)] + self.tail
        for prefix, block in blocks:
            x = self._stamp(graph, block, prefix, x, rng, ln_scopes)
        return GeneratedGraph(graph, units, ln_scopes, self.expected(units), feed + ":0",
                              (self.rows, self.hidden), x + ":0")

    @staticmethod
    def _stamp(graph, block: Block, prefix: str, x: str, rng: np.random.Generator, ln_scopes: list[str]) -> str:
        add = graph.node.add
        randoms = [e.random_shape for e in block.entries if e.random_shape is not None]
        total = sum(int(np.prod(s)) for s in randoms)
        payload = (rng.standard_normal(total, dtype=np.float32) * 0.05).tobytes()
        offset = 0
        for e in block.entries:
            node = add()
            node.CopyFrom(e.proto)
            node.name = prefix + e.suffix
            if e.inputs:
                node.input.extend([
                    x if ref is None else ("^" + prefix + ref[1:] if ref[0] == "^" else prefix + ref)
                    for ref in e.inputs
                ])
            if e.random_shape is not None:
                size = 4 * int(np.prod(e.random_shape))
                node.attr["value"].tensor.tensor_content = payload[offset:offset + size]
                offset += size
        ln_scopes.extend(prefix + scope for scope in block.norm_scopes())
        return prefix + block.output


class EncoderGenerator(Generator):
    """BERT-style encoder: embeddings, ``bert/encoder/layer_N`` blocks, pooler."""

    kind = "bert"
    unit_name = "encoder layers"
    unit_scope = "bert/encoder/layer_{}/"
    feed = "input_embeddings"

    def __init__(self, *, hidden: int, heads: int, batch: int, seq: int, seed: int) -> None:
        if hidden % heads:
            raise SystemExit(f"--hidden {hidden} is not a multiple of --heads {heads}")
        rows = batch * seq
        self.template = real_layer_norm_template(rows, hidden)
        super().__init__(
            rows=rows, hidden=hidden, seed=seed, producer=self.template.producer,
            unit=encoder_layer_block(self.template, hidden=hidden, heads=heads, batch=batch, seq=seq),
            head=[("bert/embeddings/", embeddings_block(self.template))],
            tail=[("bert/pooler/", pooler_block(hidden))],
        )
        self.heads = heads

    def describe(self) -> str:
        per = self.unit.fused_ops()
        return (f"layer norm template: real {self.template.source}, {len(self.template.nodes)} frozen nodes; "
                f"encoder layer: {self.nodes_per_unit} nodes, {per['LayerNorm']} layer norms, "
                f"{per['MatMulBiasAdd']} dense layers, {per['Gelu']} GELU, "
                f"{per['ScaledDotProductAttention']} attention; "
                f"hidden {self.hidden}, {self.heads} heads, input [{self.rows}, {self.hidden}]")


class ChainGenerator(Generator):
    """A chain of ``model/block_N/...`` blocks, each one copy of a frozen template."""

    unit_scope = "model/block_{}/"
    small_units = 3

    def __init__(self, *, hidden: int, batch: int, seq: int, seed: int) -> None:
        rows = batch * seq
        self.template = self.make_template(rows, hidden, seed)
        super().__init__(rows=rows, hidden=hidden, seed=seed, producer=self.template.producer,
                         unit=template_block(self.template))

    def make_template(self, rows: int, hidden: int, seed: int) -> FrozenTemplate:
        raise NotImplementedError

    def describe(self) -> str:
        return (f"{self.kind} template: real {self.template.source}, {len(self.template.nodes)} frozen nodes; "
                f"block: {self.nodes_per_unit} nodes; input [{self.rows}, {self.hidden}]")


class DenseGeluGenerator(ChainGenerator):
    """Each block a copy of one frozen Keras Dense(gelu)."""

    kind = "dense-gelu"
    unit_name = "dense+gelu blocks"

    def make_template(self, rows: int, hidden: int, seed: int) -> FrozenTemplate:
        return real_dense_gelu_template(rows, hidden, seed)


class LayerNormBlocksGenerator(ChainGenerator):
    """Each block a copy of the real frozen ``tf_slim.layers.layer_norm`` (reduction axis -1):
    many small layer norms, nothing else."""

    kind = "ln-blocks"
    unit_name = "layer-norm blocks"

    def make_template(self, rows: int, hidden: int, seed: int) -> FrozenTemplate:
        return real_layer_norm_template(rows, hidden)


class TransformerGenerator(ChainGenerator):
    """Each block a copy of one frozen keras-hub ``TransformerEncoder`` (BERT's layer, Keras 3):
    self attention, two layer norms, a GELU feed-forward."""

    kind = "transformer"
    unit_name = "encoder blocks"
    small_units = 2

    def __init__(self, *, hidden: int, heads: int, batch: int, seq: int, seed: int) -> None:
        if hidden % heads:
            raise SystemExit(f"--hidden {hidden} is not a multiple of --heads {heads}")
        self.batch, self.seq, self.heads = batch, seq, heads
        super().__init__(hidden=hidden, batch=batch, seq=seq, seed=seed)

    def make_template(self, rows: int, hidden: int, seed: int) -> FrozenTemplate:
        return real_transformer_encoder_template(self.batch, self.seq, hidden, self.heads, seed)

    def describe(self) -> str:
        per = self.unit.fused_ops()
        return (f"{super().describe()}; per block {per['ScaledDotProductAttention']} attention, "
                f"{per['LayerNorm']} layer norms, {per['MatMulBiasAdd']} dense layers, {per['Gelu']} GELU; "
                f"{self.heads} heads")


def make_generator(kind: str, *, hidden: int, heads: int, batch: int, seq: int, seed: int) -> Generator:
    if kind == "bert":
        return EncoderGenerator(hidden=hidden, heads=heads, batch=batch, seq=seq, seed=seed)
    if kind == "transformer":
        return TransformerGenerator(hidden=hidden, heads=heads, batch=batch, seq=seq, seed=seed)
    if kind == "dense-gelu":
        return DenseGeluGenerator(hidden=hidden, batch=batch, seq=seq, seed=seed)
    if kind == "ln-blocks":
        return LayerNormBlocksGenerator(hidden=hidden, batch=batch, seq=seq, seed=seed)
    raise SystemExit(f"unknown graph kind {kind!r} (known: {', '.join(GRAPH_KINDS)})")
