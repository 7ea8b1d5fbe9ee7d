"""``tracescorer backfill``: score stored runs/conversations with one bound scorer."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from tracescorer import control
from tracescorer.commands.common import config_option, load, parse_since

if TYPE_CHECKING:
    from tracescorer.config import Settings
    from tracescorer.runner.backfill import BackfillRequest
    from tracescorer.store.api import ReadStore


def _parse_filters(values: tuple[str, ...]) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r}: use KEY=VALUE, e.g. agent_name=support-* or status=error")
        value = yaml.safe_load(raw) if raw.strip() else ""
        node = out
        parts = key.strip().split(".", 1) if key.startswith("attributes.") else [key.strip()]
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def _summary(progress: dict[str, Any], dry_run: bool) -> str:
    decisions = ", ".join(f"{k}: {v}" for k, v in sorted(progress["decisions"].items())) or "nothing to do"
    head = "dry run — would" if dry_run else "backfill done —"
    return (
        f"{head} {progress['done']}/{progress['total']} target(s): {decisions}; judge cost ${progress['cost_usd']:.6f}"
    )


def _remote(info: control.ServeInfo, payload: dict[str, Any]) -> dict[str, Any]:
    try:
        job = control.call_daemon(info, "POST", control.BACKFILL_PATH, payload)["job"]
    except control.RemoteQueryError as exc:
        raise click.ClickException(str(exc)) from None
    last = 0
    with click.progressbar(length=1, label="backfill", file=sys.stderr) as bar:
        while True:
            try:
                progress = control.call_daemon(info, "GET", f"{control.BACKFILL_PATH}/{job}")
            except control.RemoteQueryError as exc:
                raise click.ClickException(str(exc)) from None
            bar.length = max(1, progress["total"])
            bar.update(progress["done"] - last)
            last = progress["done"]
            if progress["finished"]:
                return progress
            time.sleep(0.2)


def _local(settings: Settings, request: BackfillRequest) -> dict[str, Any]:
    from tracescorer.config import ConfigError
    from tracescorer.lifecycle import Stages
    from tracescorer.metrics import Metrics
    from tracescorer.runner.backfill import BackfillError, BackfillProgress, run_backfill
    from tracescorer.runner.bindings import BindingError, build_bindings
    from tracescorer.runner.limits import SharedRateLimiter
    from tracescorer.runner.stage import ScoringRunner
    from tracescorer.runtime import default_owner
    from tracescorer.store.api import StoreError
    from tracescorer.store.factory import build_stores

    try:  # scoring here, not in a daemon: the judge's variables are needed after all
        settings.require_environment()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None

    async def go() -> dict[str, Any]:
        metrics = Metrics()
        stores = build_stores(settings, metrics, owner=default_owner(), maintenance=False)
        stages = Stages(lambda: time.monotonic() + 30.0)
        try:
            for component in stores.components:
                await stages.enter(component)
        except StoreError as exc:
            await stages.aclose()
            raise click.ClickException(str(exc)) from None
        coordination = stores.coordination
        runner = ScoringRunner(
            build_bindings(settings.scorers, settings.judge),
            stores.runs,
            stores.scores,
            metrics,
            settings,
            rate=SharedRateLimiter(coordination, settings.judge.requests_per_minute) if coordination else None,
            shared_budget=coordination is not None,
        )
        await runner.start_workers()
        progress = BackfillProgress()
        with click.progressbar(length=1, label="backfill", file=sys.stderr) as bar:
            last = [0]

            def update(p: BackfillProgress) -> None:
                bar.length = max(1, p.total)
                bar.update(p.done - last[0])
                last[0] = p.done

            try:
                await run_backfill(runner, request, progress, on_progress=update)
            except BackfillError as exc:
                progress.error = str(exc)
            finally:
                await runner.stop(time.monotonic() + settings.scoring.shutdown_timeout_s)
                await stages.aclose()
        return progress.to_json()

    try:
        return asyncio.run(go())
    except BindingError as exc:
        raise click.ClickException(str(exc)) from None


@click.command()
@config_option
@click.argument("targets", metavar="[ID]...", nargs=-1)
@click.option("--scorer", "scorer_id", required=True, help="The bound scorer id to run.")
@click.option(
    "--since",
    default=None,
    help="Runs that started after this (30m, 2h, 7d or ISO 8601; default 7d). Not with IDs.",
)
@click.option("--until", default=None, help="Runs that started before this.")
@click.option(
    "--status",
    type=click.Choice(["error"]),
    default=None,
    help="Only targets whose score of this scorer is an error (re-score the failures).",
)
@click.option("--missing", is_flag=True, help="Only targets with no score of this scorer yet.")
@click.option(
    "--filter", "filters", multiple=True, help="Extra filter clause KEY=VALUE (the binding's filter applies too)."
)
@click.option("--dry-run", is_flag=True, help="Only count what would be scored.")
def backfill(
    config_path: str | None,
    targets: tuple[str, ...],
    scorer_id: str,
    since: str | None,
    until: str | None,
    status: str | None,
    missing: bool,
    filters: tuple[str, ...],
    dry_run: bool,
) -> None:
    """Score stored runs or conversations with a scorer (new or changed), with the same budgets.

    Without IDs: every run (or conversation, for a conversation scorer) that started in the time
    range. IDs (trace, run, conversation or score ids, whole or unique prefixes, as the tables of
    `runs` and `scores` show them) name the targets instead: a trace's runs or their
    conversations, a run or its conversation, a conversation or its runs, a score's target.
    """
    from tracescorer.runner.backfill import BackfillRequest

    if status and missing:
        raise click.UsageError("--status error and --missing exclude each other: run one, then the other")
    if targets and (since or until):
        raise click.UsageError(
            "IDs name the targets: --since and --until select them by time instead, give one or the other"
        )
    settings = load(config_path)
    binding = next((b for b in settings.scorers if b.id == scorer_id), None)
    ids = _target_ids(settings, targets, binding.scope) if targets and binding is not None else None
    request = BackfillRequest(
        scorer_id=scorer_id,
        since=None if targets else parse_since(since or "7d"),
        until=parse_since(until) if until else None,
        filter=_parse_filters(filters),
        dry_run=dry_run,
        only="missing" if missing else status,
        targets=tuple(ids) if ids is not None else None,
    )
    info = control.read_serve_info(settings.store.path)
    progress = _remote(info, request.to_json()) if info is not None else _local(settings, request)
    if progress.get("error"):
        raise click.ClickException(progress["error"])
    click.echo(_summary(progress, dry_run))


def _target_ids(settings: Settings, targets: tuple[str, ...], scope: str) -> list[str]:
    """The run or conversation ids (the binding's scope) the IDs name, each resolved once."""
    from tracescorer.commands.ids import resolve, target_ids
    from tracescorer.commands.reads import reading

    async def resolved(reads: ReadStore) -> list[str]:
        out: list[str] = []
        for text in targets:
            ref = await resolve(reads, text)
            found = await target_ids(reads, ref, scope)
            if not found:
                raise click.ClickException(
                    f"{ref.kind} {ref.id} has no {'conversation' if scope == 'conversation' else 'run'} to score "
                    f"with a {scope} scorer"
                )
            out += found
        return list(dict.fromkeys(out))

    return reading(settings, resolved)
