"""``tracescorer monitors``: each configured monitor's rule and stored state, or its recent events."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import click

from tracescorer.commands.common import FORMAT_NAMES, config_option, load, row_limit, run_query

if TYPE_CHECKING:  # imported when the command runs: the CLI's start-up stays light
    from tracescorer.config import Settings
    from tracescorer.monitors.config import MonitorSettings

_COLUMNS = ["monitor", "rule", "state", "since", "value", "samples", "evaluated_at", "notified_at", "notify"]


def rule_text(m: MonitorSettings) -> str:
    from tracescorer.monitors.config import format_duration

    minimum = "" if m.aggregate == "count" else f", min {m.min_samples}"
    cooldown = f", cooldown {format_duration(m.cooldown_s)}" if m.cooldown_s else ""
    return (
        f"{m.aggregate}({m.scorer}) {m.comparison} {m.threshold:g} over {format_duration(m.window_s)}"
        f"{minimum}{cooldown}"
    )


def _when(value: Any) -> Any:
    """A stored time, to the second, in UTC (the query endpoint gives ISO text, the file datetimes)."""
    if value is None:
        return None
    when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    return when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _value(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value


def _tables(settings: Settings) -> set[str]:
    from tracescorer.store import queries

    return {row[0] for row in run_query(settings, queries.MONITOR_TABLES, 10)["rows"]}


def _rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(result["columns"], row, strict=False)) for row in result["rows"]]


@click.command()
@config_option
@click.option("--events", is_flag=True, help="Recent events (fired, resolved, notified, ...) instead of states.")
@click.option("--monitor", "monitor_id", help="Only this monitor's events (with --events).")
@click.option("--format", "fmt", type=click.Choice(FORMAT_NAMES), default="table", show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Events to show.")
def monitors(config_path: str | None, events: bool, monitor_id: str | None, fmt: str, limit: int) -> None:
    """The configured monitors: rule, state (ok / firing / resolved), since when, last value."""
    from tracescorer.output import FORMATS, format_table
    from tracescorer.store import queries

    settings = load(config_path)
    tables = _tables(settings)
    if events:
        if "monitor_events" not in tables:
            click.echo(FORMATS[fmt](["event_at", "monitor_id", "event"], []))
            return
        result = run_query(settings, queries.monitor_events(monitor_id), row_limit(settings, limit))
        click.echo(
            FORMATS[fmt](result["columns"], [[_when(r[0]), *r[1:4], _value(r[4]), *r[5:]] for r in result["rows"]])
        )
        return
    stored = (
        {r["monitor_id"]: r for r in _rows(run_query(settings, queries.MONITOR_STATES, 10_000))}
        if "monitor_state" in tables
        else {}
    )
    rows: list[list[Any]] = []
    for m in settings.monitors:
        s = stored.get(m.id)
        notify = ", ".join(n.kind for n in m.notify) or "none"
        if s is None:
            rows.append([m.id, rule_text(m), "never evaluated", None, None, None, None, None, notify])
            continue
        pending = f" (pending {s['pending']})" if s["pending"] else ""
        rows.append(
            [
                m.id,
                rule_text(m),
                s["state"] + pending,
                _when(s["since"]),
                _value(s["value"]),
                s["samples"],
                _when(s["evaluated_at"]),
                _when(s["notified_at"]),
                notify,
            ]
        )
    for monitor, s in stored.items():
        if all(m.id != monitor for m in settings.monitors):
            rows.append(
                [
                    monitor,
                    "(no longer configured)",
                    s["state"],
                    _when(s["since"]),
                    _value(s["value"]),
                    s["samples"],
                    _when(s["evaluated_at"]),
                    _when(s["notified_at"]),
                    "",
                ]
            )
    if not rows and fmt == "table":
        click.echo("no monitors are configured (see `monitors:` in config/tracescorer.yaml)")
        return
    if fmt == "table":  # the rule is the point of the listing: wrapped, never cut
        click.echo(format_table(_COLUMNS, rows, wrap=("rule",)))
    else:
        click.echo(FORMATS[fmt](_COLUMNS, rows))
