"""A small graph as inline SVG: boxes laid out by :mod:`scopefusion.report.html.layout`, edges as
curves with arrow heads, each box showing the op type and the node's last name component
(the full name as its tooltip).  No fonts, scripts or images are referenced."""
from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from .layout import NODE_HEIGHT, NODE_WIDTH, Layout, layout

#: Characters of a name shown in a box (the full name is the tooltip).
LABEL_CHARS = 24
#: Roles a node can have in a drawing, styled by the page's CSS (``.n-<role>``).
ROLES = ("member", "fused", "outside", "place", "failing")


@dataclass
class DrawNode:
    name: str
    op: str
    role: str = "member"


@dataclass
class Drawing:
    """A graph to draw: nodes (roles decide the colours) and edges (producer, consumer)."""

    title: str
    nodes: list[DrawNode] = field(default_factory=list)
    edges: list[tuple[str, str]] = field(default_factory=list)
    #: what was left out, e.g. "40 of 52 nodes shown"
    notes: list[str] = field(default_factory=list)

    def add(self, name: str, op: str, role: str) -> None:
        if all(n.name != name for n in self.nodes):
            self.nodes.append(DrawNode(name, op, role))

    def connect(self, producer: str, consumer: str) -> None:
        if (producer, consumer) not in self.edges:
            self.edges.append((producer, consumer))


def short(text: str, limit: int = LABEL_CHARS) -> str:
    """``text`` cut to ``limit`` characters from the left, marked with an ellipsis."""
    return text if len(text) <= limit else "\u2026" + text[-(limit - 1):]


def _box(node: DrawNode, x: float, y: float) -> str:
    last = "/".join(node.name.rsplit("/", 2)[-2:])  # two name components tell apart most neighbours
    cx = x + NODE_WIDTH / 2
    return (f'<g class="n n-{node.role}" data-name="{escape(node.name)}"><title>{escape(node.name)} '
            f'({escape(node.op)})</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{NODE_WIDTH}" height="{NODE_HEIGHT}" rx="5"/>'
            f'<text x="{cx:.1f}" y="{y + 15:.1f}" class="op">{escape(short(node.op))}</text>'
            f'<text x="{cx:.1f}" y="{y + 30:.1f}" class="nm">{escape(short(last))}</text></g>')


def _edge(lay: Layout, producer: str, consumer: str, arrow: str) -> str:
    (x1, y1), (x2, y2) = lay.boxes[producer].bottom, lay.boxes[consumer].top
    if y2 <= y1:  # an edge the layout could not point downward (a cycle): go round the side
        x = max(x1, x2) + NODE_WIDTH / 2 + 8
        path = f"M{x1:.1f},{y1:.1f} C{x:.1f},{y1 + 30:.1f} {x:.1f},{y2 - 30:.1f} {x2:.1f},{y2 - 2:.1f}"
    else:
        bend = (y2 - y1) / 2
        path = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + bend:.1f} {x2:.1f},{y2 - bend:.1f} {x2:.1f},{y2 - 2:.1f}"
    return f'<path class="e" d="{path}" marker-end="url(#{arrow})"/>'


def svg(drawing: Drawing, ident: str) -> str:
    """The drawing as one ``<svg>`` element, sized to its layout (scaled down by CSS when wide);
    ``ident`` makes its arrow head's id unique in the page."""
    names = [n.name for n in drawing.nodes]
    edges = [(a, b) for a, b in drawing.edges if a in names and b in names and a != b]
    lay = layout(names, edges)
    arrow = f"arrow-{ident}"
    parts = [f'<svg class="graph" role="img" '
             f'aria-label="{escape(drawing.title)}" viewBox="0 0 {lay.width:.0f} {lay.height:.0f}" '
             f'width="{lay.width:.0f}" height="{lay.height:.0f}">',
             f'<defs><marker id="{arrow}" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
             'orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" class="ah"/></marker></defs>']
    parts += [_edge(lay, a, b, arrow) for a, b in edges]
    parts += [_box(n, lay.boxes[n.name].x, lay.boxes[n.name].y) for n in drawing.nodes]
    parts.append("</svg>")
    return "".join(parts)
