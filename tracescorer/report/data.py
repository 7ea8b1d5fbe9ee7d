"""What the HTML report shows, read through a query function (daemon endpoint or read-only file)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tracescorer.store import queries

if TYPE_CHECKING:
    from tracescorer.report.calibration import CalibrationReport

RunQuery = Callable[[queries.Query, int], dict[str, Any]]  # (query, max_rows) -> {columns, rows, truncated, ...}

BINS = 10
MAX_POINTS = 60
RUNS_PER_CONVERSATION = 6
MAX_TURN_CHARS = 600
_BUCKETS_S = (60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400, 30 * 86400)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrendPoint:
    at: dt.datetime  # start of the bucket
    n: int
    mean: float | None
    pass_rate: float | None
    errors: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Bin:
    lo: float
    hi: float
    n: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    role: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WorstScore:
    target: str  # conversation | agent (a run)
    agent: str | None
    conversation_id: str | None
    trace_id: str | None
    run_id: str | None
    status: str
    score: float | None
    label: str | None
    reason: str | None
    updated_at: dt.datetime | None
    transcript: tuple[Turn, ...]


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
    trend: tuple[TrendPoint, ...] = ()
    bins: tuple[Bin, ...] = ()
    worst: tuple[WorstScore, ...] = ()

    @property
    def pass_rate(self) -> float | None:
        labelled = self.passed + self.failed
        return self.passed / labelled if labelled else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    since: dt.datetime
    until: dt.datetime
    bucket_s: int
    source: str
    scorers: tuple[ScorerReport, ...]
    calibration: CalibrationReport | None = None  # the judge calibration section (tracescorer.report.calibration)


def bucket_for(span_s: float) -> int:
    """The smallest of a few round bucket widths that keeps the trend within MAX_POINTS points."""
    return next((b for b in _BUCKETS_S if span_s / b <= MAX_POINTS), _BUCKETS_S[-1])


def _rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(result["columns"], row, strict=False)) for row in result["rows"]]


def _time(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _clip(text: str, limit: int = MAX_TURN_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def message_text(message: Any) -> str:
    """The readable text of a stored message: its content, else its text and tool-call parts."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str) and content.strip():
        return content
    pieces = []
    for part in message.get("parts") or []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and part.get("content"):
            pieces.append(str(part["content"]))
        elif part.get("type") == "tool_call":
            pieces.append(f"[calls tool {part.get('name')}]")
        elif part.get("type") == "tool_call_response":
            pieces.append("[tool result]")
    return " ".join(pieces)


def _turns(run: dict[str, Any]) -> list[Turn]:
    turns = []
    for message in _json(run.get("input_messages")) or []:
        if isinstance(message, dict) and message.get("role") == "user":
            turns.append(Turn(role="user", text=_clip(message_text(message))))
    for message in _json(run.get("output")) or []:
        text = message_text(message)
        if text:
            turns.append(Turn(role=str(message.get("role") or "assistant"), text=_clip(text)))
    return turns


def collect(
    query: RunQuery,
    *,
    since: dt.datetime,
    until: dt.datetime,
    scorer_id: str | None,
    configured: Sequence[str],
    worst: int,
    source: str,
) -> Report:
    """Every scorer with scores since ``since`` (and every configured one, even without)."""
    bucket_s = bucket_for((until - since).total_seconds())
    summary = {r["scorer_id"]: r for r in _rows(query(queries.report_summary(since, scorer_id), 10_000))}
    trend: dict[str, list[TrendPoint]] = {}
    for r in _rows(query(queries.report_trend(since, scorer_id, bucket_s), 10_000)):
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
    for r in _rows(query(queries.report_distribution(since, scorer_id, BINS), 10_000)):
        ranges[r["scorer_id"]] = (float(r["lo"]), float(r["hi"]))
        counts.setdefault(r["scorer_id"], {})[int(r["bin"])] = int(r["n"])
    worst_rows = _rows(query(queries.report_worst(since, scorer_id, worst), 10_000))
    run_ids = sorted({r["run_id"] for r in worst_rows if r["entity_type"] != "conversation" and r["run_id"]})
    conv_ids = sorted(
        {r["conversation_id"] for r in worst_rows if r["entity_type"] == "conversation" and r["conversation_id"]}
    )
    runs = (
        _rows(query(queries.report_transcripts(run_ids, conv_ids, RUNS_PER_CONVERSATION), 10_000))
        if run_ids or conv_ids
        else []
    )
    by_run = {r["run_id"]: r for r in runs}
    by_conv: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        if r["conversation_id"]:
            by_conv.setdefault(r["conversation_id"], []).append(r)
    worst_by: dict[str, list[WorstScore]] = {}
    for r in worst_rows:
        conversation = r["entity_type"] == "conversation"
        source_runs = (
            by_conv.get(r["conversation_id"], [])
            if conversation
            else [by_run[r["run_id"]]]
            if r["run_id"] in by_run
            else []
        )
        transcript = tuple(t for run in source_runs for t in _turns(run))
        worst_by.setdefault(r["scorer_id"], []).append(
            WorstScore(
                target="conversation" if conversation else "agent",
                agent=r["entity_id"],
                conversation_id=r["conversation_id"],
                trace_id=r["trace_id"],
                run_id=r["run_id"],
                status=r["status"],
                score=r["score"],
                label=r["label"],
                reason=r["reason"] or r["error"],
                updated_at=_time(r["updated_at"]),
                transcript=transcript,
            )
        )
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
                trend=tuple(trend.get(sid, ())),
                bins=_bins(ranges.get(sid), counts.get(sid, {})),
                worst=tuple(worst_by.get(sid, ())),
            )
        )
    from tracescorer.report.calibration import collect_calibration

    calibration = collect_calibration(query, since=since, until=until, scorer_id=scorer_id, bucket_s=bucket_s)
    return Report(
        since=since, until=until, bucket_s=bucket_s, source=source, scorers=tuple(scorers), calibration=calibration
    )


def _bins(span: tuple[float, float] | None, counts: dict[int, int]) -> tuple[Bin, ...]:
    if span is None:
        return ()
    lo, hi = span
    width = (hi - lo) / BINS
    return tuple(Bin(lo=lo + width * i, hi=lo + width * (i + 1), n=counts.get(i, 0)) for i in range(BINS))
