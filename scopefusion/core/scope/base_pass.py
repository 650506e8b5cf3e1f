"""The base class every scope pass derives from."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, AbstractSet, ClassVar, Sequence

from .patterns import PatternSet, pattern_sets_may_match
from .results import FusionScopesResult, ScopesResult

if TYPE_CHECKING:  # pragma: no cover
    from .scope_graph import Scope, ScopeGraph


class ScopeBasePass(ABC):
    """A scope fusion pass.

    Subclasses set ``name`` (the registry name; the class name if empty),
    ``general`` (on by default and cannot be switched off) and ``description``
    (one line shown by ``scopefusion list``), and implement:

    * :meth:`define_patterns`: pattern sets, each a list of batches of patterns;
    * :meth:`generate_fusion_result`: fill in the fused op for one result, or refuse it with
      ``fail(reason, *nodes)`` (raises ``Refused``), there or in any check it calls.

    :meth:`last_match_scopes_and_ops` groups matched scopes into results; the
    default makes one result per matched scope.  :meth:`may_fuse` says whether
    the pass can fuse anything in a graph, from the op types the graph holds.
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
        """Describe the fused op for ``scopes`` in ``result``; ``fail(reason, *nodes)`` refuses it."""

    def may_fuse(self, op_types: AbstractSet[str]) -> bool:
        """Whether the pass can fuse anything in a graph whose nodes (function bodies included)
        have only ``op_types``; a run skips a pass it only tries for hints when it cannot.

        The default holds for a pass whose results are its matched scopes (it keeps
        :meth:`last_match_scopes_and_ops`): false only when no pattern set can match at all (a
        batch none of whose patterns finds the op types it requires).  A pass that groups other
        scopes too is always tried, unless it overrides this method.
        """
        if type(self).last_match_scopes_and_ops is not ScopeBasePass.last_match_scopes_and_ops:
            return True
        return self.patterns_may_match(op_types)

    def patterns_may_match(self, op_types: AbstractSet[str]) -> bool:
        """Whether some pattern set of this pass can match in a graph of ``op_types`` (every batch
        has a pattern whose required op types occur).  A pass whose results are only its matched
        scopes, however it groups them, can return this from :meth:`may_fuse`."""
        return pattern_sets_may_match(self.define_patterns(), op_types)

    # -- helpers -----------------------------------------------------------------
    def matched_scopes(self, scope_graph: "ScopeGraph") -> list["Scope"]:
        """The scopes this pass's last batches matched."""
        return list(scope_graph.matches.get(self.name, []))

    def result_name(self, scopes: Sequence["Scope"]) -> str:
        """Default name of a fused node: the first scope's full name."""
        return scopes[0].name if scopes else self.name
