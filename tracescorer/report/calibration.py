"""The report's judge calibration section: agreement of each labelled judge version with the human
labels, each scorer's versions (its trend split by version), and other tools' evaluations.

Read through the same typed reads as the rest of the report; rendered as escaped HTML with
inline SVG (:mod:`tracescorer.report.svg`), like every other section.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from html import escape
from typing import Any

from tracescorer.calibration import agreement, sources
from tracescorer.calibration.render import to_json
from tracescorer.report.points import TrendPoint
from tracescorer.report.svg import trend_chart
from tracescorer.store.api import ReadStore

RESAMPLES = 1000
# the section's own rules (the page's are in tracescorer.report.html): a box like a scorer's
_CSS = (
    "section.calibration { background: #fff; border: 1px solid var(--line); border-radius: 8px; margin: 20px 0; "
    "padding: 16px 20px; } section.calibration h2 { margin: 0 0 4px; font-size: 18px; } "
    "figure.confusion table { width: auto; }"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Version:
    version: str
    n: int
    mean: float | None
    pass_rate: float | None
    first_at: dt.datetime | None
    last_at: dt.datetime | None
    trend: tuple[TrendPoint, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationReport:
    agreements: tuple[agreement.Agreement, ...]
    versions: dict[str, tuple[Version, ...]]  # scorer id -> its versions in the window, oldest first
    external: tuple[dict[str, Any], ...]  # per evaluator and source: n, mean, labels, last_at
    since: dt.datetime
    until: dt.datetime
    start: dt.datetime  # the trend's axis and bucket width, as the report's own trends
    end: dt.datetime
    bucket_s: int


def _time(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    parsed = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _versions(rows: list[dict[str, Any]]) -> dict[str, tuple[Version, ...]]:
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        grouped.setdefault((r["scorer_id"], r["version"] or "-"), []).append(r)
    out: dict[str, list[Version]] = {}
    for (scorer, version), buckets in grouped.items():
        n = sum(int(b["n"]) for b in buckets)
        ok = [(float(b["mean"]), int(b["n"])) for b in buckets if b["mean"] is not None]
        passed, failed = sum(int(b["passed"]) for b in buckets), sum(int(b["failed"]) for b in buckets)
        trend = tuple(
            TrendPoint(
                at=dt.datetime.fromtimestamp(int(b["bucket"]), dt.UTC),
                n=int(b["n"]),
                mean=b["mean"],
                pass_rate=int(b["passed"]) / (int(b["passed"]) + int(b["failed"]))
                if int(b["passed"]) + int(b["failed"])
                else None,
                errors=int(b["errors"]),
            )
            for b in buckets
        )
        out.setdefault(scorer, []).append(
            Version(
                version=version,
                n=n,
                mean=sum(m * c for m, c in ok) / sum(c for _, c in ok) if ok else None,
                pass_rate=passed / (passed + failed) if passed + failed else None,
                first_at=min((t for b in buckets if (t := _time(b["first_at"])) is not None), default=None),
                last_at=max((t for b in buckets if (t := _time(b["last_at"])) is not None), default=None),
                trend=trend,
            )
        )
    return {
        scorer: tuple(sorted(vs, key=lambda v: v.first_at or dt.datetime.min.replace(tzinfo=dt.UTC)))
        for scorer, vs in out.items()
    }


async def collect_calibration(
    reads: ReadStore,
    *,
    since: dt.datetime,
    until: dt.datetime,
    scorer_id: str | None,
    axis: tuple[int, dt.datetime, dt.datetime],
) -> CalibrationReport | None:
    """The section's data; None for a store without the calibration tables (not migrated yet)."""
    tables = {r["table_name"] for r in (await reads.calibration_tables()).dicts()}
    if not {"labels", "evaluations", "scores"} <= tables:
        return None
    found: list[agreement.Agreement] = []
    judges = [scorer_id] if scorer_id else await sources.labelled_ids(reads)
    for judge_id in judges:
        judge, _, pairs = await sources.load_pairs(reads, sources.parse_judge(judge_id), None, since)
        if pairs:
            found += agreement.by_version(pairs, judge=str(judge), reference=sources.LABELS, resamples=RESAMPLES)
    bucket_s, start, end = axis
    versions = _versions((await reads.version_trend(since, scorer_id, bucket_s)).dicts())
    external = tuple((await reads.external_summary(since)).dicts())
    return CalibrationReport(
        agreements=tuple(found),
        versions=versions,
        external=external,
        since=since,
        until=until,
        start=start,
        end=end,
        bucket_s=bucket_s,
    )


# --- HTML ---------------------------------------------------------------------------------------------


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _ci(value: dict[str, float] | None) -> str:
    return "" if value is None else f' <span class="muted">[{value["low"]:.3f}, {value["high"]:.3f}]</span>'


def _t(value: dt.datetime | None) -> str:
    return "—" if value is None else value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _agreement_row(a: agreement.Agreement) -> str:
    j = to_json(a)
    s = j["suggested_threshold"]
    suggested = "—" if s is None else f"{s['value']:g}{_ci(s['ci'])}"
    cells = [
        escape(a.judge),
        f'<span class="ids">{escape(a.version)}</span>',
        str(a.pairs),
        f"{_num(a.accuracy)}{_ci(j['accuracy_ci'])}",
        f"{_num(a.kappa)}{_ci(j['kappa_ci'])}",
        f"{_num(a.precision_fail)} / {_num(a.recall_fail)}",
        f"{_num(a.mae)}{_ci(j['mae_ci'])}",
        f"{_num(a.spearman)}{_ci(j['spearman_ci'])}",
        "—" if a.threshold is None else f"{a.threshold:g}",
        suggested,
    ]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _confusion(a: agreement.Agreement) -> str:
    if not a.categories:
        return ""
    head = "".join(f"<th>judge {escape(c)}</th>" for c in a.categories)
    body = "".join(
        f"<tr><th>labels {escape(r)}</th>"
        + "".join(f'<td class="num">{a.confusion.get(r, {}).get(c, 0)}</td>' for c in a.categories)
        + "</tr>"
        for r in a.categories
    )
    return (
        f'<figure class="confusion"><figcaption class="muted">{escape(a.judge)} {escape(a.version)}: rows labels, '
        f"columns judge</figcaption><table><thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table></figure>"
    )


def _versions_html(scorer: str, versions: tuple[Version, ...], report: CalibrationReport) -> str:
    rows = "".join(
        f'<tr><td class="ids">{escape(v.version)}</td><td class="num">{v.n}</td><td class="num">{_num(v.mean)}</td>'
        f'<td class="num">{"—" if v.pass_rate is None else f"{v.pass_rate:.1%}"}</td><td>{escape(_t(v.first_at))}</td>'
        f"<td>{escape(_t(v.last_at))}</td></tr>"
        for v in versions
    )
    charts = ""
    if len(versions) > 1:  # the trend split by version
        charts = (
            '<div class="charts">'
            + "".join(
                f"<figure>{trend_chart(v.trend, start=report.start, end=report.end, bucket_s=report.bucket_s, lo=0.0, hi=1.0, threshold=None, title=f'{scorer} version {v.version}')}"
                f'<figcaption class="muted">version {escape(v.version)}</figcaption></figure>'
                for v in versions
            )
            + "</div>"
        )
    return (
        f'<h3 data-versions="{escape(scorer)}">{escape(scorer)}: {len(versions)} version(s)</h3>'
        "<table><thead><tr><th>version</th><th>scores</th><th>mean</th><th>pass rate</th><th>first</th><th>last</th>"
        f"</tr></thead><tbody>{rows}</tbody></table>{charts}"
    )


def render_calibration(report: CalibrationReport) -> str:
    """The section's HTML."""
    if report.agreements:
        agreement_html = (
            "<table><thead><tr><th>judge</th><th>version</th><th>pairs</th><th>accuracy</th><th>kappa</th>"
            "<th>fail precision / recall</th><th>MAE</th><th>Spearman</th><th>threshold</th><th>suggested</th>"
            "</tr></thead><tbody>"
            + "".join(_agreement_row(a) for a in report.agreements)
            + "</tbody></table>"
            + '<div class="charts">'
            + "".join(_confusion(a) for a in report.agreements)
            + "</div>"
        )
    else:
        agreement_html = (
            '<p class="muted">No human labels yet: <code>tracescorer label-queue</code> picks targets to label, '
            "<code>tracescorer label</code> stores labels (see docs/calibrate.md).</p>"
        )
    versions = "".join(_versions_html(s, vs, report) for s, vs in sorted(report.versions.items()))
    versions = versions or '<p class="muted">No scores in this window.</p>'
    external = (
        "<table><thead><tr><th>evaluator</th><th>from</th><th>evaluations</th><th>mean score</th><th>labels</th>"
        "<th>last</th></tr></thead><tbody>"
        + "".join(
            f"<tr><td>{escape(str(e['name']))}</td><td>{escape(str(e['source'] or '—'))}</td>"
            f'<td class="num">{int(e["n"])}</td><td class="num">{_num(e["mean"])}</td>'
            f'<td class="num">{int(e["labels"])}</td><td>{escape(_t(_time(e["last_at"])))}</td></tr>'
            for e in report.external
        )
        + "</tbody></table>"
        if report.external
        else '<p class="muted">No evaluations from other tools in this window.</p>'
    )
    return (
        f'<style>{_CSS}</style><section class="calibration" id="calibration"><h2>Judge calibration</h2>'
        '<p class="muted">Agreement of each judge version with the human labels (95% bootstrap intervals); '
        "the threshold that would agree best.</p>"
        f"{agreement_html}<h3>Scorer versions</h3>{versions}"
        f"<h3>Other tools' evaluations</h3>{external}</section>"
    )
