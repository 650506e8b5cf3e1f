"""The one way to refuse a match: raise :class:`Refused`, most simply through :func:`fail`.

Any check may raise it, however deep: a graph pass's ``fusion()`` and whatever it calls, a
scope pass's ``generate_fusion_result()`` and its analyses, and the engines' own checks of the
candidates the passes propose.  The engines catch it and report the match as refused with the
reason, which is shown as it is given, and the nodes it names.
"""
from __future__ import annotations

import warnings
from typing import NoReturn, Protocol, Union


class _Named(Protocol):
    name: str


#: A node a refusal names: its name, or a ``NodeDef`` (anything with a ``name``).
NodeRef = Union[str, _Named]


class Refused(Exception):
    """A match (or candidate) that is not fused.

    ``reason`` is the text the report shows, in the user's terms; ``nodes`` the names of the
    nodes it is about (none when the reason concerns the match as a whole).  ``kind`` is free
    for the pass that raises it, to tell its own refusals apart where it reacts to them
    differently; the engines do not read it.
    """

    def __init__(self, reason: str, *nodes: NodeRef, kind: str = "") -> None:
        if not isinstance(reason, str):
            raise TypeError(f"a refusal's reason is a str, not {type(reason).__name__} ({reason!r})")
        super().__init__(reason)
        self.reason = reason
        self.nodes: tuple[str, ...] = tuple(_node_name(n) for n in nodes)
        self.kind = kind


def fail(reason: str, *nodes: NodeRef, kind: str = "") -> NoReturn:
    """Refuse the match: raise :class:`Refused` with ``reason`` and the ``nodes`` it names."""
    raise Refused(reason, *nodes, kind=kind)


def _node_name(node: NodeRef) -> str:
    name = node if isinstance(node, str) else getattr(node, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"a refusal names nodes by name or NodeDef, not {type(node).__name__} ({node!r})")
    return name


def warn_older_spelling(pass_name: str, spelling: str) -> None:
    """Say (once per pass and run, as a :class:`DeprecationWarning`) that a pass refused a match
    the older way (``NotFused``, ``result.reject``), which still works."""
    warnings.warn(f"pass {pass_name} refuses a match through {spelling}, the older spelling: raise Refused "
                  "instead, most simply through scopefusion.fail(reason, *nodes)", DeprecationWarning, stacklevel=2)
