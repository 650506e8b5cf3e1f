"""``scopefusion verify`` and ``scopefusion.verify`` on a mixed run's output in fused form (``GeOp``
call nodes): each segment's function runs in its call's place, as ``run --verify`` does."""
from __future__ import annotations

import os
import subprocess
import sys

import scopefusion
from scopefusion.core.partition import SEGMENT_OP


def host_range(bert_encoder) -> str:
    return str([[["bert/embeddings/add"], ["bert/encoder/layer_0/attention/self/query/MatMul"]]])


def test_verify_runs_the_segments_of_a_partitioned_graph(bert_encoder, registry, tmp_path):
    result = scopefusion.fuse(bert_encoder.graph_def, registry=registry, mix_compile_mode=True, hints=False,
                              in_out_pair=host_range(bert_encoder), in_out_pair_flag=False)
    calls = [n for n in result.graph_def.node if n.op == SEGMENT_OP]
    assert calls and result.report.fused
    outcome = scopefusion.verify(bert_encoder.graph_def, result.graph_def, registry=registry,
                                 feeds=bert_encoder.inputs)
    outcome.assert_ok()
    assert {o.name for o in outcome.outputs} >= set(bert_encoder.outputs)
    original, fused = tmp_path / "bert.pb", tmp_path / "bert_fused.pb"
    original.write_bytes(bert_encoder.graph_def.SerializeToString())
    fused.write_bytes(result.graph_def.SerializeToString())
    ran = subprocess.run([sys.executable, "-m", "scopefusion", "verify", str(original), str(fused)],
                         check=False, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert ran.returncode == 0, ran.stderr
    assert "neither TensorFlow ops" not in ran.stderr and "GeOp" not in ran.stderr
    # a broken segment is caught: the comparison is real
    broken = type(result.graph_def)()
    broken.CopyFrom(result.graph_def)
    body = next(f for f in broken.library.function if f.signature.name == calls[-1].name)
    mul = next(n for n in body.node_def if n.op == "Tanh" or n.op == "MatMulBiasAddActivation")
    mul.attr["activation"].s = b"Relu" if mul.op == "MatMulBiasAddActivation" else mul.attr["activation"].s
    assert not scopefusion.verify(bert_encoder.graph_def, broken, registry=registry,
                                  feeds=bert_encoder.inputs).passed
