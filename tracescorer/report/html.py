"""The report as one self-contained HTML file: inline CSS and SVG, no script, no external asset.

Agent and judge text is untrusted: everything interpolated is escaped, and the page's
Content-Security-Policy forbids scripts and every external load, so even a missed escape could
not run code or call home.
"""

from __future__ import annotations

import datetime as dt
import re
from html import escape
from urllib.parse import quote

from tracescorer.report.calibration import render_calibration
from tracescorer.report.data import Report, ScoredTarget, ScorerReport
from tracescorer.report.reasons import shown_reason
from tracescorer.report.svg import bucket_words as _bucket
from tracescorer.report.svg import distribution_chart, trend_chart
from tracescorer.report.transcripts import Turn

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
svg .axis-title { fill: var(--ink); font-size: 11px; font-weight: 600; }
svg polyline.mean { fill: none; stroke: var(--mean); stroke-width: 2; }
svg polyline.mean.rate { stroke: #7c3aed; }
svg circle.mean, svg tspan.mean { fill: var(--mean); }
svg circle.mean.rate { fill: #7c3aed; }
svg polyline.rate { fill: none; stroke: var(--rate); stroke-width: 2; stroke-dasharray: 6 4; }
svg rect.rate, svg tspan.rate, svg text.rate { fill: var(--rate); }
svg rect.count, svg tspan.count { fill: #94a3b8; }
svg rect.errors, svg tspan.errors { fill: var(--bad); }
svg rect.bin { fill: var(--mean); opacity: .8; }
svg .threshold { stroke: var(--warn); stroke-width: 1.5; stroke-dasharray: 6 4; }
svg .threshold-label { fill: var(--warn); font-size: 11px; font-weight: 600; }
svg .empty { fill: var(--muted); font-size: 14px; }
.tile.bad b, td.bad { color: var(--bad); }
.error-note { border-left: 4px solid var(--bad); background: #fef2f2; padding: 8px 12px; margin: 8px 0; }
h3.errors { color: var(--bad); }
p.none { color: var(--rate); font-weight: 600; }
p.criterion { font-style: italic; }
.verdict { font-weight: 600; }
.verdict.fail, .verdict.error { color: var(--bad); }
.verdict.pass { color: var(--rate); }
.ids { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; word-break: break-all; }
.reason { white-space: pre-wrap; max-width: 520px; }
details summary { cursor: pointer; color: var(--mean); }
.run { border-left: 2px solid var(--line); padding-left: 8px; margin: 8px 0; }
.run-head { color: var(--muted); }
.turn { margin: 4px 0; white-space: pre-wrap; }
.turn .role { font-weight: 600; color: var(--muted); margin-right: 6px; }
.turn.tool { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; color: #334155; }
.turn.tool.failed { color: var(--bad); }
.turn.empty em { color: var(--warn); }
nav a { margin-right: 12px; }
"""


def _t(value: dt.datetime | None) -> str:
    return "—" if value is None else value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def duration(seconds: float | None) -> str:
    """``seconds`` in the unit that reads best: ms, s, min or h."""
    if seconds is None:
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def anchor(scorer_id: str) -> str:
    """A fragment id for a scorer's section (ids may hold any character)."""
    return "scorer-" + re.sub(r"[^A-Za-z0-9_-]", "-", scorer_id)


def trace_link(
    report: Report,
    trace_id: str | None,
    *,
    scorer_id: str = "",
    run_id: str | None = None,
    conversation_id: str | None = None,
) -> str:
    """A trace id, linked to the trace backend when ``report.trace_url`` is configured."""
    if not trace_id:
        return "—"
    if not report.trace_url:
        return escape(trace_id)
    url = report.trace_url.format(
        trace_id=quote(trace_id, safe=""),
        run_id=quote(run_id or "", safe=""),
        conversation_id=quote(conversation_id or "", safe=""),
        scorer_id=quote(scorer_id, safe=""),
    )
    return f'<a class="trace" href="{escape(url)}" rel="noopener noreferrer">{escape(trace_id)}</a>'


def _verdict(w: ScoredTarget) -> str:
    verdict = w.label or w.status
    return f'<span class="verdict {escape(verdict)}">{escape(verdict)}</span>'


def _turn(t: Turn) -> str:
    if t.role == "tool":
        klass = "turn tool failed" if t.failed else "turn tool"
        return (
            f'<div class="{klass}"><span class="role">tool</span><code>{escape(t.tool or "?")}</code> '
            f"{escape(t.text)}</div>"
        )
    if t.empty:
        return f'<div class="turn empty"><span class="role">{escape(t.role)}</span><em>{escape(t.text)}</em></div>'
    return f'<div class="turn {escape(t.role)}"><span class="role">{escape(t.role)}</span>{escape(t.text)}</div>'


def _transcript(w: ScoredTarget, report: Report, scorer_id: str) -> str:
    if not w.transcript:
        return '<span class="muted">no transcript stored (the runs may have been deleted by retention)</span>'
    parts = []
    for run in w.transcript:
        link = trace_link(
            report, run.trace_id, scorer_id=scorer_id, run_id=run.run_id, conversation_id=w.conversation_id
        )
        head = f"run {escape(run.run_id)} · {escape(run.agent or 'unnamed agent')} · trace {link}"
        parts.append(
            f'<div class="run"><div class="run-head ids">{head}</div>{"".join(_turn(t) for t in run.turns)}</div>'
        )
    turns = sum(len(r.turns) for r in w.transcript)
    return (
        f'<details class="transcript" open><summary>transcript ({_plural(len(w.transcript), "run")}, '
        f"{_plural(turns, 'message')})</summary>{''.join(parts)}</details>"
    )


def _targets(rows: tuple[ScoredTarget, ...], report: Report, scorer_id: str) -> str:
    out = []
    for w in rows:
        ids = []
        if w.conversation_id:
            ids.append(f"conversation {escape(w.conversation_id)}")
        if w.trace_id:
            link = trace_link(
                report, w.trace_id, scorer_id=scorer_id, run_id=w.run_id, conversation_id=w.conversation_id
            )
            ids.append(f"trace {link}")
        ids.append(f"score {escape(w.score_id)}")
        reason = w.reason or ""
        if w.status == "error" and w.error_type:
            reason = f"{w.error_type}: {reason}"
        elif w.status != "error":
            reason = shown_reason(reason, scorer_id, report.criteria)
        out.append(
            f'<tr class="{escape(w.status)}"><td>{_verdict(w)}</td><td class="num">{escape(_num(w.score))}</td>'
            f'<td>{escape(w.agent or "—")}<div class="muted">{escape(w.target)}</div></td>'
            f'<td class="ids">{"<br>".join(ids)}<div class="muted">{escape(_t(w.scored_at))}</div></td>'
            f'<td><div class="reason">{escape(reason)}</div>{_transcript(w, report, scorer_id)}</td></tr>'
        )
    return (
        '<table class="targets"><thead><tr><th>verdict</th><th>score</th><th>agent</th><th>where and when</th>'
        "<th>reason and transcript</th></tr></thead><tbody>" + "".join(out) + "</tbody></table>"
    )


def _worst(s: ScorerReport, report: Report) -> str:
    if s.threshold is not None or s.labelled:
        if not s.failed:
            labelled = s.passed + s.failed
            return (
                '<h3>Failures</h3><p class="none">No failures: '
                + (f"all {_plural(labelled, 'labelled score')} passed." if labelled else "nothing was labelled.")
                + "</p>"
            )
        head = f"Failures: the {len(s.worst)} lowest of {s.failed}"
    elif s.worst:
        head = f"Lowest {_plural(len(s.worst), 'score')} (no threshold: nothing passes or fails)"
    else:
        return '<h3>Lowest scores</h3><p class="none">No ok scores in this window.</p>'
    return f"<h3>{escape(head)}</h3>{_targets(s.worst, report, s.scorer_id)}"


def _errors(s: ScorerReport, report: Report) -> str:
    if not s.errors:
        return ""
    head = f"Errors: the {len(s.recent_errors)} latest of {s.errors}"
    return f'<h3 class="errors">{escape(head)}</h3>{_targets(s.recent_errors, report, s.scorer_id)}'


def _error_note(s: ScorerReport) -> str:
    if not s.errors:
        return ""
    latest = s.recent_errors[0] if s.recent_errors else None
    detail = ""
    if latest is not None and latest.reason:
        kind = f"{latest.error_type}: " if latest.error_type else ""
        detail = f" Latest ({_t(latest.scored_at)}): {kind}{latest.reason}"
    return (
        f'<p class="error-note">{_plural(s.errors, "score")} of {s.n} ({s.errors / s.n:.1%}) '
        f"could not be scored (status error).{escape(detail)}</p>"
    )


def _criterion(scorer_id: str, report: Report) -> str:
    criterion = report.criteria.get(scorer_id)
    return f'<p class="criterion">Criterion: {escape(criterion)}</p>' if criterion else ""


def _section(s: ScorerReport, report: Report) -> str:
    title = escape(s.scorer_id) + (f' <span class="muted">({escape(s.name)})</span>' if s.name != s.scorer_id else "")
    if not s.n:
        body = '<p class="muted">No scores in this window.</p>'
    else:
        tiles = [
            ("scores", str(s.n), ""),
            ("mean", _num(s.mean), ""),
            ("pass rate", _pct(s.pass_rate), ""),
            ("failed", str(s.failed) if s.labelled else "—", "bad" if s.failed else ""),
            ("errors", str(s.errors), "bad" if s.errors else ""),
            ("not scorable", str(s.not_scorable), ""),
            ("judge cost", f"${s.cost_usd:.4f}", ""),
            ("time to score p50 / p99", f"{duration(s.time_to_score_p50)} / {duration(s.time_to_score_p99)}", ""),
            ("threshold", _num(s.threshold), ""),
        ]
        if s.backfill:
            tiles.append(("from backfill", str(s.backfill), ""))
        tile_html = "".join(
            f'<div class="tile {klass}"><span class="muted">{escape(k)}</span><b>{escape(v)}</b></div>'
            for k, v, klass in tiles
        )
        trend = trend_chart(
            s.trend,
            start=report.start,
            end=report.end,
            bucket_s=report.bucket_s,
            lo=s.lo if s.lo is not None else 0.0,
            hi=s.hi if s.hi is not None else 1.0,
            threshold=s.threshold,
            title=f"{s.scorer_id}: mean score and pass rate over time",
        )
        dist = distribution_chart(s.bins, threshold=s.threshold, title=f"{s.scorer_id}: score distribution")
        body = (
            f'<div class="tiles">{tile_html}</div>{_error_note(s)}'
            f'<div class="charts"><figure>{trend}<figcaption class="muted">mean score and pass rate per '
            f"{escape(_bucket(report.bucket_s))}, scores per {escape(_bucket(report.bucket_s))} below</figcaption>"
            f'</figure><figure>{dist}<figcaption class="muted">distribution of ok scores</figcaption></figure></div>'
            f"{_worst(s, report)}{_errors(s, report)}"
        )
    return (
        f'<section class="scorer" id="{anchor(s.scorer_id)}" data-scorer="{escape(s.scorer_id)}">'
        f'<h2>{title}</h2><p class="muted">first {escape(_t(s.first_at))} · last {escape(_t(s.last_at))}</p>'
        f"{_criterion(s.scorer_id, report)}{body}</section>"
    )


def render(report: Report) -> str:
    """The whole page."""
    overview = "".join(
        f'<tr><td><a href="#{anchor(s.scorer_id)}">{escape(s.scorer_id)}</a></td><td class="num">{s.n}</td>'
        f'<td class="num">{escape(_num(s.mean))}</td><td class="num">{escape(_pct(s.pass_rate))}</td>'
        f'<td class="num">{s.failed if s.labelled else "—"}</td>'
        f'<td class="num{" bad" if s.errors else ""}">{s.errors}</td><td class="num">{s.not_scorable}</td>'
        f'<td class="num">${s.cost_usd:.4f}</td><td class="num">{escape(duration(s.time_to_score_p50))}</td>'
        f"<td>{escape(_t(s.last_at))}</td></tr>"
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
        f'<header><h1>tracescorer report</h1><p class="muted">Scores of the runs and conversations that ended '
        f"from {escape(_t(report.since))} to {escape(_t(report.until))} · {_plural(total, 'score')} · "
        f"{_plural(len(report.scorers), 'scorer')} · {escape(report.source)}</p>"
        "</header><main>"
        '<table class="overview"><thead><tr><th>scorer</th><th>scores</th><th>mean</th><th>pass rate</th>'
        "<th>failed</th><th>errors</th><th>not scorable</th><th>judge cost</th><th>time to score p50</th>"
        "<th>last scored</th></tr></thead>"
        f"<tbody>{overview}</tbody></table>{sections}{calibration}</main></body></html>\n"
    )
