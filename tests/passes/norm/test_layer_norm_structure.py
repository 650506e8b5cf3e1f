"""ScopeLayerNormPass analyses each distinct layer-norm structure once: scopes described alike
share the first one's analysis, with their own names (``layer_norm/structure.py``).

What must hold: every layer norm is fused exactly as when each is analysed on its own (same
fused graph, byte for byte), per-instance values (epsilon, the axes, a missing beta) are never
taken from another instance, and alike scopes are analysed only once.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.models import norm_models as nm
from tests.helpers.pass_checks import REGISTRY, pass_report
from tests.helpers.verify import assert_verifies

import scopefusion
from scopefusion.builtin_passes.scope import layer_norm as ln_pass
from scopefusion.builtin_passes.scope.layer_norm.node_keys import AttributeKeys, attributes_key
from scopefusion.builtin_passes.scope.layer_norm.structure import AnalysisCache, _Description
from scopefusion.core.graph.vocabulary import CONTROL
from scopefusion.core.scope.scope_graph import ScopeGraph

H = nm.HIDDEN
#: tf_keras' two layer-norm paths: epsilon below 1.001e-5 computes moments, above it uses
#: the reshape + FusedBatchNormV3 trick.
EPSILONS = {
    "moments": [1e-6, 1e-6, 1e-7, 1e-6, 3e-6, 1e-6],
    "fused_batch_norm": [1e-3, 1e-3, 2e-3, 1e-3, 1e-2, 1e-3],
}


def chain(path: str, centered: tuple[bool, ...] = ()) -> nm.NormModel:
    """``y = tanh(ln_k(y))`` through six tf_keras LayerNormalization layers of one structure,
    some with another epsilon, and a rank-2 one at the end (its axis constant differs)."""
    import tensorflow as tf
    import tf_keras

    epsilons = EPSILONS[path]
    centered = centered or (True,) * len(epsilons)
    rng = np.random.default_rng(3)
    layers = []
    for k, (epsilon, center) in enumerate(zip(epsilons, centered, strict=True)):
        layer = tf_keras.layers.LayerNormalization(epsilon=epsilon, center=center, name=f"ln{k}")
        layer.build((2, 5, H))
        layer.set_weights([rng.uniform(0.5, 1.5, w.shape).astype(np.float32) for w in layer.get_weights()])
        layers.append(layer)
    last = tf_keras.layers.LayerNormalization(epsilon=epsilons[0], name="ln_flat")
    last.build((10, H))

    def fn(x):
        y = x
        for layer in layers:
            y = tf.tanh(layer(y))
        return last(tf.reshape(y, [10, H]))

    return nm.traced(f"chain[{path}]", fn, {"x": nm.spec([2, 5, H])}, layer_norms=len(epsilons) + 1)


@functools.cache
def built(path: str, centered: tuple[bool, ...] = ()) -> nm.NormModel:
    return chain(path, centered)


def fuse(m: nm.NormModel):
    return scopefusion.fuse(m.graph_def, registry=REGISTRY)


def layer_norm_attrs(graph_def) -> dict[str, tuple[float, int]]:
    return {n.name: (round(n.attr["epsilon"].f, 9), n.attr["begin_norm_axis"].i)
            for n in graph_def.node if n.op == "LayerNorm"}


@pytest.fixture
def analyses(monkeypatch):
    """Counts the layer-norm analyses that really run."""
    calls = []
    real = ln_pass.analyse

    def counted(scope):
        calls.append(scope.name)
        return real(scope)

    monkeypatch.setattr(ln_pass, "analyse", counted)
    return calls


@pytest.mark.parametrize("path", sorted(EPSILONS))
def test_alike_scopes_are_analysed_once_and_fused_with_their_own_values(path, analyses):
    m = built(path)
    result = fuse(m)
    attrs = layer_norm_attrs(result.fused_graph_def)
    assert len(attrs) == 7, pass_report(result, "ScopeLayerNormPass").refused
    expected = {f"ln{k}": (round(e, 9), 2) for k, e in enumerate(EPSILONS[path])}
    expected["ln_flat"] = (round(EPSILONS[path][0], 9), 1)  # rank 2: its own axis constant
    assert attrs == expected
    # ln3 and ln5 are ln1 again (the same epsilon, reading a Tanh): recalled, not analysed
    assert "ln3" not in analyses and "ln5" not in analyses and "ln1" in analyses, analyses
    assert_verifies(m, result)


@pytest.mark.parametrize("path", sorted(EPSILONS))
def test_the_remembered_analysis_gives_the_same_graph_as_analysing_each_scope(path, monkeypatch):
    m = built(path)
    remembered = fuse(m).fused_graph_def.SerializeToString(deterministic=True)
    monkeypatch.setattr(AnalysisCache, "analyse", lambda self, scope, analyse: analyse(scope))
    alone = fuse(m).fused_graph_def.SerializeToString(deterministic=True)
    assert remembered == alone


@pytest.mark.parametrize("path", sorted(EPSILONS))
def test_an_alike_scope_without_beta_is_refused_not_recalled(path):
    centered = (True, True, False, True, True, True)
    m = built(path, centered)
    result = fuse(m)
    report = pass_report(result, "ScopeLayerNormPass")
    assert len(report.fused) == 6
    assert len(report.refused) == 1 and "ln2" in report.refused[0].name, report.refused
    assert "no beta (center=False)" in report.refused[0].reason
    assert_verifies(m, result)


def test_an_alike_scope_reducing_other_axes_is_analysed_on_its_own(analyses):
    """ln3 is ln1 again but for the values of its two axis constants: not recalled, refused."""
    m = built("moments")
    graph_def = type(m.graph_def)()
    graph_def.CopyFrom(m.graph_def)
    for node in graph_def.node:
        if node.name in ("ln3/moments/mean/reduction_indices", "ln3/moments/variance/reduction_indices"):
            assert list(node.attr["value"].tensor.int_val) == [2]
            node.attr["value"].tensor.int_val[:] = [1]
    result = scopefusion.fuse(graph_def, registry=REGISTRY)
    report = pass_report(result, "ScopeLayerNormPass")
    assert "ln3" in analyses and "ln5" not in analyses, analyses
    assert [r.name for r in report.refused] == ["ln3"], report.refused
    assert "reduction axes [1]" in report.refused[0].reason
    assert len(report.fused) == 6


def _copy(node, name: str, inputs: list[str]):
    copy = type(node)()
    copy.CopyFrom(node)
    copy.name = name
    copy.ClearField("input")
    copy.input.extend(inputs)
    return copy


def _variants(node):
    """Copies of a real node that the bytes behind :class:`AttributeKeys` must tell apart or
    not: ``renamed`` differ in name, inputs and device only (a name of 300 bytes takes two
    bytes for its length; 42 is the attribute field's own tag), ``others`` in a colocation list
    or debug info too (left out of the key, but not of the bytes); ``changed`` has one
    attribute more (in the key)."""
    renamed = [_copy(node, "n" * 42, ["a" * 42]), _copy(node, "m" * 300, ["x", "y:1", "^z"])]
    renamed[0].device = "/device:CPU:0"
    others = [_copy(node, "k", []), _copy(node, "j", ["x"])]
    others[0].attr["_class"].list.s.append(b"loc:@" + node.name.encode())
    others[1].experimental_debug_info.original_node_names.append(node.name)
    changed = _copy(node, node.name, list(node.input))
    changed.attr["_changed"].i = 1
    return renamed, others, changed


def test_attribute_keys_are_the_keys_built_node_by_node():
    graph_def = built("fused_batch_norm").graph_def
    originals = list(graph_def.node)
    variants = [_variants(node) for node in originals]
    renamed = [copy for copies, _, _ in variants for copy in copies]
    others = [copy for _, copies, _ in variants for copy in copies] + [changed for _, _, changed in variants]
    nodes = originals + renamed + others
    keys = AttributeKeys(nodes)
    for i, node in enumerate(nodes):
        assert keys.of(i) == attributes_key(node), node.name
        if i == len(originals) - 1:
            assert keys.built < len(originals)  # alike nodes share one key, built once
            after_originals = keys.built
        if i == len(originals) + len(renamed) - 1:
            assert keys.built == after_originals  # named otherwise, reading other inputs: looked up
    for node, (renamed, others, changed) in zip(originals, variants, strict=True):
        assert all(attributes_key(copy) == attributes_key(node) for copy in renamed + others), node.name
        assert attributes_key(changed) != attributes_key(node), node.name


def _wiring_read_off(wiring: tuple[int, ...], members: int) -> list[list[tuple]]:
    """The flat inputs of a description, read back per member: ("in", position, port) or ("out", k)."""
    out, pos = [], 0
    for _ in range(members):
        count, pos = wiring[pos], pos + 1
        refs = []
        for _ in range(count):
            value, pos = wiring[pos], pos + 1
            if value >= 0:
                refs.append(("in", value, wiring[pos]))
                pos += 1
            else:
                refs.append(("out", -1 - value))
        out.append(refs)
    assert pos == len(wiring)
    return out


def _wiring_node_by_node(index, members: list[int]) -> tuple[list[list[tuple]], list, list[tuple[int, int]]]:
    """Every member's inputs, its ports read outside and whether anything reads it, looked up
    edge by edge, and the tensors from outside in order of first read."""
    position = {i: k for k, i in enumerate(members)}
    outside: list[tuple[int, int]] = []
    refs = []
    for i in members:
        row = []
        for j, port in index.inputs[i]:
            if j in position:
                row.append(("in", position[j], port))
            else:
                if (j, port) not in outside:
                    outside.append((j, port))
                row.append(("out", outside.index((j, port))))
        refs.append(row)
    reads = []
    for i in members:
        ports = sorted({p for c, p, _ in index.consumers[i] if c not in position and p != CONTROL})
        reads.append(tuple(ports) if ports else int(bool(index.consumers[i])))
    return refs, reads, outside


def test_the_wiring_is_the_one_looked_up_edge_by_edge():
    """On real layer norms, and on scopes whose members are read outside (the model's scope,
    the layers' sub-scopes), by data and by control, or by nothing."""
    graph_def = type(built("moments").graph_def)()
    graph_def.CopyFrom(built("moments").graph_def)
    reader = graph_def.node.add(name="reads_by_control", op="NoOp")
    reader.input.extend(["^ln2/moments/mean", "^ln2/batchnorm/add_1"])
    sg = ScopeGraph(graph_def)
    attributes = AttributeKeys(sg.index.nodes)
    checked = {"outside reads": 0, "control only": 0, "unread": 0}
    for scope in [sg.root, *sg.root.all_sub_scopes()]:
        described = _Description(scope, attributes)
        wiring, reads = described._wiring(sg.index)
        refs, expected_reads, outside = _wiring_node_by_node(sg.index, described.members)
        assert _wiring_read_off(wiring, len(described.members)) == refs, scope.name
        assert list(reads) == expected_reads, scope.name
        assert list(described.outside) == outside, scope.name
        for i, read in zip(described.members, reads, strict=True):
            cs = sg.index.consumers[i]
            checked["outside reads"] += isinstance(read, tuple)
            checked["unread"] += read == 0
            checked["control only"] += read == 1 and any(c not in described.position for c, _, _ in cs)
    assert all(checked.values()), checked


@pytest.mark.parametrize("path", sorted(EPSILONS))
def test_input_slots_kept_with_a_structure_are_each_alike_scopes_own(path, monkeypatch):
    """The inner reads of x, gamma and beta are found once per structure (ln3 and ln5 take
    ln1's), and they are the very reads each scope's own nodes make."""
    found, checked = [], []
    real_slots, real_insert = ln_pass._input_slots, ln_pass._insert_inputs

    def counted(scope, match):
        found.append(scope.name)
        return real_slots(scope, match)

    def compared(scope, match, result, facts):
        real_insert(scope, match, result, facts)
        expected = {suffix: list(slots) for suffix, slots in real_slots(scope, match)}
        assert result.input_map == expected and expected, scope.name
        checked.append(scope.name)

    monkeypatch.setattr(ln_pass, "_input_slots", counted)
    monkeypatch.setattr(ln_pass, "_insert_inputs", compared)
    result = fuse(built(path))
    assert len(pass_report(result, "ScopeLayerNormPass").fused) == 7
    assert len(checked) == 7 and {"ln1", "ln3", "ln5"} <= set(checked), checked
    assert "ln1" in found and "ln3" not in found and "ln5" not in found, found


def test_facts_are_shared_only_by_scopes_whose_match_is_recalled():
    """ln3 is ln1 again but for its axis constants: analysed on its own and refused, it shares
    no facts; ln5, recalled from ln1, shares ln1's; the rank-2 layer norm has its own."""
    graph_def = type(built("moments").graph_def)()
    graph_def.CopyFrom(built("moments").graph_def)
    for node in graph_def.node:
        if node.name in ("ln3/moments/mean/reduction_indices", "ln3/moments/variance/reduction_indices"):
            node.attr["value"].tensor.int_val[:] = [1]
    sg = ScopeGraph(graph_def)
    scopes = {s.name: s for s in sg.root.all_sub_scopes()}
    cache = AnalysisCache(sg)
    cache.analyse(scopes["ln1"], ln_pass.analyse)
    first = cache.facts
    assert first == {} and cache.analysed == 1
    first["marked"] = True
    with pytest.raises(scopefusion.Refused):
        cache.analyse(scopes["ln3"], ln_pass.analyse)
    assert cache.facts is None
    cache.analyse(scopes["ln5"], ln_pass.analyse)
    assert cache.facts is first and cache.recalled == 1
    cache.analyse(scopes["ln_flat"], ln_pass.analyse)
    assert cache.facts == {} and cache.facts is not first
