"""``tracescorer scores``, ``tracescorer explain`` and ``tracescorer scorers list``."""

from __future__ import annotations

from typing import Any

import click

from tracescorer.commands.common import (
    config_option,
    load,
    parse_since,
    row_limit,
    run_query,
    sql_str,
    time_literal,
    where_sql,
)
from tracescorer.output import FORMATS

_SCORE_COLUMNS = ("updated_at, scorer_id, entity_type, coalesce(entity_id, '') AS agent, "
                  "coalesce(conversation_id, '') AS conversation, trace_id, status, score, label, "
                  "judge_cost_usd, reason, error")


@click.command()
@config_option
@click.option("--scorer", "scorer_id", help="Only this scorer's scores.")
@click.option("--since", help="Only scores updated after this (30m, 2h, 7d or ISO 8601).")
@click.option("--status", type=click.Choice(["ok", "error", "not_scorable"]), default=None)
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default="table", show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=None)
def scores(config_path: str | None, scorer_id: str | None, since: str | None, status: str | None, fmt: str,
           limit: int | None) -> None:
    """Stored scores, newest last."""
    settings = load(config_path)
    limit = row_limit(settings, limit)
    where = []
    if scorer_id:
        where.append(f"scorer_id = {sql_str(scorer_id)}")
    if since:
        where.append(f"updated_at >= {time_literal(parse_since(since))}")
    if status:
        where.append(f"status = {sql_str(status)}")
    columns = _SCORE_COLUMNS if fmt == "table" else "*"
    sql = f"SELECT {columns} FROM scores{where_sql(where)} ORDER BY updated_at, id"
    result = run_query(settings, sql, limit)
    click.echo(FORMATS[fmt](result["columns"], result["rows"]))


def _rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(result["columns"], row)) for row in result["rows"]]


@click.command()
@config_option
@click.argument("trace_id", required=False)
@click.option("--conversation", "conversation_id", help="Explain a conversation instead of a trace.")
def explain(config_path: str | None, trace_id: str | None, conversation_id: str | None) -> None:
    """Per scorer binding: what happened to a trace's runs (or a conversation) and why."""
    if bool(trace_id) == bool(conversation_id):
        raise click.UsageError("give a TRACE_ID or --conversation ID")
    settings = load(config_path)
    bindings = settings.scorers
    if trace_id:
        trace_id = trace_id.lower()
        runs = _rows(run_query(settings, "SELECT run_id, agent_name, conversation_id, convention, status FROM runs "
                               f"WHERE trace_id = {sql_str(trace_id)} ORDER BY started_at_unix_nano", 1000))
        assembled = _rows(run_query(settings, "SELECT reason, incomplete, span_count, unmatched_reason FROM assembled_traces "
                                    f"WHERE trace_id = {sql_str(trace_id)}", 1))
        click.echo(f"trace {trace_id}")
        if not assembled:
            spans = run_query(settings, f"SELECT count(*) FROM spans WHERE trace_id = {sql_str(trace_id)}", 1)["rows"][0][0]
            click.echo(f"  not assembled yet ({spans} span(s) stored)" if spans else "  no spans stored for this trace")
            return
        a = assembled[0]
        click.echo(f"  assembled: {a['reason']}, {a['span_count']} span(s){', incomplete' if a['incomplete'] else ''}")
        if a["unmatched_reason"]:
            click.echo(f"  no agent run rebuilt: {a['unmatched_reason']}")
        conversations = sorted({r["conversation_id"] for r in runs if r["conversation_id"]})
        targets = [("run", r["run_id"], f"run {r['run_id'][:12]} ({r['agent_name'] or 'unnamed agent'}, {r['convention']})")
                   for r in runs]
        targets += [("conversation", c, f"conversation {c}") for c in conversations]
    else:
        assert conversation_id is not None
        runs = _rows(run_query(settings, "SELECT run_id FROM runs WHERE conversation_id = "
                               f"{sql_str(conversation_id)}", 10000))
        click.echo(f"conversation {conversation_id}: {len(runs)} run(s)")
        targets = [("conversation", conversation_id, f"conversation {conversation_id}")]
        targets += [("run", r["run_id"], f"run {r['run_id'][:12]}") for r in runs]
    if not bindings:
        click.echo("  no scorers are bound in this configuration")
        return
    for kind, target_id, label in targets:
        click.echo(f"  {label}:")
        decisions = {d["scorer_id"]: d for d in _rows(run_query(
            settings,
            "SELECT d.scorer_id, d.decision, d.detail, d.sample_rate, d.source, d.decided_at, s.score, s.label, s.reason, "
            "s.judge_cost_usd FROM scoring_decisions d LEFT JOIN scores s ON s.id = d.score_id "
            f"WHERE d.target_type = {sql_str(kind)} AND d.target_id = {sql_str(target_id)}", 1000))}
        for binding in bindings:
            if binding.scope != kind:
                continue
            d = decisions.get(binding.id)
            if not binding.enabled:
                click.echo(f"    {binding.id}: binding disabled")
            elif d is None:
                click.echo(f"    {binding.id}: no decision yet (pending, or bound after this was processed: "
                           f"use `tracescorer backfill --scorer {binding.id}`)")
            elif d["decision"] == "scored":
                extra = f" label={d['label']}" if d["label"] else ""
                cost = f" cost=${d['judge_cost_usd']:.6f}" if d["judge_cost_usd"] else ""
                click.echo(f"    {binding.id}: scored {d['score']}{extra}{cost} ({d['source']})")
                if d["reason"]:
                    click.echo(f"      reason: {str(d['reason']).strip()[:500]}")
            else:
                click.echo(f"    {binding.id}: {d['decision']}" + (f" — {d['detail']}" if d["detail"] else ""))


@click.group()
def scorers() -> None:
    """The scorer bindings of the configuration."""


@scorers.command("list")
@config_option
def list_scorers(config_path: str | None) -> None:
    """List bound scorers: scope, sampling, filter, threshold, whether they call a judge."""
    settings = load(config_path)
    from tracescorer.scoring.bindings import BindingError, build_bindings

    try:
        bound = {b.binding.id: b for b in build_bindings(settings.scorers, settings.judge)}
    except BindingError as exc:
        raise click.ClickException(str(exc)) from None
    rows = []
    for binding in settings.scorers:
        b = bound.get(binding.id)
        rows.append([binding.id, binding.prebuilt or binding.python, binding.scope, binding.sampling.ratio,
                     binding.threshold, "yes" if b and b.uses_judge else "no", "yes" if binding.enabled else "no",
                     binding.filter.model_dump(exclude_defaults=True) or ""])
    click.echo(FORMATS["table"](["id", "scorer", "scope", "sampling", "threshold", "judge", "enabled", "filter"], rows))
