"""Running a GraphDef in stock TensorFlow, for comparisons.

Grappler's remapper rewrites some subgraphs (layer norms among them) into
fused kernels of its own with different rounding; comparing an original graph
with a fused one must not measure that, so it is switched off here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..errors import ScopeFusionError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from tensorflow.core.framework.graph_pb2 import GraphDef


def session_config() -> Any:
    """A ConfigProto with numerics-changing graph rewrites disabled."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import
    from tensorflow.core.protobuf import rewriter_config_pb2  # deferred: TensorFlow costs seconds to import

    config = tf.compat.v1.ConfigProto()
    config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    return config


def run_graph_def(
    graph_def: "GraphDef", feeds: Mapping[str, "np.ndarray"], fetches: Sequence[str]
) -> list["np.ndarray"]:
    """Import ``graph_def`` into a fresh graph and fetch tensors by name."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=graph, config=session_config()) as sess:
            return list(sess.run(list(fetches), dict(feeds)))


def tensorflow_error_line(exc: BaseException) -> str:
    """TensorFlow's real cause of a failed run on one line: the error class, the
    node and its op, and the message, without the "Graph execution error" frame
    and the stack traces."""
    message = str(getattr(exc, "message", "") or exc)
    cause = _cause_lines(message)
    op = getattr(exc, "op", None)
    where = ""
    if op is not None:
        where = f" at node {op.name!r} ({op.type})"
    else:
        node_def = getattr(exc, "node_def", None)
        if node_def is not None and node_def.name:
            where = f" at node {node_def.name!r} ({node_def.op})"
    return f"{type(exc).__name__}{where}: {cause or type(exc).__name__}"


def _cause_lines(message: str) -> str:
    """The lines of a TensorFlow error message that say what went wrong."""
    lines = message.splitlines()
    after_node = next((k for k, line in enumerate(lines) if line.startswith("Node: ")), None)
    if after_node is not None:
        lines = lines[after_node + 1:]
    kept: list[str] = []
    for line in lines:
        text = line.strip()
        if text.startswith(("Original stack trace", "Detected at node", "File ", "[[")) or \
                text == "Graph execution error:":
            if kept:
                break
            continue
        if text:
            kept.append(text)
    return " ".join(kept)


class GraphRunner:
    """One imported graph with an open session, reused across runs; a failure is
    an error naming the graph and TensorFlow's cause.  ``stock``: a default session's
    configuration instead of :func:`session_config`."""

    def __init__(self, graph_def: "GraphDef", label: str, *, stock: bool = False) -> None:
        import tensorflow as tf  # deferred: TensorFlow costs seconds to import

        self.label = label
        self.graph = tf.Graph()
        try:
            with self.graph.as_default():
                tf.compat.v1.import_graph_def(graph_def, name="")
        except Exception as exc:
            raise ScopeFusionError(f"the {label} graph does not import into TensorFlow: "
                                   f"{' '.join(str(exc).split())}") from exc
        self.placeholders = {f"{op.name}:0" for op in self.graph.get_operations()
                             if op.type in ("Placeholder", "PlaceholderV2")}
        # stock: as a default session runs it (Grappler's remapper on), for a graph that runs only so
        self.session = tf.compat.v1.Session(graph=self.graph, config=None if stock else session_config())

    def run(self, fetches: Sequence[str], feeds: Mapping[str, "np.ndarray"]) -> list["np.ndarray"]:
        mine = {k: v for k, v in feeds.items() if k in self.placeholders}
        try:
            return list(self.session.run(list(fetches), mine))
        except Exception as exc:
            raise ScopeFusionError(f"running the {self.label} graph failed: {tensorflow_error_line(exc)}") from exc

    def close(self) -> None:
        self.session.close()
