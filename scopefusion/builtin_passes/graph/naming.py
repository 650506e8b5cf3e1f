"""Names for the new nodes of an inner graph that stands for two nodes of a match."""
from __future__ import annotations


def common_scope(first: str, second: str, generic: tuple[str, str]) -> tuple[str | None, tuple[str, str]]:
    """The longest scope the node names ``first`` and ``second`` both lie in, and each name
    relative to it: the inner graph is then named after that scope and its two nodes keep
    the names of the nodes they stand for.  Without a common scope: no prefix (the fused op
    is named after its output) and the ``generic`` names."""
    a, b = first.split("/"), second.split("/")
    k = 0
    while k < min(len(a), len(b)) - 1 and a[k] == b[k]:
        k += 1
    if k == 0:
        return None, generic
    return "/".join(a[:k]), ("/".join(a[k:]), "/".join(b[k:]))
