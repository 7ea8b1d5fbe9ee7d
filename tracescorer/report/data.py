"""What the HTML report shows, read through the store's typed reads (through the daemon, or on the
store when none runs).

Times are those of what was scored (a run's end, a conversation's last turn: ``scores.target_ended_at``,
``updated_at`` for rows from before it existed), so a backfill leaves the history where it was. The
trend's axis spans the data, not the whole window asked for.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracescorer.report.points import Bin, TrendPoint
from tracescorer.report.transcripts import RunTranscript, transcripts
from tracescorer.store.api import ReadStore

if TYPE_CHECKING:
    from tracescorer.report.calibration import CalibrationReport

BINS = 10
MAX_POINTS = 60
RUNS_PER_CONVERSATION = 6
ERRORS_PER_SCORER = 5
_BUCKETS_S = (
    1,
    5,
    10,
    30,
    60,
    300,
    900,
    1800,
    3600,
    3 * 3600,
    6 * 3600,
    12 * 3600,
    86400,
    7 * 86400,
    30 * 86400,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScoredTarget:
    """One score shown with what it is about (a failure, a low score or an error)."""

    score_id: str
    target: str  # conversation | agent (a run)
    agent: str | None
    conversation_id: str | None
    trace_id: str | None
    span_id: str | None
    run_id: str | None
    status: str
    score: float | None
    label: str | None
    reason: str | None
    error_type: str | None
    scored_at: dt.datetime | None
    transcript: tuple[RunTranscript, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScorerReport:
    scorer_id: str
    name: str
    n: int = 0
    ok: int = 0
    errors: int = 0
    not_scorable: int = 0
    mean: float | None = None
    lo: float | None = None
    hi: float | None = None
    passed: int = 0
    failed: int = 0
    cost_usd: float = 0.0
    threshold: float | None = None
    backfill: int = 0
    first_at: dt.datetime | None = None
    last_at: dt.datetime | None = None
    #: seconds from a live score's target's end to its row stored: median and 99th percentile
    time_to_score_p50: float | None = None
    time_to_score_p99: float | None = None
    trend: tuple[TrendPoint, ...] = ()
    bins: tuple[Bin, ...] = ()
    worst: tuple[ScoredTarget, ...] = ()  # failures (lowest first), or the lowest scores without a threshold
    recent_errors: tuple[ScoredTarget, ...] = ()

    @property
    def labelled(self) -> bool:
        return self.passed + self.failed > 0

    @property
    def pass_rate(self) -> float | None:
        labelled = self.passed + self.failed
        return self.passed / labelled if labelled else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    since: dt.datetime
    until: dt.datetime
    start: dt.datetime  # the trend's axis: the data's span, in whole buckets
    end: dt.datetime
    bucket_s: int
    source: str
    scorers: tuple[ScorerReport, ...]
    trace_url: str | None = None  # a link template: {trace_id}, {conversation_id}, {run_id}, {scorer_id}
    criteria: Mapping[str, str] = field(default_factory=dict)  # a judge binding's criterion, said once
    calibration: CalibrationReport | None = None  # the judge calibration section (tracescorer.report.calibration)


def bucket_for(span_s: float) -> int:
    """The smallest of a few round bucket widths that keeps the trend within MAX_POINTS points."""
    return next((b for b in _BUCKETS_S if span_s / b <= MAX_POINTS), _BUCKETS_S[-1])


def _time(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value)


def axis(
    first: dt.datetime | None, last: dt.datetime | None, since: dt.datetime, until: dt.datetime
) -> tuple[int, dt.datetime, dt.datetime]:
    """The trend's bucket width and axis (start, end) for data from ``first`` to ``last``: whole
    buckets around the data, at least four (the axis's five ticks a bucket or more apart read
    apart: data within a second or two had them all read the same time), the window when there is
    none."""
    if first is None or last is None:
        return bucket_for((until - since).total_seconds()), since, until
    bucket = bucket_for(max(1.0, (last - first).total_seconds()))
    start_s = int(first.timestamp()) // bucket * bucket
    end_s = max((int(last.timestamp()) // bucket + 1) * bucket, start_s + 4 * bucket)
    return bucket, dt.datetime.fromtimestamp(start_s, dt.UTC), dt.datetime.fromtimestamp(end_s, dt.UTC)


async def collect(
    reads: ReadStore,
    *,
    since: dt.datetime,
    until: dt.datetime,
    scorer_id: str | None,
    configured: Sequence[str],
    worst: int,
    source: str,
    trace_url: str | None = None,
    criteria: Mapping[str, str] | None = None,
) -> Report:
    """Every scorer with scores since ``since`` (and every configured one, even without)."""
    summary = {r["scorer_id"]: r for r in (await reads.report_summary(since, scorer_id)).dicts()}
    firsts = [t for t in (_time(s["first_at"]) for s in summary.values()) if t is not None]
    lasts = [t for t in (_time(s["last_at"]) for s in summary.values()) if t is not None]
    bucket_s, start, end = axis(min(firsts, default=None), max(lasts, default=None), since, until)
    trend: dict[str, list[TrendPoint]] = {}
    for r in (await reads.report_trend(since, scorer_id, bucket_s)).dicts():
        labelled = int(r["passed"]) + int(r["failed"])
        trend.setdefault(r["scorer_id"], []).append(
            TrendPoint(
                at=dt.datetime.fromtimestamp(int(r["bucket"]), dt.UTC),
                n=int(r["n"]),
                mean=r["mean"],
                pass_rate=int(r["passed"]) / labelled if labelled else None,
                errors=int(r["errors"]),
            )
        )
    ranges: dict[str, tuple[float, float]] = {}
    counts: dict[str, dict[int, int]] = {}
    for r in (await reads.report_distribution(since, scorer_id, BINS)).dicts():
        ranges[r["scorer_id"]] = (float(r["lo"]), float(r["hi"]))
        counts.setdefault(r["scorer_id"], {})[int(r["bin"])] = int(r["n"])
    worst_rows = (await reads.report_worst(since, scorer_id, worst)).dicts()
    error_rows = (await reads.report_errors(since, scorer_id, ERRORS_PER_SCORER)).dicts()
    shown = await transcripts(reads, worst_rows + error_rows, RUNS_PER_CONVERSATION)
    worst_by = _targets(worst_rows, shown)
    errors_by = _targets(error_rows, shown)
    ids = sorted(set(summary) | ({scorer_id} if scorer_id else set(configured)))
    scorers = []
    for sid in ids:
        s = summary.get(sid)
        if s is None:
            scorers.append(ScorerReport(scorer_id=sid, name=sid))
            continue
        scorers.append(
            ScorerReport(
                scorer_id=sid,
                name=s["scorer_name"] or sid,
                n=int(s["n"]),
                ok=int(s["ok"]),
                errors=int(s["errors"]),
                not_scorable=int(s["not_scorable"]),
                mean=s["mean"],
                lo=s["lo"],
                hi=s["hi"],
                passed=int(s["passed"]),
                failed=int(s["failed"]),
                cost_usd=float(s["cost_usd"] or 0),
                threshold=s["threshold"],
                backfill=int(s["backfill"]),
                first_at=_time(s["first_at"]),
                last_at=_time(s["last_at"]),
                time_to_score_p50=_seconds(s["time_to_score_p50"]),
                time_to_score_p99=_seconds(s["time_to_score_p99"]),
                trend=tuple(trend.get(sid, ())),
                bins=_bins(ranges.get(sid), counts.get(sid, {})),
                worst=tuple(worst_by.get(sid, ())),
                recent_errors=tuple(errors_by.get(sid, ())),
            )
        )
    from tracescorer.report.calibration import collect_calibration

    calibration = await collect_calibration(
        reads, since=since, until=until, scorer_id=scorer_id, axis=(bucket_s, start, end)
    )
    return Report(
        since=since,
        until=until,
        start=start,
        end=end,
        bucket_s=bucket_s,
        source=source,
        scorers=tuple(scorers),
        trace_url=trace_url,
        criteria=dict(criteria or {}),
        calibration=calibration,
    )


def _targets(
    rows: list[dict[str, Any]], shown: dict[tuple[str, str], tuple[RunTranscript, ...]]
) -> dict[str, list[ScoredTarget]]:
    out: dict[str, list[ScoredTarget]] = {}
    for r in rows:
        conversation = r["entity_type"] == "conversation"
        key = ("conversation", r["conversation_id"]) if conversation else ("run", r["run_id"])
        out.setdefault(r["scorer_id"], []).append(
            ScoredTarget(
                score_id=r["id"],
                target="conversation" if conversation else "agent",
                agent=r["entity_id"],
                conversation_id=r["conversation_id"],
                trace_id=r["trace_id"],
                span_id=r["span_id"],
                run_id=r["run_id"],
                status=r["status"],
                score=r["score"],
                label=r["label"],
                reason=r["error"] if r["status"] == "error" else r["reason"],
                error_type=r["error_type"],
                scored_at=_time(r["scored_at"]),
                transcript=shown.get(key, ()),
            )
        )
    return out


def _bins(span: tuple[float, float] | None, counts: dict[int, int]) -> tuple[Bin, ...]:
    if span is None:
        return ()
    lo, hi = span
    width = (hi - lo) / BINS
    return tuple(Bin(lo=lo + width * i, hi=lo + width * (i + 1), n=counts.get(i, 0)) for i in range(BINS))
