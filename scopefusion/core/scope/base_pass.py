"""The base class every scope pass derives from."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar, Sequence

from .patterns import PatternSet
from .results import FusionScopesResult, ScopesResult

if TYPE_CHECKING:  # pragma: no cover
    from .scope_graph import Scope, ScopeGraph


class ScopeBasePass(ABC):
    """A scope fusion pass.

    Subclasses set ``name`` (the registry name; the class name if empty),
    ``general`` (on by default and cannot be switched off) and ``description``
    (one line shown by ``scopefusion list``), and implement:

    * :meth:`define_patterns`: pattern sets, each a list of batches of patterns;
    * :meth:`generate_fusion_result`: fill in the fused op for one result.

    :meth:`last_match_scopes_and_ops` groups matched scopes into results; the
    default makes one result per matched scope.
    """

    name: ClassVar[str] = ""
    engine: ClassVar[str] = "scope"
    general: ClassVar[bool] = True
    description: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):
            cls.name = cls.__name__

    @abstractmethod
    def define_patterns(self) -> list[PatternSet]:
        """Pattern sets; each is an ordered list of batches of patterns."""

    def last_match_scopes_and_ops(self, scope_graph: "ScopeGraph") -> list[ScopesResult]:
        """Group this pass's matched scopes (plus optional extra nodes) into results."""
        return [ScopesResult([scope]) for scope in self.matched_scopes(scope_graph)]

    @abstractmethod
    def generate_fusion_result(self, scopes: Sequence["Scope"], result: FusionScopesResult) -> None:
        """Describe the fused op for ``scopes`` in ``result``, or ``result.reject(reason)``."""

    # -- helpers -----------------------------------------------------------------
    def matched_scopes(self, scope_graph: "ScopeGraph") -> list["Scope"]:
        """The scopes this pass's last batches matched."""
        return list(scope_graph.matches.get(self.name, []))

    def result_name(self, scopes: Sequence["Scope"]) -> str:
        """Default name of a fused node: the first scope's full name."""
        return scopes[0].name if scopes else self.name
