"""The report as one self-contained HTML file: inline CSS and SVG, no script, no external asset.

Agent and judge text is untrusted: everything interpolated is escaped, and the page's
Content-Security-Policy forbids scripts and every external load, so even a missed escape could
not run code or call home.
"""

from __future__ import annotations

import datetime as dt
import re
from html import escape

from tracescorer.report.calibration import render_calibration
from tracescorer.report.data import Report, ScorerReport, WorstScore
from tracescorer.report.svg import distribution_chart, trend_chart

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

_CSS = """
:root { color-scheme: light; --ink: #1d2330; --muted: #5f6b7a; --line: #d9dee6; --mean: #2563eb; --rate: #059669;
        --bad: #dc2626; --warn: #d97706; --bg: #f6f7f9; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
       background: var(--bg); }
header, main { max-width: 1180px; margin: 0 auto; padding: 16px 24px; }
header h1 { margin: 8px 0 4px; font-size: 24px; }
.muted { color: var(--muted); }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
section.scorer { background: #fff; border: 1px solid var(--line); border-radius: 8px; margin: 20px 0; padding: 16px 20px; }
section.scorer h2 { margin: 0 0 4px; font-size: 18px; }
.tiles { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }
.tile { border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; min-width: 110px; }
.tile b { display: block; font-size: 18px; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
figure { margin: 0; }
svg.chart { background: #fff; max-width: 100%; height: auto; }
svg .grid { stroke: var(--line); stroke-width: 1; }
svg .axis { fill: var(--muted); font-size: 11px; }
svg .legend { font-size: 11px; }
svg polyline.mean { fill: none; stroke: var(--mean); stroke-width: 2; }
svg circle.mean, svg tspan.mean { fill: var(--mean); }
svg polyline.rate { fill: none; stroke: var(--rate); stroke-width: 1.5; stroke-dasharray: 4 3; }
svg circle.rate, svg tspan.rate, svg text.rate { fill: var(--rate); }
svg rect.count, svg tspan.count { fill: #cbd5e1; }
svg rect.bin { fill: var(--mean); opacity: .8; }
svg .threshold { stroke: var(--warn); stroke-width: 1.5; stroke-dasharray: 6 4; }
svg .empty { fill: var(--muted); font-size: 14px; }
.verdict { font-weight: 600; }
.verdict.fail, .verdict.error { color: var(--bad); }
.verdict.pass { color: var(--rate); }
.ids { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; word-break: break-all; }
.reason { white-space: pre-wrap; max-width: 420px; }
details summary { cursor: pointer; color: var(--mean); }
.turn { margin: 6px 0; white-space: pre-wrap; }
.turn .role { font-weight: 600; color: var(--muted); margin-right: 6px; }
nav a { margin-right: 12px; }
"""


def _t(value: dt.datetime | None) -> str:
    return "—" if value is None else value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def anchor(scorer_id: str) -> str:
    """A fragment id for a scorer's section (ids may hold any character)."""
    return "scorer-" + re.sub(r"[^A-Za-z0-9_-]", "-", scorer_id)


def _verdict(w: WorstScore) -> str:
    verdict = w.label or w.status
    return f'<span class="verdict {escape(verdict)}">{escape(verdict)}</span>'


def _worst(s: ScorerReport) -> str:
    if not s.worst:
        return '<p class="muted">No scored targets in this window.</p>'
    rows = []
    for w in s.worst:
        ids = []
        if w.conversation_id:
            ids.append(f"conversation {escape(w.conversation_id)}")
        if w.trace_id:
            ids.append(f"trace {escape(w.trace_id)}")
        turns = "".join(
            f'<div class="turn"><span class="role">{escape(t.role)}</span>{escape(t.text)}</div>' for t in w.transcript
        )
        transcript = (
            f"<details><summary>transcript ({len(w.transcript)} messages)</summary>{turns}</details>"
            if w.transcript
            else '<span class="muted">no transcript stored</span>'
        )
        rows.append(
            f'<tr><td>{_verdict(w)}</td><td class="num">{escape(_num(w.score))}</td>'
            f'<td>{escape(w.agent or "—")}<div class="muted">{escape(w.target)}</div></td>'
            f'<td class="ids">{"<br>".join(ids) or "—"}<div class="muted">{escape(_t(w.updated_at))}</div></td>'
            f'<td><div class="reason">{escape(w.reason or "")}</div>{transcript}</td></tr>'
        )
    return (
        '<table class="worst"><thead><tr><th>verdict</th><th>score</th><th>agent</th><th>where</th>'
        "<th>reason and transcript</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _section(s: ScorerReport, report: Report) -> str:
    title = escape(s.scorer_id) + (f' <span class="muted">({escape(s.name)})</span>' if s.name != s.scorer_id else "")
    if not s.n:
        body = '<p class="muted">No scores in this window.</p>'
    else:
        tiles = [
            ("scores", str(s.n)),
            ("mean", _num(s.mean)),
            ("pass rate", _pct(s.pass_rate)),
            ("errors", str(s.errors)),
            ("not scorable", str(s.not_scorable)),
            ("judge cost", f"${s.cost_usd:.4f}"),
            ("threshold", _num(s.threshold)),
        ]
        if s.backfill:
            tiles.append(("from backfill", str(s.backfill)))
        tile_html = "".join(
            f'<div class="tile"><span class="muted">{escape(k)}</span><b>{escape(v)}</b></div>' for k, v in tiles
        )
        trend = trend_chart(
            s.trend,
            since=report.since,
            until=report.until,
            lo=s.lo if s.lo is not None else 0.0,
            hi=s.hi if s.hi is not None else 1.0,
            threshold=s.threshold,
            title=f"{s.scorer_id}: mean score and pass rate over time",
        )
        dist = distribution_chart(s.bins, threshold=s.threshold, title=f"{s.scorer_id}: score distribution")
        body = (
            f'<div class="tiles">{tile_html}</div>'
            f'<div class="charts"><figure>{trend}<figcaption class="muted">trend per '
            f"{escape(_bucket(report.bucket_s))}</figcaption></figure><figure>{dist}"
            '<figcaption class="muted">distribution of ok scores</figcaption></figure></div>'
            f"<h3>Worst {len(s.worst)}</h3>{_worst(s)}"
        )
    return (
        f'<section class="scorer" id="{anchor(s.scorer_id)}" data-scorer="{escape(s.scorer_id)}">'
        f'<h2>{title}</h2><p class="muted">first {escape(_t(s.first_at))} · last {escape(_t(s.last_at))}</p>'
        f"{body}</section>"
    )


def _bucket(seconds: int) -> str:
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}" if count != 1 else unit
    return f"{seconds} s"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def render(report: Report) -> str:
    """The whole page."""
    overview = "".join(
        f'<tr><td><a href="#{anchor(s.scorer_id)}">{escape(s.scorer_id)}</a></td><td class="num">{s.n}</td>'
        f'<td class="num">{escape(_num(s.mean))}</td><td class="num">{escape(_pct(s.pass_rate))}</td>'
        f'<td class="num">{s.errors}</td><td class="num">{s.not_scorable}</td>'
        f'<td class="num">${s.cost_usd:.4f}</td><td>{escape(_t(s.last_at))}</td></tr>'
        for s in report.scorers
    )
    total = sum(s.n for s in report.scorers)
    sections = "".join(_section(s, report) for s in report.scorers) or '<p class="muted">No scorers.</p>'
    calibration = render_calibration(report.calibration) if report.calibration is not None else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>tracescorer report: {escape(_t(report.since))} to {escape(_t(report.until))}</title>"
        f"<style>{_CSS}</style></head><body>"
        f'<header><h1>tracescorer report</h1><p class="muted">Scores from {escape(_t(report.since))} to '
        f"{escape(_t(report.until))} · {_plural(total, 'score')} · {_plural(len(report.scorers), 'scorer')} · "
        f"{escape(report.source)}</p>"
        "</header><main>"
        '<table class="overview"><thead><tr><th>scorer</th><th>scores</th><th>mean</th><th>pass rate</th>'
        "<th>errors</th><th>not scorable</th><th>judge cost</th><th>last score</th></tr></thead>"
        f"<tbody>{overview}</tbody></table>{sections}{calibration}</main></body></html>\n"
    )
