"""The checks of a candidate's fused op itself: its type declared (or a TensorFlow op), its
attributes declared, present and writable, and its number of inputs.

Without an inner graph these depend on nothing but the op type and the attribute values.  The
candidates of one stage mostly share both (every MatMul with BiasAdd of a model is fused with
the same attributes), so :class:`OpChecks` answers once per distinct type and plain scalar
attribute values and shares the answer, or the refusal, with every candidate alike.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, NamedTuple

from ..graph.attrs import make_attr_value
from ..graph.node_checks import NodeJudge
from ..graph.protos import message_class
from ..graph.tf_ops import is_tensorflow_op
from .attr_values import written_attrs
from .candidate import FusionCandidate
from .fused_ops import FusedOpDef
from .inner_graph import check_inner_signatures, check_inner_structure
from .refusal import Refused

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.attr_value_pb2 import AttrValue


class CheckedOp(NamedTuple):
    """A candidate's fused op, checked."""

    #: the declaration (None for an inner graph or a stock TensorFlow op)
    op_def: FusedOpDef | None
    #: the attributes of each new node, written (plans only read them: they may be shared)
    attr_values: list[dict[str, "AttrValue"]]
    #: how many inputs the fused op takes
    n_inputs: int


def check_op(candidate: FusionCandidate, fused_ops: Mapping[str, FusedOpDef]) -> CheckedOp:
    """Check ``candidate``'s fused op; raises :class:`Refused` with the reason."""
    op_def = _declared_op(candidate, fused_ops)
    attr_values = written_attrs(candidate, op_def, fused_ops)
    if candidate.has_inner_graph:
        check_inner_signatures(candidate, attr_values, fused_ops)
    n_inputs = op_def.input_count(candidate.attrs) if op_def is not None else candidate.num_inputs()
    if op_def is None and not candidate.has_inner_graph:
        _check_stock_op(candidate.type, attr_values[0], n_inputs)
    return CheckedOp(op_def, attr_values, n_inputs)


def _stock_probe(op: str, attrs: dict[str, "AttrValue"]) -> Any:
    node = message_class("NodeDef")(op=op)
    for key, value in attrs.items():
        node.attr[key].CopyFrom(value)
    return node


def _check_stock_op(op: str, attrs: dict[str, "AttrValue"], n_inputs: int | None) -> None:
    """A fused op that is a stock TensorFlow op: its attributes as the op declares them and (given
    ``n_inputs``) as many inputs as it takes; refuses with the reason."""
    judge = NodeJudge(lambda name: None)
    probe = _stock_probe(op, attrs)
    problems = judge.attr_problems(probe)
    if n_inputs is not None and not problems:
        count = judge.count_problem(probe, n_inputs)
        if count is not None:
            problems.append(count)
    if problems:
        raise Refused(f"the fused op is TensorFlow's {op}, which it does not fit: {'; '.join(problems[:3])}")


def _declared_op(candidate: FusionCandidate, fused_ops: Mapping[str, FusedOpDef]) -> FusedOpDef | None:
    """The declaration of the fused op (None for an inner graph or a stock TensorFlow op);
    refuses a type that is neither declared nor a TensorFlow op."""
    op_def = fused_ops.get(candidate.type)
    if candidate.has_inner_graph:
        check_inner_structure(candidate, fused_ops)
    elif op_def is None:
        if not candidate.type:
            raise Refused("the pass set no fused op type")
        if not is_tensorflow_op(candidate.type):
            raise Refused(f"fused op type {candidate.type!r} is not declared; register a FusedOpDef for it "
                          "(or produce a TensorFlow op)")
    if op_def is not None and not candidate.has_inner_graph:
        problems = op_def.check_attrs(candidate.attrs)
        if problems:
            raise Refused("; ".join(problems))
    return None if candidate.has_inner_graph else op_def


class OpChecks:
    """:func:`check_op` for the candidates of one stage, answered once per op type and attribute
    values.  Only candidates without an inner graph whose attribute values are all plain scalars
    (bool, int, float, str, bytes) share answers; a float is told by its exact bits and every
    value by its Python type, so ``True``, ``1`` and ``1.0`` or ``0.0`` and ``-0.0`` are apart."""

    def __init__(self, fused_ops: Mapping[str, FusedOpDef]) -> None:
        self.fused_ops = fused_ops
        self._answers: dict[tuple, CheckedOp | str] = {}  # a refusal by its reason
        #: the key of each attribute dict seen, by the op type and the dict's identity (candidates of
        #: a pass share one dict per attribute set); each entry holds its dict, which keeps that
        #: identity its own
        self._keys: dict[tuple[str, int], tuple[Mapping[str, Any], tuple | None]] = {}
        #: attribute sets with a description added, by the checked sets' identity and the description
        #: (each entry holds the checked list it was made from, which keeps that identity its own)
        self._described: dict[tuple, tuple[list, list[dict[str, Any]]]] = {}

    def check(self, candidate: FusionCandidate) -> CheckedOp:
        """:func:`check_op` of ``candidate``, shared with earlier candidates alike."""
        key = None if candidate.inner_nodes else self._key(candidate.type, candidate.attrs)
        if key is None:
            return check_op(candidate, self.fused_ops)
        answer = self._answers.get(key)
        if answer is None:
            try:
                answer = _own_messages(check_op(candidate, self.fused_ops))
            except Refused as why:
                answer = str(why)
            self._answers[key] = answer
        if isinstance(answer, str):
            raise Refused(answer)
        if answer.op_def is None:  # a stock TensorFlow op takes the inputs the candidate maps
            _check_stock_op(candidate.type, answer.attr_values[0], candidate.num_inputs())
            return answer._replace(n_inputs=candidate.num_inputs())
        return answer

    def _key(self, op_type: str, attrs: Mapping[str, Any]) -> tuple | None:
        """:func:`attrs_key` of ``op_type`` and ``attrs``, worked out once per dict (a candidate is
        never changed once made: its dict's key stays what it was)."""
        known = self._keys.get((op_type, id(attrs)))
        if known is None or known[0] is not attrs:
            key = attrs_key(op_type, attrs)
            if key is None:
                key = _message_attrs_key(op_type, attrs)
            known = self._keys[op_type, id(attrs)] = (attrs, key)
        return known[1]

    def described(self, attr_values: list[dict[str, Any]], count: int, name: str,
                  description: str) -> list[dict[str, Any]]:
        """New dicts of ``attr_values`` (or of ``count`` empty ones) with ``name`` set to ``description``
        (a string attribute): made once per checked list and description, so that candidates alike
        share their attribute messages and the rewrite serializes each set once."""
        key = (id(attr_values), 0 if attr_values else count, description)
        known = self._described.get(key)
        if known is None or known[0] is not attr_values:
            value = make_attr_value(description, "string")
            made = [{**values, name: value} for values in attr_values or [{}] * count]
            known = self._described[key] = (attr_values, made)
        return known[1]


_SCALAR_KINDS = frozenset({bool, int, float, str, bytes})


def _message_attrs_key(op_type: str, attrs: Mapping[str, Any]) -> tuple | None:
    """What identifies an op type with these attribute values when some are ``AttrValue`` messages
    (a pass that hands on a node's own attributes): each message by its deterministic bytes, the
    rest as :func:`attrs_key` tells them; None when another value is no plain scalar."""
    AttrValue = message_class("AttrValue")
    plain = {k: v for k, v in attrs.items() if type(v) is not AttrValue}
    if len(plain) == len(attrs):
        return None
    key = attrs_key(op_type, plain)
    if key is None:
        return None
    messages = tuple((k, v.SerializeToString(deterministic=True)) for k, v in attrs.items() if type(v) is AttrValue)
    return (*key, messages)


def _own_messages(checked: CheckedOp) -> CheckedOp:
    """``checked`` with copies of the ``AttrValue`` messages it holds: shared with other candidates,
    it must not hold messages of the graph (the first candidate's node may be rewritten before the
    others are built)."""
    AttrValue = message_class("AttrValue")
    if not any(type(v) is AttrValue for values in checked.attr_values for v in values.values()):
        return checked
    return checked._replace(attr_values=[{k: _copy(v) if type(v) is AttrValue else v for k, v in values.items()}
                                         for values in checked.attr_values])


def _copy(message: Any) -> Any:
    own = type(message)()
    own.CopyFrom(message)
    return own


def attrs_key(op_type: str, attrs: Mapping[str, Any]) -> tuple | None:
    """What identifies an op type with these attribute values (names in order, Python types,
    values; floats by their bits), or None when a value is not a plain scalar."""
    values = tuple(attrs.values())
    kinds = tuple(map(type, values))
    if not _SCALAR_KINDS.issuperset(kinds):
        return None
    if float in kinds:
        values = tuple(v.hex() if type(v) is float else v for v in values)
    return (op_type, tuple(attrs), kinds, values)
