"""``run``, ``list``, ``partition`` and ``config check`` on graph files import no TensorFlow,
and write exactly what they write when TensorFlow is loaded; the op-definition cache."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

tf = pytest.importorskip("tensorflow")

from scopefusion.core.graph import op_cache  # noqa: E402
from scopefusion.core.graph.protos import message_class  # noqa: E402
from scopefusion.core.verify.verify import verify  # noqa: E402
from scopefusion.plugins.registry import load_registry  # noqa: E402
from scopefusion.testing import graph_from_function  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BERT_TINY = ROOT / "scopefusion" / "examples" / "bert_tiny.pb"

#: Runs the command line in a fresh interpreter; argv: "tf" to import TensorFlow first (or
#: "none"), the command's arguments as JSON, and a file to write what was seen to.
_CHILD = """
import json, sys
if sys.argv[1] == "tf":
    import tensorflow
from scopefusion.cli import main
code = main(json.loads(sys.argv[2]))
with open(sys.argv[3], "w") as seen:
    json.dump({"code": code, "tensorflow": "tensorflow" in sys.modules}, seen)
"""


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("op-cache")


def _cli(args: list[str], tmp: Path, cache: Path, *, tensorflow_first: bool) -> tuple[dict, str]:
    seen = tmp / f"seen-{'tf' if tensorflow_first else 'none'}.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SCOPEFUSION_CACHE_DIR": str(cache), "COLUMNS": "200",
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", _CHILD, "tf" if tensorflow_first else "none", json.dumps(args),
                           str(seen)], env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(seen.read_text()), done.stdout


@pytest.fixture(scope="module")
def keras_gelu_layer_norm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tf_keras Dense(gelu) followed by LayerNormalization, frozen to a .pb."""
    import tf_keras

    tf_keras.utils.set_random_seed(0)
    inputs = tf_keras.Input((8, 16), batch_size=2, name="x")
    hidden = tf_keras.layers.Dense(32, activation="gelu", name="dense")(inputs)
    outputs = tf_keras.layers.LayerNormalization(name="norm")(hidden)
    model = tf_keras.Model(inputs, outputs)
    graph = graph_from_function(lambda x: model(x), tf.TensorSpec([2, 8, 16], tf.float32, "x"))
    path = tmp_path_factory.mktemp("keras") / "dense_gelu_norm.pb"
    path.write_bytes(graph.SerializeToString())
    return path


def _op_types(path: Path) -> set[str]:
    graph = message_class("GraphDef")()
    graph.ParseFromString(path.read_bytes())
    return {node.op for node in graph.node}


@pytest.mark.parametrize("model, fused_ops", [
    ("bert_tiny", {"LayerNorm", "MatMulBiasAdd", "MatMulBiasAddActivation"}),
    ("keras", {"LayerNorm"}),
])
def test_run_on_a_graph_file_imports_no_tensorflow_and_writes_the_same_bytes(
        model: str, fused_ops: set[str], keras_gelu_layer_norm: Path, cache_dir: Path, tmp_path: Path) -> None:
    source = BERT_TINY if model == "bert_tiny" else keras_gelu_layer_norm
    outputs = {}
    for first in (False, True):
        out = tmp_path / f"fused-{first}.pb"
        seen, _ = _cli(["run", str(source), "-o", str(out)], tmp_path, cache_dir, tensorflow_first=first)
        assert seen == {"code": 0, "tensorflow": first}
        outputs[first] = out.read_bytes()
    assert outputs[False] == outputs[True]
    fused = tmp_path / "fused-False.pb"
    assert fused_ops <= _op_types(fused)  # the fusion did happen
    assert not {"Erf", "Erfc", "Rsqrt"} & _op_types(fused)  # the GELU and the normalization are gone
    # what was written without TensorFlow runs in it and matches the original
    result = verify(source, fused, fused_ops=load_registry().fused_ops)
    assert result.passed, result.failures


@pytest.fixture(scope="module")
def shape_asking_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Frozen models on which passes ask for shapes the graph does not record: a transformers
    ``TFBertModel`` (the scope layer-norm pass) and a tf_keras LSTM + GRU (a graph pass inside the
    lowered loops), each written to a .pb."""
    from tests.models.activation_models import transformers_bert
    from tests.models.rnn_models import keras_lstm_gru

    folder = tmp_path_factory.mktemp("shapes")
    paths = {}
    for name, model in (("transformers_bert", transformers_bert(num_layers=2)), ("lstm_gru", keras_lstm_gru())):
        paths[name] = folder / f"{name}.pb"
        paths[name].write_bytes(model.graph_def.SerializeToString())
    return paths


@pytest.mark.parametrize("model", ["transformers_bert", "lstm_gru"])
def test_shapes_passes_ask_need_no_tensorflow(model: str, shape_asking_models: dict[str, Path], cache_dir: Path,
                                              tmp_path: Path) -> None:
    """The passes' shape questions on these models are answered by scopefusion's own shape
    propagation: the run imports no TensorFlow, says nothing of TensorFlow's shape inference and
    writes what it writes with TensorFlow loaded."""
    outputs, printed = {}, {}
    for first in (False, True):
        out = tmp_path / f"fused-{first}.pb"
        seen, printed[first] = _cli(["run", str(shape_asking_models[model]), "-o", str(out)], tmp_path, cache_dir,
                                    tensorflow_first=first)
        assert seen == {"code": 0, "tensorflow": first}
        outputs[first] = out.read_bytes()
    assert outputs[False] == outputs[True]
    assert "shape inference" not in printed[False]
    assert "fused by" in printed[False]  # the passes did run and fuse


def test_list_partition_and_config_check_import_no_tensorflow(cache_dir: Path, tmp_path: Path) -> None:
    config = tmp_path / "session.pbtxt"
    config.write_text('graph_options { rewrite_options { custom_optimizers { name: "NpuOptimizer" '
                      'parameter_map { key: "use_off_line" value { b: true } } } } }\n', encoding="utf-8")
    for args in (["list"], ["partition", str(BERT_TINY)], ["config", "check", str(config)]):
        printed = {}
        for first in (False, True):
            seen, printed[first] = _cli(args, tmp_path, cache_dir, tensorflow_first=first)
            assert seen == {"code": 0, "tensorflow": first}, args
        assert printed[False] == printed[True], args
        assert printed[False].strip()


def test_emit_tf_and_verify_still_import_tensorflow(cache_dir: Path, tmp_path: Path) -> None:
    seen, _ = _cli(["run", str(BERT_TINY), "-o", str(tmp_path / "tf.pb"), "--emit", "tf"], tmp_path, cache_dir,
                   tensorflow_first=False)
    assert seen == {"code": 0, "tensorflow": True}


def test_message_classes_are_tensorflows_own_when_it_is_imported_later(tmp_path: Path) -> None:
    code = ("import sys\n"
            "from scopefusion.core.graph.protos import message_class\n"
            "ours = {n: message_class(n) for n in ('GraphDef', 'NodeDef', 'AttrValue', 'TensorProto', "
            "'FunctionDef', 'OpList', 'ConfigProto')}\n"
            "assert 'tensorflow' not in sys.modules\n"
            "import tensorflow as tf\n"
            "from tensorflow.core.framework import attr_value_pb2, function_pb2, graph_pb2, node_def_pb2, "
            "op_def_pb2, tensor_pb2\n"
            "from tensorflow.core.protobuf import config_pb2\n"
            "theirs = {'GraphDef': graph_pb2.GraphDef, 'NodeDef': node_def_pb2.NodeDef, "
            "'AttrValue': attr_value_pb2.AttrValue, 'TensorProto': tensor_pb2.TensorProto, "
            "'FunctionDef': function_pb2.FunctionDef, 'OpList': op_def_pb2.OpList, "
            "'ConfigProto': config_pb2.ConfigProto}\n"
            "assert all(ours[n] is theirs[n] for n in ours), [n for n in ours if ours[n] is not theirs[n]]\n"
            "graph = ours['GraphDef']()\n"
            "graph.node.add(name='c', op='Const').attr['dtype'].type = 1\n"
            "graph.node[0].attr['value'].tensor.dtype = 1\n"
            "graph.node[0].attr['value'].tensor.float_val.append(2.5)\n"
            "with tf.Graph().as_default() as g:\n"
            "    tf.compat.v1.import_graph_def(graph, name='')\n"
            "    assert tf.compat.v1.Session().run('c:0') == 2.5\n"
            "print('same classes')\n")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT),
                                                               "TF_CPP_MIN_LOG_LEVEL": "3"},
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "same classes"


# ------------------------------------------------------------ the op-definition cache


@pytest.fixture
def counted_dump(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache_dir: Path) -> list[int]:
    """A fresh cache directory; the op list is produced by the real child process once per
    module and counted each time the cache asks for it."""
    real = cache_dir / "real-op-list.bin"
    if not real.exists():
        real.write_bytes(op_cache._dump_op_list())
    calls: list[int] = []

    def dump() -> bytes:
        calls.append(1)
        return real.read_bytes()

    monkeypatch.setenv(op_cache.CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setattr(op_cache, "_dump_op_list", dump)
    op_cache.cached_op_defs.cache_clear()
    yield calls
    op_cache.cached_op_defs.cache_clear()


def test_the_op_list_of_the_child_process_is_tensorflows_registry(cache_dir: Path) -> None:
    from tensorflow.python.framework import op_def_registry

    op_list = message_class("OpList")()
    op_list.ParseFromString(op_cache._dump_op_list())
    by_name = {op_def.name: op_def for op_def in op_list.op}
    assert len(by_name) > 1000
    for name in ("Const", "MatMul", "BiasAdd", "FusedBatchNormV3", "While", "StatelessIf", "Erfc"):
        assert by_name[name] == op_def_registry.get(name)


def test_the_cache_is_built_when_missing_and_reused(counted_dump: list[int]) -> None:
    path = op_cache.cache_path()
    assert not path.exists()
    defs = op_cache.cached_op_defs()
    assert len(counted_dump) == 1 and path.is_file()
    assert defs["MatMul"].output_arg[0].type_attr == "T" and "Placeholder" in defs
    assert path.name.startswith(f"tensorflow-ops-{tf.__version__}-")
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind
    op_cache.cached_op_defs.cache_clear()  # a later run
    assert op_cache.cached_op_defs()["MatMul"] == defs["MatMul"]
    assert len(counted_dump) == 1


def test_the_cache_is_rebuilt_when_the_installation_changes(counted_dump: list[int],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    op_cache.cached_op_defs()
    first = op_cache.cache_path()
    monkeypatch.setattr(op_cache, "cache_key", lambda: "0.0.0-another-installation")
    op_cache.cached_op_defs.cache_clear()
    assert "Const" in op_cache.cached_op_defs()
    assert len(counted_dump) == 2
    assert op_cache.cache_path() != first and op_cache.cache_path().is_file()


def test_the_key_follows_the_native_library(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "tensorflow"
    (fake / "python").mkdir(parents=True)
    library = fake / "python" / "_pywrap_tensorflow_internal.so"
    library.write_bytes(b"one")
    monkeypatch.setattr(op_cache, "_tensorflow_dir", lambda: fake)
    before = op_cache.cache_key()
    assert op_cache.cache_key() == before
    library.write_bytes(b"a different build")
    assert op_cache.cache_key() != before


@pytest.mark.parametrize("content", [b"", b"\xff\xfe not a protobuf \x00\x01", b"\n\x05\n\x03Foo"],
                         ids=["empty", "garbage", "not TensorFlow's"])
def test_a_corrupt_cache_file_is_rebuilt(counted_dump: list[int], content: bytes) -> None:
    path = op_cache.cache_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    assert "Const" in op_cache.cached_op_defs()
    assert len(counted_dump) == 1
    op_cache.cached_op_defs.cache_clear()
    assert "Const" in op_cache.cached_op_defs() and len(counted_dump) == 1  # the rebuilt file is read


def test_an_unwritable_cache_directory_is_no_error(counted_dump: list[int], monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(op_cache.CACHE_DIR_VARIABLE, str(blocker / "cache"))
    assert "Const" in op_cache.cached_op_defs()
    assert len(counted_dump) == 1
