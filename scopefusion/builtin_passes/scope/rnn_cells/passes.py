"""ScopeBasicLSTMCellPass and ScopeGRUCellPass: the time steps of recurrent layers unrolled in the
graph, each step -> one ``BasicLSTMCell`` or ``GRUCell``.

Forms: ``tf.compat.v1`` rnn_cell cells unrolled by ``static_rnn`` / ``static_bidirectional_rnn``
(alone or in a ``MultiRNNCell``), and Keras 3 / tf_keras ``LSTM(unroll=True)`` or
``RNN(LSTMCell, unroll=True)`` (see :mod:`.keras_lstm`) and ``GRU`` (``reset_after=True``, the
default, see :mod:`.keras_gru_reset_after`; ``reset_after=False``, see :mod:`.keras_gru`).
``static_rnn`` and tf_keras put every step of a layer in one scope (``rnn/basic_lstm_cell``,
``rnn/lstm_cell``, ``rnn/gru_cell``, under ``multi_rnn_cell/cell_<k>`` for stacks), so one
matched scope gives one result per step, named
``<scope>/step_<t>`` (the scope's own name when it holds one step, as Keras 3's do), each fusing
only that step's nodes (a :class:`ScopePart` of the scope); the weights stay in the graph and feed
every step.  ``LSTMCell``'s peepholes, projection and clipping (and Sonnet's projection) are forms
of their own, fused as the op's optional inputs and attributes (:mod:`.lstm`, :mod:`.keras_lstm`);
a scope that computes anything beyond its steps is refused as a whole with the reason.

The names are where the passes look first, never what decides: a scope holding a step found by
its dataflow is read the same whatever it is called (``lstm``, ``gru``, ``a_2/b_16``; Sonnet's
``snt.LSTM`` and ``snt.GRU``, see :mod:`.sliced_gru`), and so is a scope holding an LSTM step
with an option no form reads (:mod:`.cell_options`: refused with that reason).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, AbstractSet, Any, ClassVar, Sequence

from ....core.scope.base_pass import ScopeBasePass
from ....core.scope.instances import ScopePart
from ....core.scope.patterns import PatternSet, ScopePattern
from ....core.scope.port_maps import input_slots
from ....core.scope.results import FusionScopesResult, ScopesResult
from ....core.fusion.fused_ops import OPTIONAL_INPUTS_ATTR, FusedOpDef
from ....core.fusion.refusal import Refused, fail
from .gru import GRU_FORM, gru_attrs
from .keras_gru import KERAS_GRU_FORM, KERAS_GRU_NO_BIAS_FORM
from .keras_gru_reset_after import KERAS_GRU_RESET_AFTER_FORM, KERAS_GRU_RESET_AFTER_NO_BIAS_FORM
from .keras_loops import KERAS_GRU_LOOP_FORM, KERAS_LSTM_LOOP_FORM, loop_body_scopes
from .cell_options import option_scopes
from .discovery import scopes_holding, split_scopes, step_scopes, unrelated
from .keras_lstm import KERAS_LSTM_FORM, KERAS_LSTM_NO_BIAS_FORM, KERAS_LSTM_PROJECTED_FORMS
from .lstm import LSTM_FORM, LSTM_OPTION_FORMS, lstm_attrs
from .ops import BASIC_LSTM_CELL, GRU_CELL
from .sliced_gru import SLICED_GRU_FORMS
from .steps import CellForm, CellStep, find_steps_of_any

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope, ScopeGraph


class _CellScopePass(ScopeBasePass):
    """Shared by the cell passes: a scope named like the cell, holding its MatMul and Split, or any
    scope holding a step found by what it computes (:mod:`.discovery`), or a loop body holding one."""

    general = False
    scope_names: ClassVar[tuple[str, ...]] = ()
    forms: ClassVar[tuple[CellForm, ...]]
    #: the form of a step written straight into a tf_keras loop body's ``while`` scope
    loop_form: ClassVar[CellForm]
    op_def: ClassVar[FusedOpDef]

    def __init__(self) -> None:
        self._steps: dict[int, tuple["Scope", CellForm, CellStep, int]] = {}  # by id of the step's part
        self._refused: dict[str, str] = {}
        self._single: dict[str, bool] = {}  # scopes holding one step (Keras 3 scopes each step)
        self._names: dict[str, str] = {}  # the fused cell's name, for a loop body's scope

    #: whether the cell's scope holds a Sub (a GRU's ``1 - u``; an LSTM has none), which keeps
    #: each pass from reporting the other's scopes as near misses
    has_sub: ClassVar[bool] = False

    def define_patterns(self) -> list[PatternSet]:
        batch = []
        for name in self.scope_names:
            pattern = (ScopePattern(self.op_def.name).add_scope_feature(suffix=name)
                       .add_node_op_type_feature("MatMul", 0, 1)
                       .add_node_op_type_feature("Split", 0, 1))
            batch.append(pattern.add_node_op_type_feature("Sub", *((0, 1) if self.has_sub else (-1, 0))))
        return [[batch]]

    def may_fuse(self, op_types: AbstractSet[str]) -> bool:
        """Every scope the pass makes a result of (matched, renamed or a loop body) holds a MatMul
        and a Split."""
        return {"MatMul", "Split"} <= op_types

    def _holds_cell_ops(self, scope: "Scope") -> bool:
        """What the patterns ask of a cell scope besides its name."""
        return scope.count("MatMul") > 0 and scope.count("Split") > 0 and (scope.count("Sub") > 0) == self.has_sub

    def renamed_cell_scopes(self, scope_graph: "ScopeGraph", matched: list["Scope"]) -> list["Scope"]:
        """Keras 3 names a second cell layer ``gru_cell_1`` and its steps ``gru_cell_1_1``,
        ``gru_cell_1_3``, ...: one ``_N`` more than scope patterns drop.  Those scopes (holding a
        MatMul and a Split, apart from every matched scope) are cell scopes too."""
        pattern = re.compile(rf"(?:{'|'.join(self.scope_names)})(?:_[0-9]+)+")
        found = []
        for scope in scopes_holding(scope_graph, ("Split",)):  # a cell scope holds its Split
            name = scope.name.rpartition("/")[2]
            if scope.parent is None or pattern.fullmatch(name) is None or not self._holds_cell_ops(scope):
                continue
            if not any(m is scope or m.is_ancestor_of(scope) or scope.is_ancestor_of(m) for m in matched):
                found.append(scope)
        return found

    def last_match_scopes_and_ops(self, scope_graph: "ScopeGraph") -> list[ScopesResult]:
        groups: list[ScopesResult] = []
        matched = self.matched_scopes(scope_graph)
        bodies = loop_body_scopes(scope_graph, has_sub=self.has_sub)
        for scope in bodies:  # no cell scope: the fused cell is named like the scope Keras would give it
            self._names[scope.name] = f"{scope.name}/{self.scope_names[-1]}"
        named = matched + self.renamed_cell_scopes(scope_graph, matched)
        # a cell's scope by what it computes: a library may name it anything (``lstm``, ``gru``, ``a/b``)
        found = unrelated(step_scopes(scope_graph, self.forms) + self.option_scopes(scope_graph), named + bodies)
        for scope in named + found + bodies:
            forms = (self.loop_form,) if scope.name in self._names else self.forms
            try:
                form, steps = find_steps_of_any(scope, forms)
            except Refused as why:
                self._refused[scope.name] = why.reason
                groups.append(ScopesResult([scope]))
                continue
            if scope.name in self._names and len(steps) != 1:
                self._refused[scope.name] = f"the loop body holds {len(steps)} {self.op_def.name} steps, not one"
                groups.append(ScopesResult([scope]))
                continue
            self._single[scope.name] = len(steps) == 1
            for t, step in enumerate(steps):
                part = ScopePart(scope, step.members)  # the step's nodes only, not the whole scope
                self._steps[id(part)] = (scope, form, step, t)
                groups.append(ScopesResult([scope], part=part))
        return groups

    def generate_fusion_result(self, scopes: Sequence["Scope"], result: FusionScopesResult) -> None:
        if result.part is None:
            fail(self._refused[scopes[0].name])
        scope, form, step, t = self._steps[id(result.part)]
        sg = scope.graph
        if form.check is not None:
            form.check(sg, step)
        attrs = {**self.step_attrs(sg, step), **form.attrs}
        if form.optional:
            attrs[OPTIONAL_INPUTS_ATTR] = list(form.optional)
        T = sg.index.nodes[step.nodes["root"]].attr["T"].type
        if scope.name in self._names:
            result.set_name(self._names[scope.name])
        else:
            result.set_name(scope.name if self._single[scope.name] else f"{scope.name}/step_{t}")
        result.set_type(self.op_def.name)
        result.set_description(f"{form.library} step {t} -> {self.op_def.name} "
                               f"({', '.join(f'{k}={v}' for k, v in attrs.items())})")
        tensors = [step.tensors[name] for name in form.inputs]
        for reader, slots in input_slots(sg, step.members, tensors, names=form.inputs, reads=step.reads).items():
            result.insert_inputs(reader, slots)
        names = sg.index.names
        for k, name in enumerate(form.outputs):
            node, port = step.tensors[name]
            result.insert_outputs(names[node], [None] * port + [k])
        if form.inner_graph is not None:
            form.inner_graph(result, attrs, T)
            return
        for key, value in attrs.items():
            result.set_attr(key, value)
        result.set_attr("T", T)

    def step_attrs(self, sg: "ScopeGraph", step: CellStep) -> dict[str, Any]:
        raise NotImplementedError

    def option_scopes(self, scope_graph: "ScopeGraph") -> list["Scope"]:
        """Scopes of cells the fused op cannot express, found by what they compute (refused with
        the reason)."""
        return []


class ScopeBasicLSTMCellPass(_CellScopePass):
    """tf.compat.v1 rnn_cell BasicLSTMCell / LSTMCell steps (static_rnn), Keras LSTM steps
    (unroll=True) and the step of a tf_keras LSTM loop body (standard_lstm) -> BasicLSTMCell."""

    name = "ScopeBasicLSTMCellPass"
    description = ("tf.compat.v1 BasicLSTMCell / LSTMCell steps unrolled by static_rnn, Keras 3 / tf_keras "
                   "LSTM(unroll=True) steps, the step of a Keras LSTM loop body (tf_keras: standard_lstm's) "
                   "-> BasicLSTMCell(x, h, c, w, b[, peepholes][, proj]); LSTMCell's peepholes, num_proj, cell_clip "
                   "and proj_clip and Sonnet's projection_size carried by the op")
    scope_names = ("basic_lstm_cell", "lstm_cell")
    forms = (LSTM_FORM, *LSTM_OPTION_FORMS, KERAS_LSTM_FORM, KERAS_LSTM_NO_BIAS_FORM, *KERAS_LSTM_PROJECTED_FORMS)
    loop_form = KERAS_LSTM_LOOP_FORM
    op_def = BASIC_LSTM_CELL

    def step_attrs(self, sg: "ScopeGraph", step: CellStep) -> dict[str, Any]:
        ops = sg.index.ops
        return lstm_attrs(step.consts, (ops[step.nodes["act_c"]], ops[step.nodes["act_j"]]))

    def option_scopes(self, scope_graph: "ScopeGraph") -> list["Scope"]:
        return option_scopes(split_scopes(scope_graph))


class ScopeGRUCellPass(_CellScopePass):
    """tf.compat.v1 rnn_cell GRUCell steps (static_rnn), Keras GRU steps (unroll=True) and the step
    of a tf_keras GRU loop body (standard_gru) -> GRUCell (reset_after as the cell's)."""

    name = "ScopeGRUCellPass"
    description = ("tf.compat.v1 GRUCell steps unrolled by static_rnn, Keras 3 / tf_keras GRU(unroll=True) steps "
                   "(reset_after=True, the default, and False), the step of a Keras GRU loop body (tf_keras: "
                   "standard_gru's) -> GRUCell(x, h, gate/candidate kernels and biases[, candidate_recurrent_bias])")
    scope_names = ("gru_cell",)
    has_sub = True
    forms = (GRU_FORM, KERAS_GRU_RESET_AFTER_FORM, KERAS_GRU_RESET_AFTER_NO_BIAS_FORM, KERAS_GRU_FORM,
             KERAS_GRU_NO_BIAS_FORM, *SLICED_GRU_FORMS)
    loop_form = KERAS_GRU_LOOP_FORM
    op_def = GRU_CELL

    def step_attrs(self, sg: "ScopeGraph", step: CellStep) -> dict[str, Any]:
        return gru_attrs(sg.index.ops[step.nodes["act"]])
