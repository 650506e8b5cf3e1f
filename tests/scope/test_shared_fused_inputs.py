"""A fused op that takes one tensor at several inputs (a cell's h and c, one ``zeros``): the
matcher records which variable each read is (``PatternMatch.reads``), scope port maps
(:func:`input_slots`) give each input its own reads by that declaration, and refuse in the
user's terms when nothing says which read is which; the candidate and the plan take the
tensor at every input it is."""
from __future__ import annotations

import pytest
from tests.helpers.graph_helpers import make_graph

from scopefusion import ScopeGraph
from scopefusion.core.fusion.candidate import FusionCandidate
from scopefusion.core.fusion.fused_ops import FusedOpDef, TensorArg, AttrDef
from scopefusion.core.fusion.plan import make_plan
from scopefusion.core.fusion.refusal import Refused
from scopefusion.core.graph.matching import PatternMatcher
from scopefusion.core.graph.pattern import OpPattern, op
from scopefusion.core.graph.view import GraphView
from scopefusion.core.graph_fusion.base_pass import FusedOp
from scopefusion.core.graph_fusion.engine import to_candidate as graph_candidate
from scopefusion.core.scope.candidates import to_candidate as scope_candidate
from scopefusion.core.scope.port_maps import input_slots
from scopefusion.core.scope.results import FusionScopesResult

#: c * (x + h), with h and c one tensor s
STEP = op("Mul", "$c", op("AddV2", "$x", "$h"))
NAMES = ("x", "h", "c")


def graph():
    return make_graph([
        ("x", "Placeholder", []),
        ("s", "Placeholder", []),
        ("cell/sum", "AddV2", ["x", "s"]),
        ("cell/mul", "Mul", ["s", "cell/sum"]),
        ("y", "Identity", ["cell/mul"]),
    ])


def matched(sg: ScopeGraph):
    index = sg.index
    matcher = PatternMatcher(sg, inside=set(sg.scope("cell").all_node_indices()))
    matcher.match((index.index["cell/mul"], 0), STEP)
    return matcher


def test_the_matcher_says_which_variable_each_read_is():
    sg = ScopeGraph(graph())
    m = matched(sg)
    index = sg.index
    s = (index.index["s"], 0)
    assert m.tensors["h"] == m.tensors["c"] == s  # one tensor, two variables
    named = {(index.names[node], slot): name for (node, slot), name in m.reads.items()}
    assert named == {("cell/mul", 0): "c", ("cell/sum", 0): "x", ("cell/sum", 1): "h"}
    whole = PatternMatcher(sg).match_pattern(OpPattern("step", STEP), index.index["cell/mul"])
    assert whole.reads == m.reads  # a pattern's match carries them too


def test_port_maps_give_each_input_of_one_tensor_its_own_reads():
    sg = ScopeGraph(graph())
    m = matched(sg)
    index = sg.index
    tensors = [m.tensors[n] for n in NAMES]
    slots = input_slots(sg, m.members, tensors, names=NAMES, reads=m.reads)
    assert slots == {"cell/sum": [0, 1], "cell/mul": [2, None]}
    # without the declaration the graph cannot tell the reads apart: refused, saying so
    with pytest.raises(Refused) as why:
        input_slots(sg, m.members, tensors, names=NAMES)
    assert why.value.reason == ("h and c are one tensor, s, and which of them 'cell/sum' reads (input 1) is not "
                                "declared: the fused op cannot be given its inputs")
    assert why.value.nodes == ("cell/sum",)
    # a declaration that gives every read to h leaves c without one
    both_h = {**m.reads, (index.index["cell/mul"], 0): "h"}
    with pytest.raises(Refused, match=r"^h and c are one tensor, s, and nothing inside reads it as c: the fused "
                                      r"op cannot be given that input$"):
        input_slots(sg, m.members, tensors, names=NAMES, reads=both_h)
    # distinct tensors need no declaration (as before)
    assert input_slots(sg, m.members, tensors[:2]) == {"cell/sum": [0, 1], "cell/mul": [1, None]}


CELL = FusedOpDef("Cell", (TensorArg("x", type_attr="T"), TensorArg("h", type_attr="T"), TensorArg("c", type_attr="T")),
                  (TensorArg("y", type_attr="T"),), (AttrDef("T", "type"),))


def test_a_scope_result_and_a_graph_match_feed_one_tensor_to_both_inputs():
    sg = ScopeGraph(graph())
    m = matched(sg)
    index = sg.index
    s = index.index["s"]
    result = FusionScopesResult("cell/fused", [sg.scope("cell")])
    result.set_type("Cell")
    result.set_attr("T", 1)
    for reader, slots in input_slots(sg, m.members, [m.tensors[n] for n in NAMES], names=NAMES,
                                     reads=m.reads).items():
        result.insert_inputs(reader, slots)
    result.insert_outputs("mul", [0])
    scoped = scope_candidate(index, result, pass_name="P", order=0)
    match = PatternMatcher(GraphView(index)).match_pattern(OpPattern("step", STEP), index.index["cell/mul"])
    graphed = graph_candidate(match, FusedOp("Cell", inputs=list(NAMES), attrs={"T": 1}), pass_name="G", order=0)
    for candidate in (scoped, graphed):
        assert isinstance(candidate, FusionCandidate)
        assert candidate.inputs == {0: (index.index["x"], 0), 1: (s, 0), 2: (s, 0)}
        plan = make_plan(index, candidate, fused_ops={"Cell": CELL}, graph_outputs={})
        assert plan.inputs == [(index.index["x"], 0), (s, 0), (s, 0)]
        assert sorted(index.names[i] for i in plan.removed) == ["cell/mul", "cell/sum"]
