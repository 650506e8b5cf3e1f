"""The run as one self-contained HTML page: the page (:mod:`.report`), its frame (:mod:`.page`), the
drawings of fused and refused subgraphs (:mod:`.drawings`, :mod:`.svg`) and their layout (:mod:`.layout`)."""
from __future__ import annotations

from .report import html_report

__all__ = ["html_report"]
