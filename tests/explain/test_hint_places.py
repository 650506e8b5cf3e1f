"""The hints' lookup of fused places: kept for the asked places only, it answers every asked
lookup as the full table does (which record is at, around or inside a place, first added wins)."""
from __future__ import annotations

import itertools

from scopefusion.core.fusion.report import FusedRecord
from scopefusion.explain.hints import _Places, _prefixes

RECORDS = [
    ("A", FusedRecord("enc/l0/ln/LayerNorm", "LayerNorm", ["enc/l0/ln"], 9, 0)),
    ("B", FusedRecord("enc/l0/dense/MatMulBiasAdd", "MatMulBiasAdd", ["enc/l0/dense/BiasAdd"], 2, 0)),
    ("A", FusedRecord("enc/l1/ln/LayerNorm", "LayerNorm", ["enc/l1/ln"], 9, 0)),
    ("C", FusedRecord("enc/l1/ln/inner", "Gelu", ["enc/l1/ln/x", "enc/l1/ln"], 4, 0)),
    ("B", FusedRecord("/lead", "Gelu", ["trail/", "a//b"], 1, 0)),
]
PLACES = ["enc", "enc/l0", "enc/l0/ln", "enc/l1/ln", "enc/l1/ln/x", "enc/l1/ln/x/y", "enc/l0/dense",
          "enc/l0/dense/BiasAdd", "other", "", "/lead", "trail", "trail/", "a", "a/", "a//b/c"]


def _table(asked):
    places = _Places(asked)
    for pass_name, record in RECORDS:
        places.add(pass_name, record)
    return places


def test_prefixes_longest_first():
    assert list(_prefixes("a/b/c")) == ["a/b", "a"]
    assert list(_prefixes("a//b")) == ["a/", "a"]
    assert list(_prefixes("/x")) == [""]
    assert list(_prefixes("x/")) == ["x"]
    assert list(_prefixes("x")) == []


def test_asked_places_are_answered_as_by_the_full_table():
    """Few places asked are each compared with every added place; many are looked up among the
    added places' prefixes: both answer as the full table does."""
    full = _table(None)
    few = [c for size in (1, 2, 3) for c in itertools.combinations(PLACES, size)]
    many = [tuple(PLACES[k:k + size]) for size in (9, 12) for k in range(0, len(PLACES) - size + 1, 2)]
    for asked in [*few, *many, tuple(PLACES)]:
        kept = _table(set(asked))
        for place, other_than in itertools.product(asked, ["A", "B", "C", "D"]):
            assert kept.find(place, other_than) == full.find(place, other_than), (asked, place, other_than)


def test_the_full_table_finds_around_and_inside():
    full = _table(None)
    assert full.find("enc/l0/ln/x", "B")[:1] == ("A",) and full.find("enc/l0/ln/x", "B")[2] is False
    assert full.find("enc/l1", "D")[2] is True  # a record inside it
    assert full.find("other", "D") is None
