"""``tracescorer scores``, ``tracescorer explain`` and ``tracescorer scorers list``."""

from __future__ import annotations

import datetime as dt
import inspect
from typing import TYPE_CHECKING, Any

import click

from tracescorer.commands.common import as_datetime, config_option, load, parse_since, row_limit, rows_of, run_query

if TYPE_CHECKING:
    from tracescorer.config import ScorerBinding, Settings

_SUMMARY = ["updated", "scorer_id", "target", "status", "score", "label", "reason"]


@click.command()
@config_option
@click.option("--scorer", "scorer_id", help="Only this scorer's scores.")
@click.option("--since", help="Only scores updated after this (30m, 2h, 7d or ISO 8601).")
@click.option("--status", type=click.Choice(["ok", "error", "not_scorable"]), default=None)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "json", "jsonl", "table"]),
    default="table",
    show_default=True,
    help="csv/json/jsonl print every column of the scores table.",
)
@click.option("--wide", is_flag=True, help="Tables: every summary column (trace, agent, cost, error), cells in full.")
@click.option("--limit", type=click.IntRange(min=1), default=None)
def scores(
    config_path: str | None,
    scorer_id: str | None,
    since: str | None,
    status: str | None,
    fmt: str,
    wide: bool,
    limit: int | None,
) -> None:
    """Stored scores, newest last, with other tools' evaluations (source external) beside them."""
    from tracescorer.commands.external import with_external
    from tracescorer.output import FORMATS, format_table
    from tracescorer.store import queries

    settings = load(config_path)
    limit = row_limit(settings, limit)
    start = parse_since(since) if since else None
    sql = queries.scores(scorer_id=scorer_id, since=start, status=status, all_columns=fmt != "table")
    result = run_query(settings, sql, limit)
    result = with_external(  # other tools' evaluations, source external
        settings, result, scorer_id=scorer_id, since=start, status=status, all_columns=fmt != "table", limit=limit
    )
    if fmt != "table":
        click.echo(FORMATS[fmt](result["columns"], result["rows"]))
    elif wide:
        click.echo(format_table(result["columns"], result["rows"], wide=True))
    else:
        rows = [
            [
                as_datetime(r["updated_at"]).strftime("%m-%d %H:%M"),
                r["scorer_id"],
                _target(r),
                r["status"],
                r["score"],
                r["label"],
                r["reason"] or r["error"] or "",
            ]
            for r in rows_of(result)
        ]
        click.echo(format_table(_SUMMARY, rows, wrap=("reason",)))
    if result["truncated"]:
        click.echo(f"(truncated at {limit} rows)", err=True)


def _target(row: dict[str, Any]) -> str:
    if row["entity_type"] == "conversation":
        return f"conv {row['conversation']}"
    return f"run {str(row['trace_id'])[:8]} {row['agent'] or ''}".rstrip()


# --- explain ----------------------------------------------------------------------------------------


def _ago(when: dt.datetime, now: dt.datetime) -> str:
    seconds = (when - now).total_seconds()
    shown = f"{abs(seconds):.0f}s" if abs(seconds) < 120 else f"{abs(seconds) / 60:.0f}m"
    return f"in {shown}" if seconds >= 0 else f"{shown} ago"


def _stamp(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@click.command()
@config_option
@click.argument("trace_id", required=False)
@click.option("--conversation", "conversation_id", help="Explain a conversation instead of a trace.")
def explain(config_path: str | None, trace_id: str | None, conversation_id: str | None) -> None:
    """Per scorer binding: what happened to a trace's runs (or a conversation) and why.

    Exits 1 when no span of the trace (or no run of the conversation) is stored.
    """
    from tracescorer.store import queries

    if bool(trace_id) == bool(conversation_id):
        raise click.UsageError("give a TRACE_ID or --conversation ID")
    settings = load(config_path)
    now = dt.datetime.now(dt.UTC)
    if trace_id:
        targets = _explain_trace(settings, trace_id.lower(), now)
    else:
        assert conversation_id is not None
        targets = _explain_conversation(settings, conversation_id, now)
    if targets is None:
        return
    bindings = settings.scorers
    if not bindings:
        click.echo("  no scorers are bound in this configuration (see `scorers:` in config/scorers.example.yaml)")
        return
    decided: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for d in rows_of(run_query(settings, queries.decisions([(k, t) for k, t, _, _ in targets]), 10_000)):
        decided.setdefault((d["target_type"], d["target_id"]), {})[d["scorer_id"]] = d
    for kind, target_id, label, waiting in targets:
        click.echo(f"  {label}:")
        decisions = decided.get((kind, target_id), {})
        for binding in bindings:
            if binding.scope == kind:
                click.echo(f"    {binding.id}: {_decision_text(binding, decisions.get(binding.id), waiting)}")
                reason = decisions.get(binding.id, {}).get("reason")
                if reason and decisions[binding.id]["decision"] == "scored":
                    click.echo(f"      reason: {str(reason).strip()}")
    from tracescorer.commands.external import explain_external

    explain_external(settings, targets)


def _explain_trace(settings: Settings, trace_id: str, now: dt.datetime) -> list[tuple[str, str, str, str]] | None:
    from tracescorer.store import queries

    assembled = rows_of(run_query(settings, queries.assembled_trace(trace_id), 1))
    shared = settings.store.backend == "postgres"
    if not assembled and shared:
        runs = rows_of(run_query(settings, queries.trace_runs(trace_id), 1000))
        if runs:  # another daemon received and assembled it: its span log has the spans
            click.echo(f"trace {trace_id}")
            click.echo(
                "  assembled by another daemon (postgres mode: span logs are per daemon, runs and scores are shared)"
            )
            return _run_targets(settings, runs, now)
    if not assembled:
        spans = rows_of(run_query(settings, queries.trace_spans_summary(trace_id), 1))[0]
        if not spans["spans"]:
            where = (
                f"this daemon's span log ({settings.store.path}), nor a run of it in PostgreSQL"
                if shared
                else settings.store.path
            )
            raise click.ClickException(f"unknown trace id {trace_id}: no span of it is stored in {where}")
        a = settings.assembly
        last, first = as_datetime(spans["last_received"]), as_datetime(spans["first_received"])
        due = min(last + dt.timedelta(seconds=a.idle_s), first + dt.timedelta(seconds=a.max_wait_s))
        root = "its root span arrived" if spans["roots"] else "its root span has not arrived yet"
        click.echo(f"trace {trace_id}")
        click.echo(
            f"  not assembled yet: {spans['spans']} span(s) stored, {root}. A trace is assembled once its root "
            f"span ended and nothing arrived for assembly.idle_s={a.idle_s:g}s (at most "
            f"assembly.max_wait_s={a.max_wait_s:g}s after its first span): due {_ago(due, now)} "
            f"({_stamp(due)}), while the daemon runs"
        )
        return None
    runs = rows_of(run_query(settings, queries.trace_runs(trace_id), 1000))
    row = assembled[0]
    click.echo(f"trace {trace_id}")
    click.echo(
        f"  assembled: {row['reason']}, {row['span_count']} span(s){', incomplete' if row['incomplete'] else ''}"
    )
    if row["unmatched_reason"]:
        click.echo(f"  no agent run rebuilt: {row['unmatched_reason']}")
    elif runs:
        used = ", ".join(sorted({str(r["convention"]) for r in runs}))
        click.echo(f"  {len(runs)} agent run(s) rebuilt, read by convention {used}")
    return _run_targets(settings, runs, now)


def _run_targets(settings: Settings, runs: list[dict[str, Any]], now: dt.datetime) -> list[tuple[str, str, str, str]]:
    from tracescorer.store import queries

    waiting_run = "pending: run scorers decide within seconds of assembly while the daemon runs"
    targets = [
        (
            "run",
            r["run_id"],
            f"run {r['run_id'][:12]} ({r['agent_name'] or 'unnamed agent'}, convention {r['convention']})",
            waiting_run,
        )
        for r in runs
    ]
    for conversation in sorted({r["conversation_id"] for r in runs if r["conversation_id"]}):
        conv_runs = rows_of(run_query(settings, queries.conversation_runs(conversation), 10_000))
        targets.append(
            ("conversation", conversation, f"conversation {conversation}", _conversation_wait(settings, conv_runs, now))
        )
    return targets


def _explain_conversation(
    settings: Settings, conversation_id: str, now: dt.datetime
) -> list[tuple[str, str, str, str]] | None:
    from tracescorer.store import queries

    runs = rows_of(run_query(settings, queries.conversation_runs(conversation_id), 10_000))
    if not runs:
        raise click.ClickException(
            f"unknown conversation id {conversation_id!r}: no run with this conversation id "
            f"is stored in {settings.store.path}"
        )
    click.echo(f"conversation {conversation_id}: {len(runs)} run(s)")
    waiting = _conversation_wait(settings, runs, now)
    targets = [("conversation", conversation_id, f"conversation {conversation_id}", waiting)]
    targets += [
        (
            "run",
            r["run_id"],
            f"run {r['run_id'][:12]} (trace {r['trace_id']})",
            "pending: run scorers decide within seconds of assembly while the daemon runs",
        )
        for r in runs
    ]
    return targets


def _conversation_wait(settings: Settings, runs: list[dict[str, Any]], now: dt.datetime) -> str:
    idle = settings.assembly.conversation_idle_s
    last = max(as_datetime(r["updated_at"]) for r in runs)
    due = last + dt.timedelta(seconds=idle)
    if due > now:
        return (
            f"pending: the conversation is scored once idle for assembly.conversation_idle_s={idle:g}s after its "
            f"last run ({_stamp(last)}): due {_ago(due, now)} ({_stamp(due)}), while the daemon runs"
        )
    return (
        f"pending: due since {_stamp(due)} (idle {idle:g}s after its last run); it is scored while the daemon "
        "runs (also after a restart, within scoring.recover_window_s), or now with `tracescorer backfill`"
    )


def _decision_text(binding: ScorerBinding, d: dict[str, Any] | None, waiting: str) -> str:
    if not binding.enabled:
        return "binding disabled (enabled: false)"
    if d is None:
        return (
            f"no decision yet — {waiting}; bound after this was processed? `tracescorer backfill --scorer {binding.id}`"
        )
    if d["decision"] == "scored":
        extra = f" label={d['label']}" if d["label"] else ""
        cost = f" cost=${d['judge_cost_usd']:.6f}" if d["judge_cost_usd"] else ""
        version = f", version {d['scorer_version']}" if d.get("scorer_version") else ""
        return f"scored {d['score']}{extra}{cost} ({d['source']}){version}"
    detail = f" — {d['detail']}" if d["detail"] else ""
    if d["decision"] == "sampled_out" and not detail:
        detail = f" — sampling ratio {binding.sampling.ratio:g}"
    return f"{d['decision']}{detail}"


# --- scorers list -------------------------------------------------------------------------------------


@click.group()
def scorers() -> None:
    """The scorer bindings of the configuration, and the prebuilt scorers."""


@scorers.command("list")
@config_option
@click.option("--available", is_flag=True, help="List every prebuilt scorer with its options instead of the bindings.")
def list_scorers(config_path: str | None, available: bool) -> None:
    """List bound scorers (scope, sampling, filter, threshold, judge), or with --available every
    prebuilt scorer a binding can name."""
    from tracescorer.output import format_table

    if available:
        click.echo(
            format_table(
                ["prebuilt", "kind", "options", "description"], _prebuilt_rows(), wrap=("options", "description")
            )
        )
        return
    settings = load(config_path)
    from tracescorer.scoring.bindings import BindingError, build_bindings

    try:
        bound = {b.binding.id: b for b in build_bindings(settings.scorers, settings.judge)}
    except BindingError as exc:
        raise click.ClickException(str(exc)) from None
    rows = []
    for binding in settings.scorers:
        b = bound.get(binding.id)
        rows.append(
            [
                binding.id,
                binding.prebuilt or binding.python,
                binding.scope,
                binding.sampling.ratio,
                binding.threshold,
                "yes" if b and b.uses_judge else "no",
                "yes" if binding.enabled else "no",
                binding.filter.model_dump(exclude_defaults=True) or "",
            ]
        )
    if not rows:
        click.echo(
            "no scorers are bound in this configuration; `tracescorer scorers list --available` lists the "
            "prebuilt ones (bind them under `scorers:`, see config/scorers.example.yaml)"
        )
        return
    click.echo(
        format_table(
            ["id", "scorer", "scope", "sampling", "threshold", "judge", "enabled", "filter"], rows, wrap=("filter",)
        )
    )


_JUDGE_PARAMS = frozenset({"model", "judge", "api_base", "api_key", "timeout"})


def _prebuilt_rows() -> list[list[Any]]:
    """One row per prebuilt factory of the bindings registry, its options from its signature."""
    from tracescorer.scorers.prebuilt.catalog import PREBUILT

    rows = []
    for name, factory in sorted(PREBUILT.items()):
        params = inspect.signature(factory).parameters
        kind = "llm judge" if "model" in params else "code"
        options = []
        for p in params.values():
            if p.name in _JUDGE_PARAMS or p.name == "id" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            options.append(
                f"{p.name} (required)" if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
            )
        doc = (inspect.getdoc(factory) or "").strip().split("\n\n")[0].replace("\n", " ")
        rows.append([name, kind, ", ".join(options) or "-", doc])
    return rows
