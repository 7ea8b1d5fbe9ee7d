"""Inline SVG charts for the report: a score trend over time and a score distribution.

Plain markup, no script: every text is escaped, every coordinate is a number we computed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from html import escape

from tracescorer.report.data import Bin, TrendPoint


def _n(value: float) -> str:
    return f"{value:.1f}"


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def _when(at: dt.datetime, span_s: float) -> str:
    return at.strftime("%Y-%m-%d %H:%M" if span_s <= 3 * 86400 else "%Y-%m-%d")


def trend_chart(
    points: Sequence[TrendPoint],
    *,
    since: dt.datetime,
    until: dt.datetime,
    lo: float,
    hi: float,
    threshold: float | None,
    title: str,
) -> str:
    """Mean score (and pass rate, when labelled) per time bucket, with the count per bucket below."""
    width, height = 700, 250
    left, right, top, strip, bottom = 48, 48, 26, 30, 26
    plot_h = height - top - strip - bottom
    span = max(1.0, (until - since).total_seconds())
    lo, hi = min(lo, 0.0), max(hi, 1.0)
    if hi <= lo:
        hi = lo + 1

    def x(at: dt.datetime) -> float:
        return left + (at - since).total_seconds() / span * (width - left - right)

    def y(value: float, low: float = lo, high: float = hi) -> float:
        return top + (1 - (value - low) / (high - low)) * plot_h

    out = [
        f'<svg class="chart trend" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    for value in (lo, (lo + hi) / 2, hi):
        out.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{_n(y(value))}" y2="{_n(y(value))}"/>')
        out.append(
            f'<text class="axis" x="{left - 6}" y="{_n(y(value) + 4)}" text-anchor="end">{escape(_fmt(value))}</text>'
        )
    labelled = any(p.pass_rate is not None for p in points)
    if labelled:
        for value, text in ((0.0, "0%"), (0.5, "50%"), (1.0, "100%")):
            out.append(f'<text class="axis rate" x="{width - right + 6}" y="{_n(y(value, 0, 1) + 4)}">{text}</text>')
    if threshold is not None and lo <= threshold <= hi:
        out.append(
            f'<line class="threshold" x1="{left}" x2="{width - right}" y1="{_n(y(threshold))}" '
            f'y2="{_n(y(threshold))}"><title>threshold {escape(_fmt(threshold))}</title></line>'
        )
    most = max((p.n for p in points), default=0)
    base = height - bottom
    for p in points:
        bar = 0 if not most else (strip - 6) * p.n / most
        out.append(
            f'<rect class="count" x="{_n(x(p.at) - 2)}" y="{_n(base - bar)}" width="4" height="{_n(bar)}">'
            f"<title>{escape(_when(p.at, span))}: {p.n} scores, {p.errors} errors</title></rect>"
        )
    means = [(p, x(p.at), y(p.mean), f"mean {_fmt(p.mean)} of {p.n} scores") for p in points if p.mean is not None]
    rates = [
        (p, x(p.at), y(p.pass_rate, 0, 1), f"pass rate {p.pass_rate:.0%}") for p in points if p.pass_rate is not None
    ]
    for klass, radius, series in (("mean", 3, means), ("rate", 2.5, rates)):
        if not series:
            continue
        out.append(f'<polyline class="{klass}" points="{" ".join(f"{_n(px)},{_n(py)}" for _, px, py, _ in series)}"/>')
        for p, px, py, text in series:
            out.append(
                f'<circle class="{klass}" cx="{_n(px)}" cy="{_n(py)}" r="{radius}">'
                f"<title>{escape(_when(p.at, span))}: {escape(text)}</title></circle>"
            )
    for at, anchor in ((since, "start"), (since + (until - since) / 2, "middle"), (until, "end")):
        out.append(
            f'<text class="axis" x="{_n(x(at))}" y="{height - 6}" text-anchor="{anchor}">'
            f"{escape(_when(at, span))}</text>"
        )
    legend = '<tspan class="mean">● mean score</tspan>'
    if labelled:
        legend += '  <tspan class="rate">● pass rate</tspan>'
    legend += '  <tspan class="count">▮ scores per bucket</tspan>'
    out.append(f'<text class="legend" x="{left}" y="12">{legend}</text>')
    if not points:
        out.append(f'<text class="empty" x="{width / 2}" y="{height / 2}" text-anchor="middle">no scores</text>')
    out.append("</svg>")
    return "\n".join(out)


def distribution_chart(bins: Sequence[Bin], *, threshold: float | None, title: str) -> str:
    """How many ok scores fell into each equal-width bin."""
    width, height = 340, 250
    left, right, top, bottom = 36, 12, 18, 30
    plot_w, plot_h = width - left - right, height - top - bottom
    out = [
        f'<svg class="chart distribution" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    if not bins:
        out.append(f'<text class="empty" x="{width / 2}" y="{height / 2}" text-anchor="middle">no ok scores</text>')
        out.append("</svg>")
        return "\n".join(out)
    most = max(b.n for b in bins) or 1
    lo, hi = bins[0].lo, bins[-1].hi
    step = plot_w / len(bins)
    for i, b in enumerate(bins):
        bar = plot_h * b.n / most
        bx = left + i * step
        out.append(
            f'<rect class="bin" x="{_n(bx + 1)}" y="{_n(top + plot_h - bar)}" width="{_n(step - 2)}" '
            f'height="{_n(bar)}"><title>{escape(_fmt(b.lo))} – {escape(_fmt(b.hi))}: {b.n} scores</title></rect>'
        )
        if b.n:
            out.append(
                f'<text class="axis" x="{_n(bx + step / 2)}" y="{_n(top + plot_h - bar - 3)}" '
                f'text-anchor="middle">{b.n}</text>'
            )
    out.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{top + plot_h}" y2="{top + plot_h}"/>')
    for value, anchor in ((lo, "start"), ((lo + hi) / 2, "middle"), (hi, "end")):
        vx = left + (value - lo) / (hi - lo) * plot_w
        out.append(
            f'<text class="axis" x="{_n(vx)}" y="{height - 10}" text-anchor="{anchor}">{escape(_fmt(value))}</text>'
        )
    if threshold is not None and lo <= threshold <= hi:
        tx = left + (threshold - lo) / (hi - lo) * plot_w
        out.append(
            f'<line class="threshold" x1="{_n(tx)}" x2="{_n(tx)}" y1="{top}" y2="{top + plot_h}">'
            f"<title>threshold {escape(_fmt(threshold))}</title></line>"
        )
    out.append("</svg>")
    return "\n".join(out)
