"""``scopefusion run --html``: the run as one self-contained HTML page.

The page holds the summary (the passes, the op types whose counts changed, hints and
warnings), then per fused op the subgraph it replaced next to the fused node that took its
place, then per refusal, dropped result and near miss its reason and a drawing of the place
with the nodes the reason names highlighted.  Drawings are inline SVG laid out here
(:mod:`scopefusion.report.html.layout`); the styles and the one small script are inline too, so the
page needs no network and no other file.  The report must come from a run that kept places
(``fuse(..., keep_places=True)``).
"""
from __future__ import annotations

import re
from html import escape
from typing import TYPE_CHECKING, Iterator, Sequence

from . import drawings
from .page import PAGE_END, page_start
from .svg import Drawing, svg

if TYPE_CHECKING:  # pragma: no cover
    from ...core.fusion.report import FusionReport, PassReport, Refusal

#: Fused ops drawn, at most (in run order); the rest are counted.
FUSED_DRAWN = 50
#: Refusals, dropped results and near misses drawn, at most.
REFUSALS_DRAWN = 50


class _Link:
    """A table cell that links to a section of the page (a count, to the first item it counts)."""

    def __init__(self, text: object, anchor: str | None) -> None:
        self.text, self.anchor = str(text), anchor

    def html(self) -> str:
        return f'<a href="#{self.anchor}">{escape(self.text)}</a>' if self.anchor else escape(self.text)


def _cell(value: object) -> str:
    return value.html() if isinstance(value, _Link) else escape(str(value))


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]], numeric_from: int) -> str:
    head = "".join(f"<th{' class=num' if k >= numeric_from else ''}>{escape(h)}</th>" for k, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f"<td{' class=num' if k >= numeric_from else ''}>{_cell(v)}</td>"
                                    for k, v in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _kind(p: "PassReport") -> str:
    if p.engine == "graph":
        return p.fusion_type
    return "scope" if p.general else "scope (enabled)"


def _versions(report: "FusionReport") -> str:
    return ", ".join(f"{name} {version}" for name, version in report.versions.items()) or "versions not recorded"


def _anchors(ran: Sequence["PassReport"]) -> dict[tuple[str, str], str]:
    """``(pass, verdict) -> id`` of the first drawn item of that pass and verdict ("fused", "refused",
    "dropped", "near miss"), as :func:`fused_section` and :func:`problems_section` number them."""
    anchors: dict[tuple[str, str], str] = {}
    fused = [p.name for p in ran for _ in p.fused]
    for k, name in enumerate(fused[:FUSED_DRAWN]):
        anchors.setdefault((name, "fused"), f"fused-{k}")
    for k, (verdict, owner, _) in enumerate(list(_problems(ran))[:REFUSALS_DRAWN]):
        anchors.setdefault((owner.name, verdict), f"problem-{k}")
    return anchors


def _pass_row(p: "PassReport", anchors: dict[tuple[str, str], str]) -> tuple[object, ...]:
    def link(count: int, verdict: str) -> _Link:
        return _Link(count, anchors.get((p.name, verdict)) if count else None)

    return (p.name, _kind(p), p.candidates, p.matches, link(len(p.fused), "fused"), link(len(p.refused), "refused"),
            link(len(p.dropped), "dropped"), link(p.near_miss_count, "near miss"), f"{p.seconds:.3f}")


def summary(report: "FusionReport") -> str:
    """The totals, the pass table (each count a link to the first item it counts), the op-count
    changes, and the run's hints and warnings."""
    ran = [p for p in report.passes if p.ran]
    anchors = _anchors(ran)
    near = sum(p.near_miss_count for p in ran)
    refused = sum(len(p.refused) for p in ran)
    dropped = sum(len(p.dropped) for p in ran)
    parts = [f'<p class="totals">{report.nodes_before} &rarr; {report.nodes_after} nodes, '
             f"{len(report.fused)} fused op(s), {refused} refused, {dropped} dropped, {near} near miss(es)</p>",
             f'<p class="versions">{escape(_versions(report))}</p>',
             '<div class="tables"><div><h2>Passes</h2>',
             _table(("pass", "kind", "tested", "matched", "fused", "refused", "dropped", "near miss", "seconds"),
                    [_pass_row(p, anchors) for p in ran], 2), "</div>"]
    for title, changes in (("Op counts (types that changed)", report.op_count_changes()),
                           ("Op counts inside functions (types that changed)", report.function_op_count_changes())):
        if changes:
            parts += [f"<div><h2>{title}</h2>",
                      _table(("op type", "before", "after", "change"),
                             [(op, b, a, f"{a - b:+d}") for op, b, a in changes], 1), "</div>"]
    parts.append("</div>")
    off = [p.name for p in report.passes if not p.ran]
    if off:
        parts.append(f"<p>Switched off by the fusion switch file: {escape(', '.join(off))}</p>")
    parts += [f'<p class="error">{escape(p.error)}</p>' for p in ran if p.error]
    notes = [("hint", line) for line in report.hints] + [("warning", line) for line in report.warnings]
    if notes:
        parts.append("<ul class=notes>" + "".join(f"<li><b>{kind}:</b> {escape(text)}</li>" for kind, text in notes)
                     + "</ul>")
    return "\n".join(parts)


def _figure(caption: str, drawing: Drawing, ident: str) -> str:
    notes = "".join(f"<br><small>{escape(n)}</small>" for n in drawing.notes)
    if not drawing.nodes:
        return f"<figure><figcaption>{escape(caption)}</figcaption><p>(no place recorded)</p></figure>"
    return f"<figure><figcaption>{escape(caption)}{notes}</figcaption>{svg(drawing, ident)}</figure>"


def fused_section(passes: Sequence["PassReport"]) -> str:
    """Per fused op (the first :data:`FUSED_DRAWN`): what it replaced, and the fused node."""
    records = [(p, f) for p in passes for f in p.fused]
    parts = [f"<h2>Fused ops ({len(records)})</h2>"]
    if not records:
        parts.append("<p>Nothing was fused.</p>")
    for k, (p, f) in enumerate(records[:FUSED_DRAWN]):
        where = f" at {', '.join(f.scopes)}" if f.scopes and f.scopes != [f.name] else ""
        parts.append(
            f'<section class="item fused" id="fused-{k}"><h3>{escape(f.type)} <code>{escape(f.name)}</code></h3>'
            f"<p>by {escape(p.name)}{escape(where)}: replaced {f.removed_nodes} node(s)"
            f"{f', kept {f.kept_nodes} that feed it' if f.kept_nodes else ''}</p><div class=pair>"
            + _figure("before: the nodes it replaced (blue) and their neighbours (grey)", drawings.replaced(f),
                      f"f{k}b")
            + _figure("after: the fused node (green)", drawings.fused(f), f"f{k}a")
            + "</div></section>")
    if len(records) > FUSED_DRAWN:
        parts.append(f'<p class="more">... and {len(records) - FUSED_DRAWN} more fused ops, not drawn (the JSON '
                     "report, --report, lists them all)</p>")
    return "\n".join(parts)


def _problems(passes: Sequence["PassReport"]) -> Iterator[tuple[str, "PassReport", "Refusal"]]:
    for p in passes:
        yield from (("refused", p, r) for r in p.refused)
        yield from (("dropped", p, r) for r in p.dropped)
        yield from (("near miss", p, r) for r in p.near_misses)


def marked_reason(reason: str, names: set[str]) -> str:
    """The reason, escaped, with the quoted names of highlighted nodes marked."""
    def mark(m: re.Match[str]) -> str:
        text = escape(m.group(0))
        return f"<mark>{text}</mark>" if drawings.node_name(m.group(1)) in names else text

    out, last = [], 0
    for m in re.finditer(r"'([^']+)'", reason):
        out += [escape(reason[last:m.start()]), mark(m)]
        last = m.end()
    return "".join(out) + escape(reason[last:])


def problems_section(passes: Sequence["PassReport"]) -> str:
    """Per refusal, dropped result and near miss (the first :data:`REFUSALS_DRAWN`): the reason
    and the place, the nodes the reason names in red."""
    items = list(_problems(passes))
    listed = sum(len(p.refused) + len(p.dropped) + p.near_miss_count for p in passes)
    parts = [f"<h2>Refusals and near misses ({listed})</h2>"]
    if not items:
        parts.append("<p>None: every match was fused and no place missed a pattern by little.</p>")
    for k, (verdict, p, r) in enumerate(items[:REFUSALS_DRAWN]):
        marked = drawings.highlighted(r)
        reason = marked_reason(r.reason, marked) + (f"; kept {escape(r.winner)}" if r.winner else "")
        hint = f'<p class="hint"><b>hint:</b> {escape(r.hint)}</p>' if r.hint else ""
        caption = "the place (orange), the nodes its reason names (red)" if marked else "the place (orange)"
        parts.append(
            f'<section class="item {verdict.replace(" ", "-")}" id="problem-{k}"><h3>{verdict} '
            f"<code>{escape(r.name)}</code> ({escape(p.name)})</h3><p class=reason>{reason}</p>{hint}"
            + _figure(caption, drawings.place(r, f"{verdict} {r.name}"), f"p{k}") + "</section>")
    if listed > min(len(items), REFUSALS_DRAWN):
        parts.append(f'<p class="more">... and {listed - min(len(items), REFUSALS_DRAWN)} more, not drawn (the '
                     "JSON report, --report, holds every refusal and the first near misses of each pass)</p>")
    return "\n".join(parts)


def html_report(report: "FusionReport", title: str) -> str:
    """The whole page for ``report`` (from a run that kept places); ``title`` names the model."""
    ran = [p for p in report.passes if p.ran]
    return "\n".join([page_start(title), summary(report), fused_section(ran), problems_section(ran), PAGE_END])
