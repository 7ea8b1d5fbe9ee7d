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


def _local(settings: Settings, payload: dict[str, Any]) -> dict[str, Any]:
    from tracescorer.config import ConfigError
    from tracescorer.export.exporter import default_owner
    from tracescorer.lifecycle import Stages
    from tracescorer.metrics import Metrics
    from tracescorer.scoring.backfill import BackfillError, BackfillProgress, BackfillRequest, run_backfill
    from tracescorer.scoring.bindings import BindingError, build_bindings
    from tracescorer.scoring.limits import SharedRateLimiter
    from tracescorer.scoring.runner import ScoringRunner
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
                await run_backfill(
                    runner,
                    BackfillRequest(
                        scorer_id=payload["scorer"],
                        since=payload["since"],
                        until=payload["until"],
                        filter=payload["filter"],
                        dry_run=payload["dry_run"],
                    ),
                    progress,
                    on_progress=update,
                )
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
@click.option("--scorer", "scorer_id", required=True, help="The bound scorer id to run.")
@click.option(
    "--since", default="7d", show_default=True, help="Runs that started after this (30m, 2h, 7d or ISO 8601)."
)
@click.option("--until", default=None, help="Runs that started before this.")
@click.option(
    "--filter", "filters", multiple=True, help="Extra filter clause KEY=VALUE (the binding's filter applies too)."
)
@click.option("--dry-run", is_flag=True, help="Only count what would be scored.")
def backfill(
    config_path: str | None, scorer_id: str, since: str, until: str | None, filters: tuple[str, ...], dry_run: bool
) -> None:
    """Score stored runs or conversations with a scorer (new or changed), with the same budgets."""
    settings = load(config_path)
    payload: dict[str, Any] = {
        "scorer": scorer_id,
        "since": parse_since(since),
        "until": parse_since(until) if until else None,
        "filter": _parse_filters(filters),
        "dry_run": dry_run,
    }
    info = control.read_serve_info(settings.store.path)
    if info is not None:
        wire = {
            **payload,
            "since": payload["since"].isoformat(),
            "until": payload["until"].isoformat() if payload["until"] else None,
        }
        progress = _remote(info, wire)
    else:
        progress = _local(settings, payload)
    if progress.get("error"):
        raise click.ClickException(progress["error"])
    click.echo(_summary(progress, dry_run))
