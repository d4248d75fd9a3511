"""The self-contained page of `loopproof show --html`: the spend against the budget over the ledger
prefix, the attempts by node on the same axis, and every attempt's detail.

Why drawn here as SVG, with no script library and no link: the page must open anywhere, offline,
years later, and show the same thing (a ledger is evidence). Every text from the ledger is
escaped; nothing is fetched. One short inline script measures what the browser drew (the curve's
length, the attempts' boxes) into `data-drawn` on the root element, so a test in a headless
browser can check that the page drew, not just that it parsed.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

from loopproof.engine.record.timeline import Attempt, Timeline, num, worker_end
from loopproof.engine.record.timeline_words import (
    excerpt,
    gate_line,
    gate_notes,
    gate_words,
    outcome_words,
    stream_text,
)
from loopproof.model.bounds import GLOSS

WIDTH, LEFT, RIGHT = 960, 64, 16  # px; the two charts share the x axis (ledger record)
CURVE_H, ROW_H, TOP, BOTTOM = 260, 26, 16, 40
COLOURS = {"accept": "#2e7d32", "reject": "#c62828", "error": "#ef6c00", "overrun": "#6a1b9a",
           "abandoned": "#757575", "open": "#00838f"}

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1000px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 6px}
.muted{color:#666} .outcome{font-weight:600}
svg text{font:11px system-ui,sans-serif;fill:#333}
table{border-collapse:collapse;width:100%} td,th{border-bottom:1px solid #ddd;padding:3px 6px;
text-align:left;vertical-align:top} pre{background:#f6f6f6;padding:6px;white-space:pre-wrap;
margin:4px 0;font-size:12px}
.tag{display:inline-block;padding:0 6px;border-radius:3px;color:#fff;font-size:12px}
"""

MEASURE = """
(function(){var d={};
var c=document.querySelectorAll('svg.curve polyline');d.lines=c.length;
d.length=Array.prototype.map.call(c,function(p){return Math.round(p.getTotalLength());});
d.points=Array.prototype.map.call(c,function(p){return p.points.numberOfItems;});
var a=document.querySelectorAll('svg.attempts rect.attempt');d.attempts=a.length;
d.boxes=Array.prototype.filter.call(a,function(r){var b=r.getBBox();return b.width>0&&b.height>0;}).length;
document.documentElement.setAttribute('data-drawn',JSON.stringify(d));})();
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


class _Scale:
    """Ledger record -> x pixel, and a value -> y pixel inside a chart of height `h`."""

    def __init__(self, records: int, top: float, h: float) -> None:
        self.n = max(records, 1)  # record i spans [i, i + 1): the last one is seen too
        self.top, self.h = top, h

    def x(self, seq: float) -> float:
        return round(LEFT + (WIDTH - LEFT - RIGHT) * seq / self.n, 1)

    def y(self, v: float) -> float:
        return round(TOP + self.h * (1 - v / self.top), 1) if self.top else TOP + self.h


def _ticks(top: float, n: int = 5, *, whole: bool = False) -> list[float]:
    """About `n` round tick values from 0 to `top` (steps of 1, 2, 2.5 or 5 times a power of
    ten; whole numbers only with `whole`)."""
    if top <= 0:
        return [0.0]
    raw = top / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    if whole:
        step = max(1.0, float(math.ceil(step)))
    return [round(i * step, 10) for i in range(int(top / step + 1e-9) + 1)]


def _step_points(sx: _Scale, pts: list[tuple[int, float]], last: int) -> str:
    """A step line: a value holds from its record to the next change."""
    out: list[str] = []
    prev = None
    for seq, v in pts:
        if prev is not None:
            out.append(f"{sx.x(seq)},{sx.y(prev)}")
        out.append(f"{sx.x(seq)},{sx.y(v)}")
        prev = v
    if prev is not None:
        out.append(f"{sx.x(last)},{sx.y(prev)}")
    return " ".join(out)


def curve_svg(t: Timeline) -> str:
    d = t.as_json()
    budget = d["graph"]["spend_budget"]
    w_c = d["bounds"]["W_c"]
    last = max(t.check.records, 1)
    peak = max([budget] + [c[2] for c in t.curve])
    show_wc = isinstance(w_c, int | float) and w_c <= 3 * max(peak, 1e-9)
    top = max(peak, w_c if show_wc else 0) * 1.08 or 1.0
    sx = _Scale(t.check.records, top, CURVE_H)
    h = TOP + CURVE_H + BOTTOM
    parts = [f'<svg class="curve" width="{WIDTH}" height="{h}" viewBox="0 0 {WIDTH} {h}" '
             f'role="img" aria-label="spend against the budget over the ledger">']
    for v in _ticks(top):
        y = sx.y(v)
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}" stroke="#eee"/>'
                     f'<text x="{LEFT - 6}" y="{y + 4}" text-anchor="end">{num(v)}</text>')
    for v in _ticks(last, whole=True):
        x = sx.x(v)
        parts.append(f'<text x="{x}" y="{TOP + CURVE_H + 16}" text-anchor="middle">'
                     f'{int(v)}</text>')
    parts.append(f'<text x="{(LEFT + WIDTH) / 2}" y="{h - 6}" text-anchor="middle">ledger record '
                 f'(seq): spend after each record</text>')
    parts.append(f'<text transform="translate(14,{TOP + CURVE_H / 2}) rotate(-90)" '
                 f'text-anchor="middle">spend units</text>')
    for e in t.events:
        if e["type"] in ("repair", "resumed", "stopped"):
            x = sx.x(e["seq"])
            parts.append(f'<line class="event" x1="{x}" x2="{x}" y1="{TOP}" y2="{TOP + CURVE_H}" '
                         f'stroke="#999" stroke-dasharray="2,3"><title>{_e(e["text"])}</title>'
                         f'</line><text x="{x + 3}" y="{TOP + 10}">{_e(e["type"])}</text>')
    yb = sx.y(budget)
    parts.append(f'<line class="budget" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{yb}" y2="{yb}" '
                 f'stroke="#c62828" stroke-width="1.5"/><text x="{WIDTH - RIGHT - 4}" '
                 f'y="{yb - 4}" text-anchor="end" style="fill:#c62828">B = {num(budget)}</text>')
    if show_wc:
        yw = sx.y(w_c)
        parts.append(f'<line class="wc" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{yw}" y2="{yw}" '
                     f'stroke="#555" stroke-dasharray="6,4"/><text x="{LEFT + 4}" y="{yw - 4}">'
                     f'W_c = {num(w_c)} (worst-case spend, before the run)</text>')
    elif isinstance(w_c, int | float):
        parts.append(f'<text x="{LEFT + 4}" y="{TOP + 12}">W_c = {num(w_c)}, off the scale '
                     f'(worst-case spend, before the run)</text>')
    committed = [(s, y) for s, _x, y in t.curve]
    settled = [(s, x) for s, x, _y in t.curve]
    parts.append(f'<polyline class="committed" fill="none" stroke="#1565c0" stroke-width="1.5" '
                 f'stroke-dasharray="4,3" points="{_step_points(sx, committed, last)}"/>')
    parts.append(f'<polyline class="settled" fill="none" stroke="#1565c0" stroke-width="2.5" '
                 f'points="{_step_points(sx, settled, last)}"/>')
    parts.append("</svg>")
    return "".join(parts)


def _tooltip(a: Attempt) -> str:
    return (f"{a.node} activation {a.activation} attempt {a.attempt}: {a.outcome}; "
            f"records {a.begin_seq}-{a.end_seq if a.end_seq is not None else 'open'}; spend "
            f"{num(a.spend)} of c_v {num(a.spend_ceiling)}; worker {worker_end(a)}")


def attempts_svg(t: Timeline) -> str:
    names = [n.name for n in t.replayed.graph.nodes]
    last = max(t.check.records, 1)
    sx = _Scale(t.check.records, 1.0, 1.0)
    h = TOP + ROW_H * len(names) + BOTTOM
    parts = [f'<svg class="attempts" width="{WIDTH}" height="{h}" viewBox="0 0 {WIDTH} {h}" '
             f'role="img" aria-label="attempts by node over the ledger">']
    for i, name in enumerate(names):
        y = TOP + i * ROW_H
        parts.append(f'<text x="{LEFT - 6}" y="{y + ROW_H / 2 + 4}" text-anchor="end">'
                     f'{_e(name[:10])}</text><line x1="{LEFT}" x2="{WIDTH - RIGHT}" '
                     f'y1="{y + ROW_H}" y2="{y + ROW_H}" stroke="#eee"/>')
    for a in t.attempts:
        y = TOP + names.index(a.node) * ROW_H + 4
        x0 = sx.x(a.begin_seq)
        x1 = sx.x(a.end_seq + 1 if a.end_seq is not None else last)
        width = max(x1 - x0, 3.0)
        parts.append(f'<rect class="attempt {a.outcome}" x="{x0}" y="{y}" width="{round(width, 1)}" '
                     f'height="{ROW_H - 8}" fill="{COLOURS.get(a.outcome, "#999")}" '
                     f'stroke="#fff"><title>{_e(_tooltip(a))}</title></rect>')
    for e in t.events:
        if e["type"] in ("repair", "refuse", "fail", "finish", "stopped", "resumed"):
            x = sx.x(e["seq"])
            parts.append(f'<line class="event" x1="{x}" x2="{x}" y1="{TOP}" '
                         f'y2="{TOP + ROW_H * len(names)}" stroke="#333" stroke-dasharray="2,2">'
                         f'<title>{_e(e["text"])}</title></line>')
    for v in _ticks(last, whole=True):
        parts.append(f'<text x="{sx.x(v)}" y="{TOP + ROW_H * len(names) + 16}" '
                     f'text-anchor="middle">{int(v)}</text>')
    parts.append(f'<text x="{(LEFT + WIDTH) / 2}" y="{h - 6}" text-anchor="middle">ledger record '
                 f'(seq): each box runs from an attempt\'s begin to the record that ended it'
                 f'</text></svg>')
    return "".join(parts)


def _legend() -> str:
    return " ".join(f'<span class="tag" style="background:{c}">{k}</span>'
                    for k, c in COLOURS.items())


def _attempt_row(a: Attempt, budget: float) -> str:
    gate = a.gate or {}
    words = "\n".join(excerpt(gate_words(gate), 6)) if gate else ""
    worker = a.worker
    streams = "".join(
        f"<div class='muted'>{name} ({worker[name].get('bytes', '?'):,} bytes)</div>"
        f"<pre>{_e(chr(10).join(excerpt(stream_text(worker[name]), 4)))}</pre>"
        for name in ("stdout", "stderr")
        if isinstance(worker.get(name), dict) and stream_text(worker[name]).strip())
    notes = "".join(f"<div>{_e(n)}</div>" for n in [*gate_notes(a.gate), *a.notes])
    return (f"<tr id='a{a.begin_seq}'><td>{a.begin_seq}</td><td>{_e(a.node)}</td>"
            f"<td>{a.activation}</td><td>{a.attempt}</td>"
            f"<td><span class='tag' style='background:{COLOURS.get(a.outcome, '#999')}'>"
            f"{_e(a.outcome)}</span></td>"
            f"<td>{num(a.spend)} of c_v {num(a.spend_ceiling)}<div class='muted'>worker "
            f"{num(a.worker_spend)} (reserved {num(a.reserved)}), gate {num(a.gate_spend)} "
            f"(reserved {num(a.gate_reserved)})</div>"
            + (f"<div class='muted'>run settled {num(a.settled_after)} of B {num(budget)}</div>"
               if a.settled_after is not None else "")
            + f"</td><td>{_e(worker_end(a))}{streams}</td>"
            f"<td>{_e(gate_line(a.gate, a))}" + (f"<pre>{_e(words)}</pre>" if words else "")
            + f"{notes}</td></tr>")


def page(t: Timeline) -> str:
    d = t.as_json()
    b = d["bounds"]
    budget = d["graph"]["spend_budget"]
    rows = "".join(_attempt_row(a, budget) for a in t.attempts)
    events = "".join(f"<li>#{e['seq']}: {_e(e['text'])}</li>" for e in t.events)
    status = f"{t.check.status}, {t.check.records} records" + (
        f" — {t.check.error}" if t.check.error else "")
    bound = (f"W = {b['W']} attempts, W_c = {num(b['W_c'])} spend units, B = {num(budget)}"
             if b["W"] is not None else f"B = {num(budget)}")
    data = json.dumps({"records": t.check.records, "attempts": len(t.attempts),
                       "curve_points": len(t.curve), "outcome": d["outcome"]})
    return f"""<!DOCTYPE html>
<html lang="en" data-run='{_e(data)}'><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>loopproof run: {_e(t.ledger)}</title><style>{CSS}</style></head><body>
<h1>loopproof run</h1>
<div class="muted">{_e(t.ledger)}: {_e(status)}</div>
<p class="outcome">{_e(outcome_words(t)).replace(chr(10), "<br>")}</p>
<p>{_e(bound)}<br><span class="muted">{_e(GLOSS)}</span></p>
<h2>Spend against the budget</h2>
<div class="muted"><b style="color:#1565c0">&#9473;&#9473;</b> settled &nbsp;
<b style="color:#1565c0">&#9476;&#9476;</b> settled + reserved &nbsp;
<b style="color:#c62828">&#9473;&#9473;</b> the budget B &nbsp;
<b style="color:#555">&#9476;&#9476;</b> W_c</div>
{curve_svg(t)}
<h2>Attempts by node</h2>
<div>{_legend()}</div>
{attempts_svg(t)}
<h2>Run events</h2><ul>{events or '<li>none</li>'}</ul>
<h2>Attempts</h2>
<table><tr><th>seq</th><th>node</th><th>act.</th><th>att.</th><th>outcome</th><th>spend</th>
<th>worker</th><th>gate</th></tr>{rows}</table>
<script>{MEASURE}</script>
</body></html>
"""
