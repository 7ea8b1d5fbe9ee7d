"""Inline SVG charts for the report: a score trend over time and a score distribution.

Plain markup, no script: every text is escaped, every coordinate is a number we computed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from html import escape

from tracescorer.report.points import Bin, TrendPoint


def _n(value: float) -> str:
    return f"{value:.1f}"


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def _tick(at: dt.datetime, span_s: float) -> str:
    """An axis tick: the time of day on a short axis, the day on a long one (UTC)."""
    if span_s <= 600:
        return at.strftime("%H:%M:%S")
    if span_s <= 86400:
        return at.strftime("%H:%M")
    return at.strftime("%m-%d %H:%M" if span_s <= 7 * 86400 else "%Y-%m-%d")


def _when(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _series_equal(points: Sequence[TrendPoint]) -> bool:
    """Mean and pass rate are the same line (scores of 0 or 1 against a threshold of 1)."""
    both = [p for p in points if p.mean is not None and p.pass_rate is not None]
    return bool(both) and all(abs((p.mean or 0) - (p.pass_rate or 0)) < 1e-9 for p in both)


def trend_chart(
    points: Sequence[TrendPoint],
    *,
    start: dt.datetime,
    end: dt.datetime,
    bucket_s: int,
    lo: float,
    hi: float,
    threshold: float | None,
    title: str,
) -> str:
    """Mean score and pass rate per time bucket over the data's span, with the scores per bucket
    (errors in red) below; axes, threshold and counts labelled on the chart itself."""
    width, height = 720, 310
    left, right, top, strip, bottom = 58, 58, 34, 56, 46
    plot_h = height - top - strip - bottom
    plot_w = width - left - right
    span = max(1.0, (end - start).total_seconds())
    lo, hi = min(lo, 0.0), max(hi, 1.0)
    if hi <= lo:
        hi = lo + 1
    step = plot_w * bucket_s / span

    def x(at: dt.datetime) -> float:
        return left + (at - start).total_seconds() / span * plot_w

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
    mid = top + plot_h / 2
    out.append(
        f'<text class="axis-title" x="14" y="{_n(mid)}" text-anchor="middle" '
        f'transform="rotate(-90 14 {_n(mid)})">mean score</text>'
    )
    labelled = any(p.pass_rate is not None for p in points)
    merged = labelled and lo == 0.0 and hi == 1.0 and _series_equal(points)
    if labelled:
        for value, text in ((0.0, "0%"), (0.5, "50%"), (1.0, "100%")):
            out.append(f'<text class="axis rate" x="{width - right + 6}" y="{_n(y(value, 0, 1) + 4)}">{text}</text>')
        rx = width - 12
        out.append(
            f'<text class="axis-title rate" x="{rx}" y="{_n(mid)}" text-anchor="middle" '
            f'transform="rotate(90 {rx} {_n(mid)})">pass rate</text>'
        )
    if threshold is not None and lo <= threshold <= hi:
        ty = y(threshold)
        out.append(
            f'<line class="threshold" x1="{left}" x2="{width - right}" y1="{_n(ty)}" y2="{_n(ty)}">'
            f"<title>threshold {escape(_fmt(threshold))}</title></line>"
        )
        out.append(
            f'<text class="threshold-label" x="{width - right - 4}" y="{_n(ty - 4 if ty - 4 > top + 8 else ty + 12)}" '
            f'text-anchor="end">threshold {escape(_fmt(threshold))}</text>'
        )
    # scores per bucket, errors stacked in red, on a strip of their own with its scale
    most = max((p.n for p in points), default=0)
    base = top + plot_h + strip - 6
    room = strip - 26
    bar_w = max(2.0, min(step * 0.8, 24.0))
    out.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{_n(base)}" y2="{_n(base)}"/>')
    out.append(f'<text class="axis" x="{left - 6}" y="{_n(base)}" text-anchor="end">0</text>')
    if most:
        out.append(
            f'<text class="axis count-max" x="{left - 6}" y="{_n(base - room + 4)}" text-anchor="end">{most}</text>'
        )
        out.append(
            f'<line class="grid" x1="{left}" x2="{width - right}" y1="{_n(base - room)}" y2="{_n(base - room)}"/>'
        )
    out.append(
        f'<text class="axis-title" x="{left + 4}" y="{_n(base - room - 4)}">scores per {bucket_words(bucket_s)}</text>'
    )
    for p in points:
        cx = x(p.at) + step / 2
        total = 0 if not most else room * p.n / most
        bad = 0 if not most else room * p.errors / most
        good = total - bad
        when = _when(p.at)
        out.append(
            f'<rect class="count" x="{_n(cx - bar_w / 2)}" y="{_n(base - good)}" width="{_n(bar_w)}" '
            f'height="{_n(good)}"><title>{escape(when)}: {p.n} scores, {p.errors} errors</title></rect>'
        )
        if p.errors:
            out.append(
                f'<rect class="errors" x="{_n(cx - bar_w / 2)}" y="{_n(base - total)}" width="{_n(bar_w)}" '
                f'height="{_n(bad)}"><title>{escape(when)}: {p.errors} errors</title></rect>'
            )
    means = [(p, x(p.at) + step / 2, y(p.mean)) for p in points if p.mean is not None]
    rates = [(p, x(p.at) + step / 2, y(p.pass_rate, 0, 1)) for p in points if p.pass_rate is not None]
    series = [("mean rate" if merged else "mean", means)] + ([] if merged else [("rate", rates)])
    for klass, shown in series:
        if not shown:
            continue
        line = " ".join(f"{_n(px)},{_n(py)}" for _, px, py in shown)
        out.append(f'<polyline class="{klass}" points="{line}"/>')
        for p, px, py in shown:
            text = f"mean {_fmt(p.mean or 0)} of {p.n} scores" if "mean" in klass else ""
            if "rate" in klass and p.pass_rate is not None:
                text = ", ".join(t for t in (text, f"pass rate {p.pass_rate:.0%}") if t)
            marker = (
                f'<rect class="{klass}" x="{_n(px - 3)}" y="{_n(py - 3)}" width="6" height="6">'
                if klass == "rate"
                else f'<circle class="{klass}" cx="{_n(px)}" cy="{_n(py)}" r="3">'
            )
            tag = "rect" if klass == "rate" else "circle"
            out.append(f"{marker}<title>{escape(_when(p.at))}: {escape(text)}</title></{tag}>")
    for i in range(5):
        at = start + (end - start) * i / 4
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        out.append(
            f'<text class="axis" x="{_n(x(at))}" y="{height - 24}" text-anchor="{anchor}">{escape(_tick(at, span))}</text>'
        )
    out.append(
        f'<text class="axis-title" x="{_n(left + plot_w / 2)}" y="{height - 6}" text-anchor="middle">'
        f"time of the run's end or the conversation's last turn (UTC), {escape(_when(start))} to "
        f"{escape(_when(end))}</text>"
    )
    if merged:
        legend = '<tspan class="mean">● mean score = pass rate (every score is 0 or 1)</tspan>'
    else:
        legend = '<tspan class="mean">● mean score</tspan>'
        if labelled:
            legend += '  <tspan class="rate">■ pass rate (dashed)</tspan>'
    legend += '  <tspan class="count">▮ scores</tspan>'
    if any(p.errors for p in points):
        legend += f'  <tspan class="errors">▮ errors ({sum(p.errors for p in points)})</tspan>'
    out.append(f'<text class="legend" x="{left}" y="14">{legend}</text>')
    if not points:
        out.append(f'<text class="empty" x="{width / 2}" y="{top + plot_h / 2}" text-anchor="middle">no scores</text>')
    out.append("</svg>")
    return "\n".join(out)


def bucket_words(seconds: int) -> str:
    """A bucket width in words: ``10 seconds``, ``minute``, ``3 hours``, ``day``."""
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second")):
        if seconds % size == 0:
            count = seconds // size
            return unit if count == 1 else f"{count} {unit}s"
    return f"{seconds} s"


def distribution_chart(bins: Sequence[Bin], *, threshold: float | None, title: str) -> str:
    """How many ok scores fell into each equal-width bin."""
    width, height = 340, 300
    left, right, top, bottom = 40, 12, 34, 46
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
            f'<text class="axis" x="{_n(vx)}" y="{height - 24}" text-anchor="{anchor}">{escape(_fmt(value))}</text>'
        )
    out.append(
        f'<text class="axis-title" x="{_n(left + plot_w / 2)}" y="{height - 6}" text-anchor="middle">score</text>'
    )
    mid = top + plot_h / 2
    out.append(
        f'<text class="axis-title" x="12" y="{_n(mid)}" text-anchor="middle" '
        f'transform="rotate(-90 12 {_n(mid)})">scores</text>'
    )
    if threshold is not None and lo <= threshold <= hi:
        tx = left + (threshold - lo) / (hi - lo) * plot_w
        out.append(
            f'<line class="threshold" x1="{_n(tx)}" x2="{_n(tx)}" y1="{top}" y2="{top + plot_h}">'
            f"<title>threshold {escape(_fmt(threshold))}</title></line>"
        )
        out.append(
            f'<text class="threshold-label" x="{_n(tx)}" y="{top - 18}" '
            f'text-anchor="{"end" if tx > left + plot_w / 2 else "start"}">threshold {escape(_fmt(threshold))}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)
