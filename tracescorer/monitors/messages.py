"""What a monitor notification says: one :class:`Notification`, rendered as a generic JSON body
or as a Slack incoming-webhook message."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from tracescorer.config.monitors import MonitorSettings, format_duration
from tracescorer.records.monitors import NotificationKind, Sample

PAYLOAD_VERSION = 1
MAX_REASON_CHARS = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class Example:
    """A score that shows the problem: where to look (trace / conversation) and why it is bad."""

    scorer_id: str
    trace_id: str | None
    conversation_id: str | None
    run_id: str | None
    agent: str | None
    score: float | None
    label: str | None
    status: str
    reason: str | None
    url: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Notification:
    monitor_id: str
    kind: NotificationKind
    scorer: str  # the monitor's scorer id or glob
    aggregate: str
    comparison: str
    threshold: float
    window: str
    window_s: float
    value: float | None
    samples: int
    min_samples: int
    since: float  # when the state it reports began
    at: float
    examples: tuple[Example, ...] = ()
    reminder: int = 0  # >0: the n-th reminder that it still fires (repeat_interval)

    @property
    def message(self) -> str:
        value = "no data" if self.value is None else _number(self.value)
        what = f"{self.aggregate} of {self.scorer}"
        counted = f"{self.samples} {'eligible targets' if self.aggregate == 'coverage' else 'scores'}"
        if self.kind == "firing":
            still = f"; still firing since {_clock(self.since)} (reminder {self.reminder})" if self.reminder else ""
            return (
                f"[FIRING] {self.monitor_id}: {what} is {value}, {self.comparison} {_number(self.threshold)}, "
                f"over the last {self.window} ({counted}){still}"
            )
        return (
            f"[RESOLVED] {self.monitor_id}: {what} is {value} over the last {self.window} "
            f"({counted}; alert when {self.comparison} {_number(self.threshold)})"
        )


def _number(value: float) -> str:
    return f"{value:.4g}"


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat()


def _clock(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def example_from(sample: Sample, monitor: MonitorSettings) -> Example:
    url = None
    if monitor.trace_url and sample.trace_id:
        url = monitor.trace_url.format(
            trace_id=quote(sample.trace_id, safe=""),
            conversation_id=quote(sample.conversation_id or "", safe=""),
            run_id=quote(sample.run_id or "", safe=""),
            scorer_id=quote(sample.scorer_id, safe=""),
        )
    reason = sample.reason
    if reason is not None and len(reason) > MAX_REASON_CHARS:
        reason = reason[: MAX_REASON_CHARS - 1] + "…"
    return Example(
        scorer_id=sample.scorer_id,
        trace_id=sample.trace_id,
        conversation_id=sample.conversation_id,
        run_id=sample.run_id,
        agent=sample.agent,
        score=sample.score,
        label=sample.label,
        status=sample.status,
        reason=reason,
        url=url,
    )


def build(
    monitor: MonitorSettings,
    kind: NotificationKind,
    *,
    value: float | None,
    samples: int,
    since: float,
    at: float,
    examples: list[Sample],
    reminder: int = 0,
) -> Notification:
    return Notification(
        monitor_id=monitor.id,
        kind=kind,
        scorer=monitor.scorer,
        aggregate=monitor.aggregate,
        comparison=monitor.comparison,
        threshold=monitor.threshold,
        window=format_duration(monitor.window_s),
        window_s=monitor.window_s,
        value=value,
        samples=samples,
        min_samples=monitor.min_samples,
        since=since,
        at=at,
        examples=tuple(example_from(s, monitor) for s in examples) if kind == "firing" else (),
        reminder=reminder,
    )


def webhook_body(n: Notification) -> dict[str, Any]:
    """The generic JSON POST body (``version`` changes only with incompatible changes)."""
    return {
        "type": "tracescorer.monitor",
        "version": PAYLOAD_VERSION,
        "status": n.kind,
        "monitor": n.monitor_id,
        "scorer": n.scorer,
        "aggregate": n.aggregate,
        "comparison": n.comparison,
        "threshold": n.threshold,
        "value": n.value,
        "samples": n.samples,
        "min_samples": n.min_samples,
        "window": n.window,
        "window_seconds": n.window_s,
        "since": _iso(n.since),
        "at": _iso(n.at),
        "reminder": n.reminder,
        "message": n.message,
        "examples": [
            {
                "scorer_id": e.scorer_id,
                "trace_id": e.trace_id,
                "conversation_id": e.conversation_id,
                "run_id": e.run_id,
                "agent": e.agent,
                "score": e.score,
                "label": e.label,
                "status": e.status,
                "reason": e.reason,
                "url": e.url,
            }
            for e in n.examples
        ],
    }


def slack_escape(text: str) -> str:
    """Slack's mrkdwn control characters (agent and judge text is untrusted)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(n: Notification) -> dict[str, Any]:
    """A Slack incoming-webhook message: ``text`` (the fallback) plus mrkdwn blocks."""
    icon = ":rotating_light:" if n.kind == "firing" else ":white_check_mark:"
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"{icon} *{slack_escape(n.message)}*"}},
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": slack_escape(
                        f"monitor {n.monitor_id} · since {_iso(n.since)} · min samples {n.min_samples}"
                    ),
                }
            ],
        },
    ]
    lines = []
    for e in n.examples:
        target = f"trace {e.trace_id}" if e.trace_id else "trace ?"
        if e.url:
            target = f"<{e.url}|{slack_escape(target)}>"
        else:
            target = slack_escape(target)
        where = f" · conversation {slack_escape(e.conversation_id)}" if e.conversation_id else ""
        verdict = e.label or e.status
        score = "" if e.score is None else f" {_number(e.score)}"
        reason = slack_escape((e.reason or "").replace("\n", " ")[:200])
        lines.append(f"• {target}{where} · {slack_escape(e.scorer_id)} {verdict}{score}: {reason}")
    if lines:
        text = "*Examples*\n" + "\n".join(lines)
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}})
    return {"text": slack_escape(n.message), "blocks": blocks}


def encode(kind: str, n: Notification) -> bytes:
    body = slack_body(n) if kind == "slack" else webhook_body(n)
    return json.dumps(body, ensure_ascii=False).encode()
