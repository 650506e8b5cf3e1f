"""The frame of the ``--html`` page: head, inline styles, the legend, and the one small
script (a click on a drawing shows it at full size; when the page has loaded, the script
counts the drawings onto ``<body data-drawings=N data-ready=yes>``, which tests read)."""
from __future__ import annotations

from html import escape

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1500px;
       padding: 12px 24px; color: #1f2328; background: #fff; }
h1 { font-size: 22px; margin: 8px 0; } h2 { font-size: 18px; margin: 26px 0 8px; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 15px; margin: 4px 0; } code { font: 13px ui-monospace, monospace; }
table { border-collapse: collapse; margin: 6px 0; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; }
th { background: #f6f8fa; text-align: left; } .num { text-align: right; font-variant-numeric: tabular-nums; }
.totals { font-size: 16px; } .error { color: #cf222e; } .more { font-style: italic; }
.item { border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 12px; margin: 12px 0; }
.item.refused, .item.dropped { border-left: 5px solid #cf222e; } .item.near-miss { border-left: 5px solid #d4a72c; }
.item.fused { border-left: 5px solid #1a7f37; }
.reason mark { background: #ffd7d5; padding: 0 2px; } .hint { color: #57606a; }
.pair { display: flex; gap: 16px; align-items: flex-start; overflow-x: auto; }
.pair > figure { flex: 0 1 auto; min-width: 240px; } .tables { display: flex; flex-wrap: wrap; gap: 0 40px; }
figure { margin: 4px 0; } figcaption { color: #57606a; font-size: 12px; margin-bottom: 4px; }
svg.graph { box-sizing: border-box; max-width: 100%; height: auto; cursor: zoom-in; background: #fcfcfd;
            border: 1px solid #eaeef2; }
svg.graph.full { max-width: none; cursor: zoom-out; } .pair figure { max-width: 100%; }
.n rect { stroke-width: 1.4; } .n text { text-anchor: middle; font: 11px ui-monospace, monospace; }
.n text.op { font-weight: bold; font-family: system-ui, sans-serif; }
.n-member rect { fill: #ddf4ff; stroke: #0969da; } .n-fused rect { fill: #dafbe1; stroke: #1a7f37; stroke-width: 2.4; }
.n-outside rect { fill: #f6f8fa; stroke: #8c959f; stroke-dasharray: 4 3; } .n-outside text { fill: #57606a; }
.n-place rect { fill: #fff1e5; stroke: #bc4c00; } .n-failing rect { fill: #ffd7d5; stroke: #cf222e; stroke-width: 2.6; }
.e { fill: none; stroke: #6e7781; stroke-width: 1.2; } .ah { fill: #6e7781; }
.legend span { display: inline-block; padding: 1px 8px; margin-right: 8px; border-radius: 4px; border: 1px solid; }
"""

LEGEND = ('<p class="legend">'
          '<span style="background:#ddf4ff;border-color:#0969da">replaced node</span>'
          '<span style="background:#dafbe1;border-color:#1a7f37">fused node</span>'
          '<span style="background:#f6f8fa;border-color:#8c959f;border-style:dashed">outside node</span>'
          '<span style="background:#fff1e5;border-color:#bc4c00">refused or missed place</span>'
          '<span style="background:#ffd7d5;border-color:#cf222e">named by the reason</span>'
          " Hover a box for its full name; click a drawing to see it at full size.</p>")

SCRIPT = """<script>
document.querySelectorAll("svg.graph").forEach(function (g) {
  g.addEventListener("click", function () { g.classList.toggle("full"); });
});
document.body.dataset.drawings = String(document.querySelectorAll("svg.graph").length);
document.body.dataset.ready = "yes";
</script>"""

PAGE_END = SCRIPT + "\n</body>\n</html>\n"


def page_start(title: str) -> str:
    """Everything up to the summary: head, styles, heading and legend."""
    return ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>scopefusion run: {escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            f"<h1>scopefusion run: <code>{escape(title)}</code></h1>\n{LEGEND}")
