"""A registered pass of either engine: its class and where it came from."""
from __future__ import annotations

import re
from typing import Any

#: The engines a pass class can belong to (its class attribute ``engine``).
ENGINES = ("scope", "graph")
_SCOPE_NAME = re.compile(r"Scope(\w+)Pass")


def reference_alias(name: str, engine: str) -> str | None:
    """The reference's name for a scope pass named by this project's scheme:
    ``ScopeDecodeBboxV2Pass`` -> ``DecodeBboxV2ScopeFusionPass``; None for other names."""
    match = _SCOPE_NAME.fullmatch(name)
    return f"{match.group(1)}ScopeFusionPass" if engine == "scope" and match else None


class PassSpec:
    """A registered pass: its class, its origin (``built-in`` or a plugin's distribution and
    version) and what it replaced.  The class says which engine runs it (``engine``)."""

    __slots__ = ("cls", "origin", "replaces")
    cls: Any  # a ScopeBasePass or PatternFusionBasePass subclass (the engines sit above this module)

    def __init__(self, cls: Any, origin: str = "built-in", replaces: str | None = None) -> None:
        if not isinstance(cls, type) or getattr(cls, "engine", None) not in ENGINES:
            raise TypeError(f"{cls!r} is not a pass class (a ScopeBasePass or PatternFusionBasePass subclass)")
        self.cls = cls
        self.origin = origin
        self.replaces = replaces

    @property
    def name(self) -> str:
        return str(self.cls.name)

    @property
    def engine(self) -> str:
        return str(self.cls.engine)

    @property
    def aliases(self) -> tuple[str, ...]:
        """Other names the pass answers to wherever a pass is named: the class's ``aliases``
        and, for a scope pass named ``Scope<X>Pass``, the reference's ``<X>ScopeFusionPass``."""
        names = [str(a) for a in getattr(self.cls, "aliases", ())]
        alias = reference_alias(self.name, self.engine)
        if alias is not None:
            names.append(alias)
        return tuple(dict.fromkeys(n for n in names if n != self.name))

    @property
    def general(self) -> bool:
        """Scope passes: on by default; graph passes are always registered as general
        (the switch file turns them off)."""
        return bool(getattr(self.cls, "general", True))

    @property
    def fusion_type(self) -> str:
        """Graph passes: the switch-file section (``GraphFusion`` or ``UBFusion``)."""
        return str(getattr(self.cls, "fusion_type", ""))

    @property
    def default_on(self) -> bool:
        """Graph passes: whether the pass runs when the switch file names neither it nor ``ALL``."""
        return bool(getattr(self.cls, "default_on", True))

    @property
    def forbidden_close(self) -> bool:
        return bool(getattr(self.cls, "forbidden_close", False))

    @property
    def description(self) -> str:
        doc = (self.cls.__doc__ or "").strip().splitlines()
        return str(self.cls.description or (doc[0] if doc else ""))

    def __repr__(self) -> str:
        return f"PassSpec({self.name!r}, engine={self.engine!r}, origin={self.origin!r})"
