"""``tracescorer label`` (one label, or a CSV/JSON-lines import) and ``tracescorer label-queue``.

Labels go through the running daemon's ops API (``POST /api/v1/labels``, the same checks), or,
when no daemon runs, into the store directly.
"""

from __future__ import annotations

import getpass
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tracescorer import control
from tracescorer.commands.common import config_option, load, parse_since

if TYPE_CHECKING:
    from tracescorer.calibration.labelling import Stored
    from tracescorer.calibration.queue import Pick
    from tracescorer.config import Settings
    from tracescorer.store.api import ReadStore

AUTHOR_ENV = "TRACESCORER_LABEL_BY"


def default_author() -> str | None:
    """Who labels when ``--by`` is not given: ``$TRACESCORER_LABEL_BY``, else the login name."""
    if os.environ.get(AUTHOR_ENV, "").strip():
        return os.environ[AUTHOR_ENV].strip()
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def _scopes(settings: Settings) -> dict[str, str]:
    return {b.id: b.scope for b in settings.scorers}


def _remote(info: control.ServeInfo, payload: dict[str, Any]) -> dict[str, Any]:
    from tracescorer.calibration.routes import LABELS_PATH

    try:
        return control.call_daemon(info, "POST", LABELS_PATH, payload)
    except control.RemoteQueryError as exc:
        raise click.ClickException(str(exc)) from None


def _local(settings: Settings, items: list[dict[str, Any]], payload: dict[str, Any], names: list[str] | None) -> Stored:
    """No daemon runs: open the store, resolve and write the labels, close it."""
    import asyncio

    from tracescorer.calibration import labelling
    from tracescorer.lifecycle import Stages
    from tracescorer.metrics import Metrics
    from tracescorer.store.api import StoreError
    from tracescorer.store.factory import build_stores

    async def go() -> Stored:
        stores = build_stores(settings, Metrics(), owner="tracescorer-label", maintenance=False)
        stages = Stages(lambda: time.monotonic() + 30.0)
        try:
            for component in stores.components:
                await stages.enter(component)
            return await labelling.store(
                items,
                labels=stores.labels,
                scopes=_scopes(settings),
                source=payload["source"],
                reads=stores.reads,
                author=payload.get("by"),
                where=(lambda i: names[i]) if names else (lambda i: f"label {i + 1}"),
                skip_blank=bool(payload.get("skip_blank")),
            )
        finally:
            await stages.aclose()

    try:
        return asyncio.run(go())
    except labelling.LabelError as exc:
        raise click.ClickException(str(exc)) from None
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None


def _send(
    settings: Settings, items: list[dict[str, Any]], payload: dict[str, Any], names: list[str] | None
) -> dict[str, Any]:
    """Store labels through the daemon or directly; the answer as the ops API gives it."""
    from tracescorer.calibration import labelling

    info = control.read_serve_info(settings.store.path)
    if info is not None:
        return _remote(info, {**payload, "labels": items, **({"names": names} if names else {})})
    return labelling.answer(_local(settings, items, payload, names), items, _scopes(settings))


def _unbound_note(answer: dict[str, Any]) -> None:
    for scorer in answer.get("unbound") or []:
        click.echo(
            f"note: no binding of this configuration has id {scorer!r}: the label is kept for it "
            "(another tool's evaluator, or a scorer bound elsewhere)",
            err=True,
        )


@click.command()
@config_option
@click.argument("target", required=False)
@click.option("--scorer", "scorer_id", help="The scorer (or external evaluator) the label is for.")
@click.option("--value", help="pass, fail, a number, or a free label.")
@click.option("--by", "author", help=f"Who gives the label (default: ${AUTHOR_ENV}, else the login name).")
@click.option("--note", help="Why: kept beside the label, shown by `disagreements`.")
@click.option("--at", "at", help="When the label was given (ISO 8601; default now).")
@click.option(
    "--import",
    "import_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Import labels from a CSV or JSON-lines file (columns target, scorer, value, by, note, at; "
    "a label-queue file once filled in). Rows left without a value are skipped.",
)
def label(
    config_path: str | None,
    target: str | None,
    scorer_id: str | None,
    value: str | None,
    author: str | None,
    note: str | None,
    at: str | None,
    import_path: str | None,
) -> None:
    """Label a run or conversation for a scorer: TARGET is run:<id>, trace:<id>, conversation:<id>
    or a bare id. A newer label from the same person replaces the older one."""
    settings = load(config_path)
    who = author or default_author()
    if import_path is not None:
        if target or value is not None:
            raise click.UsageError("give TARGET with --value, or --import FILE, not both")
        from tracescorer.calibration import labelfile
        from tracescorer.calibration.labelling import LabelError

        try:
            rows, where = labelfile.read(import_path)
        except LabelError as exc:
            raise click.ClickException(str(exc)) from None
        if not rows:
            raise click.ClickException(f"{import_path}: no labels in the file")
        if scorer_id:
            rows = [{**r, "scorer": r.get("scorer") or scorer_id} for r in rows]
        payload = {"source": f"import:{Path(import_path).name}", "by": who, "skip_blank": True}
        answer = _send(settings, rows, payload, [where(i) for i in range(len(rows))])
        _unbound_note(answer)
        extra = []
        if answer["blank"]:
            extra.append(f"{answer['blank']} left blank")
        if answer["older"]:
            extra.append(f"{answer['older']} older than the stored label of the same person")
        click.echo(
            f"imported {answer['written']} label(s) from {import_path}" + (f" ({'; '.join(extra)})" if extra else "")
        )
        return
    if not target or not scorer_id or value is None:
        raise click.UsageError("give TARGET, --scorer and --value (or --import FILE)")
    item = {"target": target, "scorer": scorer_id, "value": value, "by": who, "note": note, "at": at}
    answer = _send(settings, [item], {"source": "cli", "by": who}, None)
    _unbound_note(answer)
    stored = answer["labels"][0]
    shown = stored["label"] if stored["label"] is not None else f"{stored['score']:g}"
    if answer["written"]:
        click.echo(f"labelled {stored['target']} for {stored['scorer']}: {shown} (by {stored['by']})")
    else:
        click.echo(f"kept the newer label {stored['by']} gave {stored['target']} for {stored['scorer']} earlier")


@click.command("label-queue")
@config_option
@click.option("--scorer", "scorer_id", required=True, help="The scorer (or external:<name>) to find targets for.")
@click.option("-n", "count", type=click.IntRange(min=1), default=50, show_default=True, help="Targets to pick.")
@click.option("--since", default="30d", show_default=True, help="Scores updated after this (30m, 2h, 7d or ISO 8601).")
@click.option(
    "--against",
    multiple=True,
    help="Another evaluator (scorer:<id> or external:<name>); targets where it disagrees come first.",
)
@click.option("--output", "-o", default="-", show_default=True, help="The file to write (- for standard output).")
@click.option(
    "--format", "fmt", type=click.Choice(["csv", "jsonl"]), default=None, help="Default: from the file name, else csv."
)
@click.option("--seed", type=int, default=1, show_default=True, help="The same data and seed pick the same targets.")
def label_queue(
    config_path: str | None,
    scorer_id: str,
    count: int,
    since: str,
    against: tuple[str, ...],
    output: str,
    fmt: str | None,
    seed: int,
) -> None:
    """Pick unlabelled targets for a reviewer: stratified by score, disagreements between
    evaluators first; fill in `value` (and `by`, `note`) and import with `label --import`."""
    from tracescorer.calibration import agreement, labelfile, queue, sources
    from tracescorer.calibration.excerpts import excerpts
    from tracescorer.calibration.labelling import LabelError
    from tracescorer.commands.reads import reading

    settings = load(config_path)
    start = parse_since(since)
    try:
        wanted = sources.parse_judge(scorer_id)
        references = [other for spec in against if (other := sources.parse_reference(spec)) is not None]
    except sources.SourceError as exc:
        raise click.ClickException(str(exc)) from None

    async def read(
        reads: ReadStore,
    ) -> tuple[sources.Judge, list[agreement.Verdict], set[agreement.Key], list[Pick], dict[agreement.Key, str]]:
        judge, judged = await sources.judge_verdicts(reads, wanted, start)
        labelled = set(await sources.reference_for(reads, judge, None, None))
        others = {}
        for other in references:
            _, found = await sources.judge_verdicts(reads, other, start)
            others[str(other)] = agreement.references_from_verdicts(found)
        picks = queue.pick(judged, labelled, count, against=others, seed=seed)
        return judge, judged, labelled, picks, await excerpts(reads, [p.verdict for p in picks])

    judge, judged, labelled, picks, texts = reading(settings, read)
    rows = [
        {
            "target": f"{p.verdict.target_type}:{p.verdict.target_id}",
            "scorer": judge.id,
            "value": "",
            "by": "",
            "note": "",
            "at": "",
            "judge_score": p.verdict.score,
            "judge_label": p.verdict.label,
            "scorer_version": p.verdict.version,
            "stratum": p.stratum + 1,
            "disagreeing": "; ".join(p.disagreeing),
            "judge_reason": p.verdict.reason,
            "trace_id": p.verdict.trace_id,
            "conversation_id": p.verdict.conversation_id,
            "agent": p.verdict.agent,
            "excerpt": texts.get(p.verdict.key, ""),
        }
        for p in picks
    ]
    chosen = fmt or ("csv" if output == "-" else labelfile.file_format(output))
    if output == "-":
        click.echo(labelfile.render(rows, chosen), nl=False)
    else:
        try:
            labelfile.write(output, rows, chosen)
        except LabelError as exc:
            raise click.ClickException(str(exc)) from None
    unlabelled = sum(1 for v in judged if v.key not in labelled)
    click.echo(
        f"picked {len(rows)} of {unlabelled} unlabelled target(s) scored by {judge} "
        f"({len(judged) - unlabelled} already labelled)" + ("" if output == "-" else f"; wrote {output}"),
        err=True,
    )
