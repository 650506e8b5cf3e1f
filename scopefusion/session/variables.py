"""Carrying variable values from one TensorFlow session to another.

When a session's graph is fused again (its fetches or its graph changed), the
new fused graph runs in a new TensorFlow session whose variables start
uninitialised.  :func:`read_variables` reads every initialised variable of the
old session; :func:`write_variables` assigns those values to the variables of
the same name in the new one.  Both add the few ops they need to the graph they
work on (the session's own graphs, never the user's).  Lookup tables and other
state are not carried over.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

#: Variables with a reference (TF1) or a resource handle (TF2 and ``use_resource``).
REF_VARIABLES = frozenset({"VariableV2", "Variable", "AutoReloadVariable"})
RESOURCE_VARIABLES = frozenset({"VarHandleOp"})
_SCOPE = "scopefusion_variables"


def _variables(graph: Any) -> list[Any]:
    return [op for op in graph.get_operations() if op.type in REF_VARIABLES | RESOURCE_VARIABLES]


def read_variables(session: Any) -> dict[str, "np.ndarray"]:
    """The values of the initialised variables of ``session``'s graph, by variable name."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    graph = session.graph
    variables = _variables(graph)
    if not variables:
        return {}
    raw = tf.raw_ops
    with graph.as_default(), tf.name_scope(_SCOPE):
        checks = [raw.IsVariableInitialized(ref=op.outputs[0]) if op.type in REF_VARIABLES
                  else raw.VarIsInitializedOp(resource=op.outputs[0]) for op in variables]
        initialised = session.run(checks)
        live = [op for op, ok in zip(variables, initialised, strict=True) if ok]
        reads = [op.outputs[0] if op.type in REF_VARIABLES
                 else raw.ReadVariableOp(resource=op.outputs[0], dtype=op.get_attr("dtype")) for op in live]
    values = session.run(reads) if reads else []
    return {op.name: value for op, value in zip(live, values, strict=True)}


def write_variables(session: Any, values: Mapping[str, "np.ndarray"]) -> list[str]:
    """Assign ``values`` to the variables of the same name in ``session``'s graph;
    returns the names of the values that found no such variable."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    graph = session.graph
    by_name = {op.name: op for op in _variables(graph)}
    raw = tf.raw_ops
    assigns, feeds, missing = [], {}, []
    with graph.as_default(), tf.name_scope(_SCOPE):
        for name, value in values.items():
            op = by_name.get(name)
            if op is None:
                missing.append(name)
                continue
            holder = tf.compat.v1.placeholder(op.get_attr("dtype") if op.type in RESOURCE_VARIABLES
                                              else op.outputs[0].dtype.base_dtype)
            feeds[holder] = value
            if op.type in REF_VARIABLES:
                assigns.append(raw.Assign(ref=op.outputs[0], value=holder, validate_shape=False).op)
            else:
                assigns.append(raw.AssignVariableOp(resource=op.outputs[0], value=holder))
    if assigns:
        session.run(assigns, feeds)
    return missing
