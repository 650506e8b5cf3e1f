"""The error of the partitioner: one line naming the culprit and what is allowed."""
from __future__ import annotations

import difflib
from typing import Sequence

from ..errors import OptionError

_MAX_SCANNED = 20000


class PartitionError(OptionError):
    """A supported-ops table, an ``in_out_pair`` or a graph the partitioner cannot place."""


def close_names(name: str, names: Sequence[str], limit: int = 3) -> list[str]:
    """Up to ``limit`` node names close to ``name``: names it begins (a cut-off name), else
    names of the same scope with a similar last part, else similar names under the same
    top-level scope (or of the whole graph, when it is small)."""
    longer = sorted(n for n in names if n.startswith(name))
    if longer:
        return longer[:limit]
    scope, _, leaf = name.rpartition("/")
    if scope:
        siblings = {n.rpartition("/")[2]: n for n in names if n.rpartition("/")[0] == scope}
        close = difflib.get_close_matches(leaf, list(siblings)[:_MAX_SCANNED], n=limit, cutoff=0.6)
        if close:
            return [siblings[c] for c in close]
    first = name.partition("/")[0]
    pool = [n for n in names if n.partition("/")[0] == first]
    if not pool and len(names) <= _MAX_SCANNED:
        pool = list(names)
    return difflib.get_close_matches(name, pool[:_MAX_SCANNED], n=limit, cutoff=0.6)
