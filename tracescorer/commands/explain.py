"""``tracescorer explain``: what happened to a trace's runs, or a conversation, per scorer binding."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import click

from tracescorer.commands.common import as_datetime, config_option, load

if TYPE_CHECKING:
    from tracescorer.config import ScorerBinding, Settings
    from tracescorer.store.api import ReadStore


def _ago(when: dt.datetime, now: dt.datetime) -> str:
    seconds = (when - now).total_seconds()
    shown = f"{abs(seconds):.0f}s" if abs(seconds) < 120 else f"{abs(seconds) / 60:.0f}m"
    return f"in {shown}" if seconds >= 0 else f"{shown} ago"


def _stamp(when: dt.datetime) -> str:
    from tracescorer.output import stamp

    return stamp(when)


@click.command()
@config_option
@click.argument("target", metavar="ID", required=False)
@click.option("--conversation", "conversation_id", help="Explain this conversation (an id or a unique prefix).")
def explain(config_path: str | None, target: str | None, conversation_id: str | None) -> None:
    """Per scorer binding: what happened to a trace's runs (or a conversation) and why.

    ID is a trace, run, score or conversation id, whole or a unique prefix (as the tables of
    `runs` and `scores` show them): a run or a run's score explains its trace, a conversation or
    a conversation's score the conversation. Exits 1 when no span of the trace (or no run of the
    conversation) is stored.
    """
    from tracescorer.commands.reads import reading

    if bool(target) == bool(conversation_id):
        raise click.UsageError("give an ID (trace, run, score or conversation) or --conversation ID")
    settings = load(config_path)
    reading(settings, lambda reads: _explain(reads, settings, target, conversation_id))


async def _explain(reads: ReadStore, settings: Settings, target: str | None, conversation_id: str | None) -> None:
    from tracescorer.commands.external import explain_external
    from tracescorer.commands.ids import resolve, score_target

    now = dt.datetime.now(dt.UTC)
    ref = await resolve(reads, target) if target else await resolve(reads, str(conversation_id), ("conversation",))
    kind, value = ref.kind, ref.id
    if kind == "score":
        about = await score_target(reads, value)
        click.echo(f"score {value}")
        if about.conversation and about.conversation_id:
            kind, value = "conversation", about.conversation_id
        elif about.trace_id:
            kind, value = "trace", about.trace_id
        else:
            raise click.ClickException(f"score {value} names neither a conversation nor a trace")
    if kind == "run":
        runs = (await reads.runs_of("run", value)).dicts()
        click.echo(f"run {value}")
        kind, value = "trace", runs[0]["trace_id"]
    if kind == "conversation":
        targets = await _explain_conversation(reads, settings, value, now)
    else:
        targets = await _explain_trace(reads, settings, value, now)
    if targets is None:
        return
    bindings = settings.scorers
    if not bindings:
        click.echo("  no scorers are bound in this configuration (see `scorers:` in config/scorers.example.yaml)")
        await explain_external(reads, targets)
        return
    decided: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for d in (await reads.decisions([(k, t) for k, t, _, _ in targets])).dicts():
        decided.setdefault((d["target_type"], d["target_id"]), {})[d["scorer_id"]] = d
    for kind, target_id, label, waiting in targets:
        click.echo(f"  {label}:")
        decisions = decided.get((kind, target_id), {})
        for binding in bindings:
            if binding.scope == kind:
                text = _decision_text(binding, decisions.get(binding.id), waiting)
                click.echo(f"    {binding.id}: {text}{_fallback_text(settings, binding, decisions.get(binding.id))}")
                healing = _heal_text(settings, decisions.get(binding.id), now)
                if healing:
                    click.echo(f"      heal: {healing}")
                reason = decisions.get(binding.id, {}).get("reason")
                if reason and decisions[binding.id]["decision"] == "scored":
                    click.echo(f"      reason: {str(reason).strip()}")
    await explain_external(reads, targets)


async def _explain_trace(
    reads: ReadStore, settings: Settings, trace_id: str, now: dt.datetime
) -> list[tuple[str, str, str, str]] | None:
    assembled = (await reads.assembled_trace(trace_id)).dicts()
    shared = settings.store.backend == "postgres"
    if not assembled and shared:
        runs = (await reads.trace_runs(trace_id)).dicts()
        if runs:  # another daemon received and assembled it: its span log has the spans
            click.echo(f"trace {trace_id}")
            click.echo(
                "  assembled by another daemon (postgres mode: span logs are per daemon, runs and scores are shared)"
            )
            return await _run_targets(reads, settings, runs, now)
    if not assembled:
        if await _explain_skipped(reads, settings, trace_id):
            return None
        spans = (await reads.trace_spans_summary(trace_id)).dicts()[0]
        if not spans["spans"]:
            where = (
                f"this daemon's span log ({settings.store.path}), nor a run of it in PostgreSQL"
                if shared
                else settings.store.path
            )
            if settings.store.spans == "none":
                a = settings.assembly
                raise click.ClickException(
                    f"unknown trace id {trace_id}: it was not assembled and triage did not skip it ({where}). With "
                    "store.spans: none no span is stored, so a trace is known once assembled or skipped; one received "
                    f"within assembly.max_wait_s={a.max_wait_s:g}s may still be waiting in the segment log"
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
    runs = (await reads.trace_runs(trace_id)).dicts()
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
    return await _run_targets(reads, settings, runs, now)


async def _explain_skipped(reads: ReadStore, settings: Settings, trace_id: str) -> bool:
    """Say what triage skipped of a trace, if it skipped any; whether it did."""
    found = (await reads.skipped_trace(trace_id)).dicts()
    if not found or not found[0]["requests"]:
        return False
    s = found[0]
    click.echo(f"trace {trace_id}")
    click.echo(
        f"  skipped by triage: {s['spans']} span(s) and {s['logs']} log record(s) in {s['requests']} request(s) "
        f"from {s['services'] or 'an unnamed service'}, received {_stamp(as_datetime(s['first_received']))} to "
        f"{_stamp(as_datetime(s['last_received']))}. No agent content was seen in it (no convention's marker: gen_ai.*, "
        "openinference.*, ai.*, ...), so it was neither decoded nor assembled. "
        f"Had agent spans of it come within triage.window_s={settings.triage.window_s:g}s, its skipped spans would "
        "have been read back and assembled with them; `store.spans: all` keeps a row of every span for SQL"
    )
    return True


async def _run_targets(
    reads: ReadStore, settings: Settings, runs: list[dict[str, Any]], now: dt.datetime
) -> list[tuple[str, str, str, str]]:
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
        conv_runs = (await reads.conversation_runs(conversation)).dicts()
        targets.append(
            ("conversation", conversation, f"conversation {conversation}", _conversation_wait(settings, conv_runs, now))
        )
    return targets


async def _explain_conversation(
    reads: ReadStore, settings: Settings, conversation_id: str, now: dt.datetime
) -> list[tuple[str, str, str, str]] | None:
    runs = (await reads.conversation_runs(conversation_id)).dicts()
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


def _heal_text(settings: Settings, d: dict[str, Any] | None, now: dt.datetime) -> str | None:
    """What automatic healing (``scoring.heal``) does about an error score, or did for a healed one."""
    from tracescorer.runner.heal_policy import HealPolicy, describe, heal_state

    if d is None or not d.get("status"):
        return None
    attempts = d.get("heal_attempts") or 0
    if d["status"] != "error":
        return f"healed after {attempts} automatic retr{'y' if attempts == 1 else 'ies'}" if attempts else None
    kind = f"error ({d.get('error_class') or 'unclassified'})"
    heal = settings.scoring.heal
    if not heal.enabled or heal.max_attempts == 0:
        return f"{kind}: not retried automatically (scoring.heal is off)"
    policy = HealPolicy.of(heal)
    state = heal_state(
        policy,
        error_class=d.get("error_class"),
        attempts=attempts,
        failed_at=as_datetime(d["score_updated_at"]).timestamp(),
        first_failed_at=as_datetime(d["score_created_at"]).timestamp(),
        now=now.timestamp(),
    )
    return f"{kind}, {describe(state, policy, now=now.timestamp())}"


def _fallback_text(settings: Settings, binding: ScorerBinding, d: dict[str, Any] | None) -> str:
    """Which model judged, when a fallback (``judge.fallbacks``) answered instead of the configured one."""
    model = d.get("judge_model") if d and d["decision"] == "scored" else None
    # the model the binding names (a python scorer's own Judge may name another: not known here)
    configured = binding.judge.get("model") or (
        (binding.options.get("model") or settings.judge.model) if binding.prebuilt else None
    )
    return f"; judged by fallback {model} (not {configured})" if model and configured and model != configured else ""


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
        reused = d.get("judge_reused")
        if reused:  # an earlier verdict of the same request under this version answered: no call, no cost
            version += f"; reused an earlier verdict for {reused} judge call{'s' if reused > 1 else ''} (no cost)"
        return f"scored {d['score']}{extra}{cost} ({d['source']}){version}"
    detail = f" — {d['detail']}" if d["detail"] else ""
    if d["decision"] == "sampled_out" and not detail:
        detail = f" — sampling ratio {binding.sampling.ratio:g}"
    return f"{d['decision']}{detail}"
