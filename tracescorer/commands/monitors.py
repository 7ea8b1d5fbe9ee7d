"""``tracescorer monitors``: each configured monitor's rule and stored state, or its recent events."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import click

from tracescorer.commands.common import FORMAT_NAMES, config_option, load

if TYPE_CHECKING:  # imported when the command runs: the CLI's start-up stays light
    from tracescorer.config.monitors import MonitorSettings
    from tracescorer.store.api import QueryResult, ReadStore

_COLUMNS = [
    "monitor",
    "rule",
    "state",
    "since",
    "detail",
    "last_message",
    "value",
    "samples",
    "evaluated_at",
    "notified_at",
    "notify",
]


def rule_text(m: MonitorSettings) -> str:
    """The rule in one line, each setting under its config key (zero durations left out)."""
    from tracescorer.config.monitors import format_duration

    parts = [f"{m.aggregate}({m.scorer}) {m.comparison} {m.threshold:g} over {format_duration(m.window_s)}"]
    if m.aggregate != "count":
        parts.append(f"min {m.min_samples}")
    for key, seconds in (("for", m.for_s), ("keep_firing_for", m.keep_firing_for_s)):
        if seconds:
            parts.append(f"{key} {format_duration(seconds)}")
    if m.recovery_threshold is not None:
        parts.append(f"recovery_threshold {m.recovery_threshold:g}")
    for key, seconds in (("cooldown", m.cooldown_s), ("repeat_interval", m.repeat_interval_s)):
        if seconds and (m.notify or key == "cooldown"):
            parts.append(f"{key} {format_duration(seconds)}")
    return ", ".join(parts)


def _epoch(value: Any) -> float | None:
    if value is None:
        return None
    when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    return when.timestamp()


def detail_text(m: MonitorSettings | None, s: dict[str, Any]) -> str | None:
    """Where a monitor stands inside its state: how long a pending one has breached, how long a
    firing one has been clear, a firing message held back by the cooldown, reminders, a message
    left unsent by a stop."""
    from tracescorer.config.monitors import format_duration

    parts = []
    at, since, clear = _epoch(s.get("evaluated_at")), _epoch(s.get("since")), _epoch(s.get("clear_since"))
    state, told = s.get("state"), s.get("notified_state")
    if m is not None and state == "pending" and at is not None and since is not None:
        parts.append(f"breaching {format_duration(round(max(0.0, at - since)))} of for {format_duration(m.for_s)}")
    if m is not None and state == "firing" and at is not None and clear is not None:
        parts.append(
            f"clear {format_duration(round(max(0.0, at - clear)))} of keep_firing_for "
            f"{format_duration(m.keep_firing_for_s)}"
        )
    notified = _epoch(s.get("notified_at"))
    held = m is not None and m.notify and state == "firing" and told != "firing"
    if m is not None and held and notified is not None and at is not None and notified + m.cooldown_s > at:
        parts.append(f"firing message held by the cooldown until {_when(notified + m.cooldown_s)}")
    if state == "firing" and s.get("reminders"):
        parts.append(f"{s['reminders']} reminder(s) sent")
    if s.get("pending"):  # the column keeps its old name: a message not yet attempted to the end
        parts.append(f"{s['pending']} message not sent yet")
    return "; ".join(parts) or None


def _when(value: Any) -> Any:
    """A stored time (or epoch seconds), to the second, in UTC (the query endpoint gives ISO text,
    the file datetimes)."""
    if value is None:
        return None
    if isinstance(value, float):
        when = dt.datetime.fromtimestamp(value, dt.UTC)
    else:
        when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    return when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _value(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value


@click.command()
@config_option
@click.option("--events", is_flag=True, help="Recent events (fired, resolved, notified, ...) instead of states.")
@click.option("--monitor", "monitor_id", help="Only this monitor's events (with --events).")
@click.option("--format", "fmt", type=click.Choice(FORMAT_NAMES), default="table", show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Events to show.")
def monitors(config_path: str | None, events: bool, monitor_id: str | None, fmt: str, limit: int) -> None:
    """The configured monitors: rule, state (ok / pending / firing / resolved), since when, last value."""
    from tracescorer.commands.reads import reading
    from tracescorer.output import FORMATS, format_table

    settings = load(config_path)

    async def read(reads: ReadStore) -> QueryResult | None:
        """The events or the states, None for a store without their table (a file from before them)."""
        tables = {row[0] for row in (await reads.monitor_tables()).rows}
        if events:
            return await reads.monitor_events(monitor_id, limit) if "monitor_events" in tables else None
        return await reads.monitor_states() if "monitor_state" in tables else None

    result = reading(settings, read)
    if events:
        if result is None:
            click.echo(FORMATS[fmt](["event_at", "monitor_id", "event"], []))
            return
        click.echo(FORMATS[fmt](result.columns, [[_when(r[0]), *r[1:4], _value(r[4]), *r[5:]] for r in result.rows]))
        return
    stored = {r["monitor_id"]: r for r in result.dicts()} if result is not None else {}
    rows: list[list[Any]] = []
    configured = {m.id: m for m in settings.monitors}
    for m in settings.monitors:
        s = stored.get(m.id)
        notify = ", ".join(n.kind for n in m.notify) or "none"
        if s is None:
            rows.append([m.id, rule_text(m), "never evaluated", None, None, None, None, None, None, None, notify])
            continue
        rows.append(_row(m.id, rule_text(m), m, s, notify))
    for monitor, s in stored.items():
        if monitor not in configured:
            rows.append(_row(monitor, "(no longer configured)", None, s, ""))
    if not rows and fmt == "table":
        click.echo("no monitors are configured (see `monitors:` in config/tracescorer.yaml)")
        return
    if fmt == "table":  # the rule is the point of the listing: wrapped, never cut
        click.echo(format_table(_COLUMNS, rows, wrap=("rule", "detail")))
    else:
        click.echo(FORMATS[fmt](_COLUMNS, rows))


def _row(monitor: str, rule: str, m: MonitorSettings | None, s: dict[str, Any], notify: str) -> list[Any]:
    return [
        monitor,
        rule,
        s["state"],
        _when(s["since"]),
        detail_text(m, s),
        s.get("notified_state"),
        _value(s["value"]),
        s["samples"],
        _when(s["evaluated_at"]),
        _when(s["notified_at"]),
        notify,
    ]
