"""Tracing a Python function with TensorFlow, once: the graph a pattern function computes.

:func:`traced_graph` answers a :class:`TracedFunction` - the serialized ``GraphDef`` of the
function's ``tf.function`` graph, which node feeds each argument and which tensor is the result.
It is kept three ways, so that TensorFlow is imported as seldom as possible:

* per process, by the function and its argument specs;
* on disk, in scopefusion's cache directory (:func:`.op_cache.cache_dir`), keyed by the
  function's source, the values it reads from its module, the argument specs and the installed
  TensorFlow (:func:`.op_cache.cache_key`): a later run reads the graph back without TensorFlow;
* when it must be traced: in this process when TensorFlow is loaded already or the function
  cannot be imported by name (a lambda, a function defined inside another); otherwise in a
  child process that imports TensorFlow, so that matching - the fusion path - never does.

A function may use the name ``tf`` without importing TensorFlow: tracing binds it.
"""
from __future__ import annotations

import base64
import hashlib
import importlib
import inspect
import json
import subprocess
import sys
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import ScopeFusionError
from .op_cache import cache_dir, cache_key, write_cache_file
from .protos import message_class

#: ``(shape or None for any, dtype name)`` of one argument.
Spec = tuple[tuple[int | None, ...] | None, str]

#: Run in a child process; argv[1]: the request (JSON), argv[2]: the file to write the answer to.
_TRACE_IN_CHILD = (
    "import json, os, sys\n"
    "os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')\n"
    "from scopefusion.core.graph import function_trace as ft\n"
    "request = json.loads(open(sys.argv[1]).read())\n"
    "fn = ft.importable(request['module'], request['qualname'])\n"
    "specs = [(None if s is None else tuple(s), d) for s, d in request['specs']]\n"
    "try:\n"
    "    answer = ft.trace_here(fn, specs).to_json()\n"
    "except ft.TraceError as error:\n"
    "    answer = {'error': str(error)}\n"
    "with open(sys.argv[2], 'w') as out:\n"
    "    out.write(json.dumps(answer))\n"
)


class TraceError(ScopeFusionError):
    """A function could not be traced into a graph."""


@dataclass(frozen=True)
class TracedFunction:
    """A function's graph: the serialized GraphDef, the node of each argument (in order) and the
    result's tensor name."""

    graph: bytes
    inputs: tuple[str, ...]
    output: str

    def graph_def(self) -> Any:
        graph_def = message_class("GraphDef")()
        graph_def.ParseFromString(self.graph)
        return graph_def

    def to_json(self) -> dict[str, Any]:
        return {"graph": base64.b64encode(self.graph).decode("ascii"), "inputs": list(self.inputs),
                "output": self.output}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TracedFunction":
        return cls(base64.b64decode(data["graph"]), tuple(data["inputs"]), str(data["output"]))


_TRACED: dict[tuple[Any, ...], TracedFunction] = {}


def traced_graph(fn: Callable[..., Any], specs: list[Spec]) -> TracedFunction:
    """``fn`` traced with arguments of ``specs``: from this process's cache, the disk cache, or
    traced now (see the module's description)."""
    key = (fn, tuple(specs))
    known = _TRACED.get(key)
    if known is not None:
        return known
    path = _cache_file(fn, specs)
    traced = _read(path) if path is not None else None
    if traced is None:
        where = None if "tensorflow" in sys.modules else _import_name(fn)
        traced = trace_here(fn, specs) if where is None else _trace_in_child(fn, where, specs)
        if path is not None:
            write_cache_file(path, json.dumps(traced.to_json()).encode())
    _TRACED[key] = traced
    return traced


def trace_here(fn: Callable[..., Any], specs: list[Spec]) -> TracedFunction:
    """Trace ``fn`` in this process (importing TensorFlow)."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import; only tracing needs it

    bound = _with_tf(fn, tf)
    names = _parameters(fn)
    tensor_specs = [tf.TensorSpec(None if shape is None else list(shape), tf.as_dtype(dtype), name=name)
                    for (shape, dtype), name in zip(specs, names, strict=True)]
    try:
        concrete = tf.function(bound, autograph=False).get_concrete_function(*tensor_specs)
    except Exception as error:  # whatever the function raised while TensorFlow traced it
        raise TraceError(f"{_qualname(fn)} could not be traced: {type(error).__name__}: {error}") from None
    outputs = concrete.outputs
    if len(outputs) != 1 or concrete.structured_outputs is None or isinstance(
            concrete.structured_outputs, (list, tuple, dict)):
        raise TraceError(f"{_qualname(fn)} must return one tensor, it returns {len(outputs)}")
    inputs = concrete.inputs
    if len(inputs) != len(names):
        raise TraceError(f"{_qualname(fn)} reads {len(inputs) - len(names)} tensor(s) from outside (a variable or "
                         "a captured tensor); pass them as arguments or write them as constants")
    graph_def = concrete.graph.as_graph_def()
    return TracedFunction(graph_def.SerializeToString(deterministic=True),
                          tuple(t.op.name for t in inputs), outputs[0].name)


def _with_tf(fn: Callable[..., Any], tf: Any) -> Callable[..., Any]:
    """``fn`` with the name ``tf`` bound to TensorFlow when its module does not bind it."""
    code = getattr(fn, "__code__", None)
    if code is None or "tf" not in code.co_names or "tf" in fn.__globals__:
        return fn
    namespace = dict(fn.__globals__)
    namespace["tf"] = tf
    bound = types.FunctionType(code, namespace, fn.__name__, fn.__defaults__,
                               fn.__closure__)
    bound.__kwdefaults__ = fn.__kwdefaults__
    return bound


def _parameters(fn: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(fn).parameters)


def _qualname(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


# ------------------------------------------------------------------ the child process


def importable(module: str, qualname: str) -> Callable[..., Any]:
    """The function ``module.qualname`` (a pattern made of it stands for it)."""
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return getattr(target, "function", target)


def _import_name(fn: Callable[..., Any]) -> tuple[str, str] | None:
    """``(module, qualname)`` by which a child process finds ``fn``, or None (a lambda, a nested
    function, a script's function)."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        return None
    try:
        if importable(module, qualname) is not fn:
            return None
    except (ImportError, AttributeError):
        return None
    return module, qualname


def _trace_in_child(fn: Callable[..., Any], where: tuple[str, str], specs: list[Spec]) -> TracedFunction:
    with tempfile.TemporaryDirectory(prefix="scopefusion-trace.") as scratch:
        request, answer = Path(scratch) / "request.json", Path(scratch) / "answer.json"
        request.write_text(json.dumps({"module": where[0], "qualname": where[1], "specs": specs}))
        try:
            done = subprocess.run([sys.executable, "-c", _TRACE_IN_CHILD, str(request), str(answer)],
                                  capture_output=True, check=False, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TraceError(f"{_qualname(fn)} could not be traced: {exc}") from None
        if done.returncode != 0 or not answer.is_file():
            last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
            raise TraceError(f"{_qualname(fn)} could not be traced (in a child process): {last[0]}")
        data = json.loads(answer.read_text())
    if "error" in data:
        raise TraceError(data["error"])
    return TracedFunction.from_json(data)


# ------------------------------------------------------------------ the disk cache


def _cache_file(fn: Callable[..., Any], specs: list[Spec]) -> Path | None:
    """Where the trace of ``fn`` is kept, or None when its source is unknown (nothing to key it by)."""
    try:
        source = inspect.getsource(fn)
        installation = cache_key()
    except (OSError, TypeError, ScopeFusionError):
        return None
    digest = hashlib.sha256()
    for part in (source, repr(_global_values(fn)), repr(specs), installation):
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    name = "".join(c if c.isalnum() else "_" for c in _qualname(fn))[:60]
    return cache_dir() / "patterns" / f"{name}-{digest.hexdigest()[:24]}.json"


def _global_values(fn: Callable[..., Any]) -> list[tuple[str, Any]]:
    """The plain values (numbers, strings) ``fn`` reads from its module: part of what it computes."""
    code = getattr(fn, "__code__", None)
    names = code.co_names if code is not None else ()
    namespace = getattr(fn, "__globals__", {})
    return [(n, namespace[n]) for n in names if isinstance(namespace.get(n), (int, float, str, bytes, tuple))]


def _read(path: Path) -> TracedFunction | None:
    try:
        return TracedFunction.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
