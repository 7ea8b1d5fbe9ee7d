"""``tracescorer agreement`` and ``tracescorer disagreements``: how far to trust a judge."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from tracescorer.commands.common import config_option, load, parse_since

if TYPE_CHECKING:
    from tracescorer.calibration.agreement import Agreement
    from tracescorer.calibration.sources import Judge
    from tracescorer.store.api import ReadStore

_REFERENCE_HELP = "What the judge is compared with: labels (human labels, default), scorer:<id> or external:<name>."


async def _judges(reads: ReadStore, scorers: tuple[str, ...]) -> list[Judge]:
    from tracescorer.calibration import sources

    if scorers:
        return [sources.parse_judge(s) for s in scorers]
    labelled = await sources.labelled_ids(reads)
    if not labelled:
        raise click.ClickException(
            "no human labels are stored yet: label targets with `tracescorer label`, or import a file "
            "(`tracescorer label-queue` picks targets to label), or compare with --scorer and --reference"
        )
    return [sources.parse_judge(s) for s in labelled]


@click.command()
@config_option
@click.option(
    "--scorer",
    "scorers",
    multiple=True,
    help="The judge: a scorer id or external:<name> (default: every labelled one).",
)
@click.option("--reference", default="labels", show_default=True, help=_REFERENCE_HELP)
@click.option("--since", default=None, help="Only the judge's verdicts after this (30m, 2h, 7d or ISO 8601).")
@click.option(
    "--all-versions", is_flag=True, help="One row for all the judge's versions together, not one per version."
)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "jsonl"]), default="table", show_default=True)
@click.option(
    "--resamples",
    type=click.IntRange(min=0),
    default=1000,
    show_default=True,
    help="Bootstrap resamples (0: no intervals).",
)
@click.option("--seed", type=int, default=None, help="Bootstrap seed (the same seed gives the same intervals).")
def agreement(
    config_path: str | None,
    scorers: tuple[str, ...],
    reference: str,
    since: str | None,
    all_versions: bool,
    fmt: str,
    resamples: int,
    seed: int | None,
) -> None:
    """Agreement of each judge version with human labels (or another evaluator): accuracy, Cohen's
    kappa, confusion matrix, precision and recall of fail, MAE and Spearman's rho, with bootstrap
    95% intervals, and the threshold that would agree best."""
    from tracescorer.calibration import agreement as calc
    from tracescorer.calibration import render, sources, stats
    from tracescorer.commands.reads import reading

    settings = load(config_path)
    start = parse_since(since) if since else None
    try:
        ref = sources.parse_reference(reference)
    except sources.SourceError as exc:
        raise click.ClickException(str(exc)) from None

    async def compare(reads: ReadStore) -> list[Agreement]:
        results: list[Agreement] = []
        for judge in await _judges(reads, scorers):
            read_as, judged, pairs = await sources.load_pairs(reads, judge, ref, start)
            if not judged:
                what = "scores (or evaluations) of labelled targets" if ref is None else "scores (or evaluations)"
                click.echo(f"{judge}: no {what} to compare", err=True)
                continue
            results += calc.by_version(
                pairs,
                judge=str(read_as),
                reference=sources.reference_name(ref),
                split=not all_versions,
                intervals=resamples > 0,
                resamples=max(1, resamples),
                seed=stats.DEFAULT_SEED if seed is None else seed,
            )
        return results

    try:
        results = reading(settings, compare)
    except sources.SourceError as exc:
        raise click.ClickException(str(exc)) from None
    if fmt == "json":
        click.echo(json.dumps([render.to_json(a) for a in results], indent=2))
    elif fmt == "jsonl":
        for a in results:
            click.echo(json.dumps(render.to_json(a)))
    else:
        click.echo("\n\n".join(render.to_text(a) for a in results) or "nothing to compare")


@click.command()
@config_option
@click.option("--scorer", "scorer_id", required=True, help="The judge: a scorer id or external:<name>.")
@click.option("--reference", default="labels", show_default=True, help=_REFERENCE_HELP)
@click.option("--since", default=None, help="Only the judge's verdicts after this (30m, 2h, 7d or ISO 8601).")
@click.option("--version", "version", default=None, help="Only this scorer version.")
@click.option(
    "--tolerance", type=float, default=0.25, show_default=True, help="Numbers further apart than this differ."
)
@click.option("-n", "limit", type=click.IntRange(min=1), default=20, show_default=True, help="Show at most this many.")
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table", show_default=True)
def disagreements(
    config_path: str | None,
    scorer_id: str,
    reference: str,
    since: str | None,
    version: str | None,
    tolerance: float,
    limit: int,
    fmt: str,
) -> None:
    """Targets where the judge and the reference differ, largest differences first, with the
    judge's reason, the reference's notes and a transcript excerpt."""
    from tracescorer.calibration import agreement as calc
    from tracescorer.calibration import sources
    from tracescorer.calibration.excerpts import excerpts
    from tracescorer.commands.reads import reading

    settings = load(config_path)
    try:
        ref = sources.parse_reference(reference)
        wanted = sources.parse_judge(scorer_id)
    except sources.SourceError as exc:
        raise click.ClickException(str(exc)) from None
    start = parse_since(since) if since else None

    async def read(reads: ReadStore) -> tuple[Judge, list[calc.Pair], list[calc.Disagreement], dict[calc.Key, str]]:
        judge, _, pairs = await sources.load_pairs(reads, wanted, ref, start)
        if version is not None:
            pairs = [p for p in pairs if p.judge.version == version]
        found = calc.disagreements(pairs, tolerance=tolerance)
        return judge, pairs, found, await excerpts(reads, [d.pair.judge for d in found[:limit]])

    judge, pairs, found, texts = reading(settings, read)
    shown = found[:limit]
    if fmt == "jsonl":
        for d in shown:
            j, r = d.pair.judge, d.pair.reference
            click.echo(
                json.dumps(
                    {
                        "target": f"{j.target_type}:{j.target_id}",
                        "why": d.why,
                        "version": j.version,
                        "judge": {"score": j.score, "label": j.label, "reason": j.reason},
                        "reference": {
                            "score": r.score,
                            "label": r.label,
                            "by": list(r.authors),
                            "notes": list(r.notes),
                        },
                        "trace_id": j.trace_id,
                        "conversation_id": j.conversation_id,
                        "excerpt": texts.get(j.key, ""),
                    }
                )
            )
    else:
        for d in shown:
            j, r = d.pair.judge, d.pair.reference
            click.echo(f"{j.target_type}:{j.target_id}  ({j.agent or 'unnamed agent'}, version {j.version})")
            click.echo(f"  {d.why}")
            if j.reason:
                click.echo(f"  judge's reason: {' '.join(j.reason.split())}")
            if r.authors:
                click.echo(f"  labelled by: {', '.join(sorted(set(r.authors)))}")
            for note in r.notes:
                click.echo(f"  note: {note}")
            if j.trace_id:
                click.echo(f"  trace: {j.trace_id}")
            if texts.get(j.key):
                click.echo(f"  excerpt: {texts[j.key]}")
            click.echo("")
    click.echo(
        f"{len(found)} disagreement(s) among {len(pairs)} target(s) {judge} and {sources.reference_name(ref)} both judged"
        + (f"; showing {len(shown)}" if len(shown) < len(found) else ""),
        err=True,
    )
