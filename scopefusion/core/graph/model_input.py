"""What the Python API accepts as a model, made one :class:`LoadedModel`: a path (a GraphDef file, a
SavedModel directory or a folder with one below it), a ``GraphDef`` (copied and checked, never
changed), a loaded model, or a model still in the Python process - a Keras model (Keras 3 or tf_keras),
a ``tf.function``, a concrete function or a ``tf.Module`` whose ``__call__`` is a ``tf.function`` -
frozen to constants in the process as a SavedModel's signature is."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Union

from google.protobuf.message import DecodeError, EncodeError

from ..errors import ScopeFusionError
from .io import LoadedModel, load_model
from .protos import message_class
from .validate import validate_graph

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

#: a path, a GraphDef, a loaded model, or a Keras model / tf.function / concrete function / tf.Module
ModelLike = Union[str, "os.PathLike[str]", "GraphDef", LoadedModel, Any]
_IN_PROCESS_HELP = ("give a path (a .pb / .pbtxt GraphDef or a SavedModel directory), a GraphDef, a Keras model, "
                    "a tf.function with an input_signature, a concrete function or a tf.Module whose __call__ is "
                    "such a tf.function")


def as_model(model: ModelLike, signature: str | None) -> LoadedModel:
    """``model`` as a :class:`LoadedModel` (see the module's description)."""
    if isinstance(model, LoadedModel):
        return model
    if isinstance(model, (str, os.PathLike)):
        return load_model(model, signature)
    graph_def_class = message_class("GraphDef")
    if isinstance(model, graph_def_class):
        return LoadedModel(checked_copy(model, graph_def_class), "<GraphDef>", "graph_def")
    if _from_tensorflow(model):
        return freeze_in_process(model)
    raise ScopeFusionError(f"cannot fuse a {type(model).__name__}; {_IN_PROCESS_HELP}")


def _from_tensorflow(model: Any) -> bool:
    """Whether ``model`` is an object of TensorFlow, Keras or tf_keras (told without importing them)."""
    root = type(model).__module__.split(".")[0]
    return root in ("tensorflow", "keras", "tf_keras") or any(
        c.__module__.split(".")[0] in ("tensorflow", "keras", "tf_keras") for c in type(model).__mro__)


def freeze_in_process(model: Any) -> LoadedModel:
    """Freeze a Keras model, a ``tf.function``, a concrete function or a ``tf.Module`` into a GraphDef
    of constants, with its inputs and outputs."""
    # only a model already in TensorFlow gets here
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import
    from tensorflow.python.framework.convert_to_constants import (  # deferred: TensorFlow
        convert_variables_to_constants_v2,
    )

    concrete, source = _concrete_function(tf, model)
    try:
        frozen = convert_variables_to_constants_v2(concrete)
    except Exception as exc:  # TensorFlow raises many unrelated types here
        raise ScopeFusionError(f"{source}: cannot freeze it to constants ({str(exc).splitlines()[0]})") from exc
    graph_def = frozen.graph.as_graph_def()
    inputs = [t.name for t in frozen.inputs if t.dtype != tf.resource]
    return LoadedModel(graph_def, source, "in_process", inputs, [t.name for t in frozen.outputs])


def _concrete_function(tf: Any, model: Any) -> tuple[Any, str]:
    """The concrete function to freeze for ``model``, and how to name it in messages."""
    name = type(model).__name__
    if hasattr(model, "structured_outputs") and hasattr(model, "graph"):  # a ConcreteFunction
        function_name = getattr(model, "name", "")
        function_name = function_name.decode() if isinstance(function_name, bytes) else str(function_name)
        return model, f"<concrete function {function_name}>"
    if hasattr(model, "get_concrete_function") and hasattr(model, "input_signature"):  # a tf.function
        if model.input_signature is None:
            raise ScopeFusionError(f"<tf.function {getattr(model, '__name__', name)}>: it has no input_signature; "
                                   "give one (tf.function(fn, input_signature=[tf.TensorSpec(...)])) or pass "
                                   "fn.get_concrete_function(tf.TensorSpec(...))")
        return model.get_concrete_function(), f"<tf.function {getattr(model, '__name__', name)}>"
    inputs = getattr(model, "inputs", None)
    if inputs and hasattr(model, "layers"):  # a Keras model with known inputs (Keras 3 or tf_keras)
        specs = [tf.TensorSpec(tuple(i.shape), i.dtype, _input_name(i, k)) for k, i in enumerate(inputs)]
        structure = getattr(model, "input", inputs)  # the model's own nesting of its inputs: one, a list, a dict

        def call(*args: Any) -> Any:
            return model(tf.nest.pack_sequence_as(structure, list(args)), training=False)

        function = tf.function(call, input_signature=specs, autograph=False)
        return function.get_concrete_function(), f"<Keras model {getattr(model, 'name', name)}>"
    if hasattr(model, "layers"):
        raise ScopeFusionError(f"<Keras model {getattr(model, 'name', name)}>: its inputs are not known (a subclassed "
                               "model never called); call it once on example inputs, or pass "
                               "tf.function(model).get_concrete_function(tf.TensorSpec(...))")
    method = getattr(model, "__call__", None)  # noqa: B004  (a tf.Module's __call__ may be a tf.function)
    if hasattr(method, "get_concrete_function"):  # a tf.Module
        return _concrete_function(tf, method)[0], f"<tf.Module {getattr(model, 'name', name)}>"
    raise ScopeFusionError(f"cannot fuse a {name}; {_IN_PROCESS_HELP}")


def _input_name(tensor: Any, k: int) -> str:
    name = str(getattr(tensor, "name", "") or f"input_{k}")
    return name.split(":")[0].replace("/", "_")


def checked_copy(model: "GraphDef", graph_def_class: Any) -> "GraphDef":
    """A copy of the caller's graph (never changed), checked as a loaded file is: refused with the
    node named.  The copy is parsed from the graph's bytes, which validation then reads again (as
    for a file); a graph protobuf cannot read back (nested too deeply) is copied and checked
    node by node, which says why."""
    copy = graph_def_class()
    try:
        data = model.SerializeToString()
        copy.ParseFromString(data)
    except (DecodeError, EncodeError, ValueError):  # too deep to read back, or too large to write
        copy.CopyFrom(model)
        validate_graph(copy)
        return copy
    validate_graph(copy, serialized=data)
    return copy
