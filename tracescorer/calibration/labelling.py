"""Human labels in: what a person wrote (a target, a scorer, a value, who, when, a note) turned into
:class:`~tracescorer.records.labels.LabelRecord` rows and stored.

Shared by ``tracescorer label`` (and its file import) and the ops API's ``POST /api/v1/labels``,
so both accept the same things and say the same when something is wrong.

A **target** is ``run:<run id>``, ``trace:<trace id>``, ``conversation:<id>`` or a bare id (looked
up as a run id, then a trace id, then a conversation id). A label is about a run or a
conversation, as the scorer scores them: for a scorer bound with ``scope: conversation`` a run
or trace names its conversation; for a run scorer a trace names its outermost run (several
outermost runs need ``run:<id>``). A **value** is ``pass``/``fail`` (``true``/``false`` too), a
number, or any other text, kept as a free label.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from tracescorer.records.labels import FAIL, PASS, LabelRecord, label_id
from tracescorer.store.api import LabelStore, ReadStore

MAX_LABEL_CHARS = 200
MAX_NOTE_CHARS = 4000
_KINDS = {"run": "run", "trace": "trace", "conversation": "conversation", "conv": "conversation"}
_TRUE = frozenset({"pass", "true", "yes"})
_FALSE = frozenset({"fail", "false", "no"})


class LabelError(ValueError):
    """A label cannot be stored; the message says which and why."""


class LabelInput(BaseModel):
    """One label as a person or a file gives it (extra keys, such as a queue file's context
    columns, are ignored)."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    target: str
    scorer: str
    value: str | float | bool | None = None
    by: str | None = None
    note: str | None = None
    at: str | float | None = None

    @field_validator("target", "scorer")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value:
            raise ValueError("must not be empty")
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """What a label is about, resolved against the stored runs."""

    type: str  # run | conversation
    id: str
    trace_id: str | None = None
    conversation_id: str | None = None

    def __str__(self) -> str:
        return f"{self.type}:{self.id}"


def parse_value(value: str | float | bool | None) -> tuple[str | None, float | None]:
    """``(label, score)`` of a value: pass/fail, a number, or a free label; raises LabelError."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise LabelError("value is missing (pass, fail, a number or a label)")
    if isinstance(value, bool):
        return (PASS if value else FAIL), None
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        text = value.strip()
        if text.lower() in _TRUE:
            return PASS, None
        if text.lower() in _FALSE:
            return FAIL, None
        try:
            number = float(text)
        except ValueError:
            if len(text) > MAX_LABEL_CHARS:
                raise LabelError(f"a free label is at most {MAX_LABEL_CHARS} characters") from None
            return text, None
    if not math.isfinite(number):
        raise LabelError(f"value {value!r} is not a finite number")
    return None, number


def parse_time(at: str | float | None, now: float | None = None) -> float:
    """When a label was given, epoch seconds: ISO 8601 (UTC if no zone), epoch seconds, or now."""
    if at is None or (isinstance(at, str) and not at.strip()):
        return dt.datetime.now(dt.UTC).timestamp() if now is None else now
    if isinstance(at, (int, float)):
        return float(at)
    try:
        return float(at)
    except ValueError:
        pass
    try:
        parsed = dt.datetime.fromisoformat(at.strip().replace("Z", "+00:00"))
    except ValueError:
        raise LabelError(f"at {at!r} is not an ISO 8601 time or epoch seconds") from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)).timestamp()


def parse_target(text: str) -> tuple[str | None, str]:
    """``(kind, id)``: kind ``run``/``trace``/``conversation``, or None for a bare id."""
    kind, sep, rest = text.partition(":")
    if sep and kind.lower() in _KINDS and rest.strip():
        return _KINDS[kind.lower()], rest.strip()
    return None, text.strip()


async def resolve(text: str, scope: str | None, reads: ReadStore) -> Target:
    """The run or conversation ``text`` names, as a scorer of ``scope`` (None: not known) scores it."""
    kind, ident = parse_target(text)
    rows = (await reads.target_runs(ident)).dicts()
    runs = [r for r in rows if r["run_id"] == ident] if kind in (None, "run") else []
    if not runs and kind in (None, "trace"):
        runs = [r for r in rows if r["trace_id"] == ident.lower()]
        kind = "trace" if runs else kind
    if not runs and kind in (None, "conversation"):
        runs = [r for r in rows if r["conversation_id"] == ident]
        kind = "conversation" if runs else kind
    else:
        kind = kind or "run"
    if not runs:
        what = {"run": "run id", "trace": "trace id", "conversation": "conversation id"}.get(
            kind or "", "run, trace or conversation id"
        )
        raise LabelError(f"target {text!r}: no stored run has this {what}")
    if scope == "conversation" or (scope is None and kind == "conversation"):
        conversations = sorted({r["conversation_id"] for r in runs if r["conversation_id"]})
        if len(conversations) != 1:
            raise LabelError(
                f"target {text!r}: the scorer scores conversations and this names "
                + (
                    "no conversation (its runs have no conversation id)"
                    if not conversations
                    else f"{len(conversations)}"
                )
            )
        return Target(type="conversation", id=conversations[0], conversation_id=conversations[0])
    if kind == "conversation" and len(runs) > 1:
        ids = ", ".join(f"run:{r['run_id']}" for r in runs[:5])
        raise LabelError(
            f"target {text!r}: the scorer scores runs and the conversation has {len(runs)}; name one ({ids}) "
            "or a trace (trace:<id>)"
        )
    if kind == "trace":
        outermost = [r for r in runs if r["outermost"]] or runs
        if len(outermost) > 1:
            ids = ", ".join(f"run:{r['run_id']}" for r in outermost[:5])
            raise LabelError(f"target {text!r}: the trace has {len(outermost)} outermost runs; name one ({ids})")
        runs = outermost
    run = runs[0]
    return Target(type="run", id=run["run_id"], trace_id=run["trace_id"], conversation_id=run["conversation_id"])


@dataclass(frozen=True, slots=True)
class Stored:
    """What became of a batch of labels: written, left out as older than the stored ones, blank."""

    written: int
    older: int
    blank: int
    labels: tuple[LabelRecord, ...]


def inputs(items: Sequence[Mapping[str, Any]], where: Callable[[int], str]) -> list[tuple[int, LabelInput]]:
    """Validated inputs with their position; raises LabelError naming the item (``where(i)``)."""
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise LabelError(f"{where(i)}: expected an object with target, scorer, value, by, note, at")
        try:
            out.append((i, LabelInput.model_validate(dict(item))))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "label"
            raise LabelError(f"{where(i)}: {field}: {first['msg']}") from None
    return out


async def build(
    items: Sequence[tuple[int, LabelInput]],
    *,
    scopes: Mapping[str, str],
    source: str,
    author: str | None,
    reads: ReadStore,
    where: Callable[[int], str],
    skip_blank: bool = False,
) -> tuple[list[LabelRecord], int]:
    """Label rows for validated inputs (``author``: when an item names nobody); the count of
    items left blank when ``skip_blank`` (a queue file's rows nobody filled in). Raises
    LabelError naming the first bad item."""
    records: list[LabelRecord] = []
    blank = 0
    cache: dict[tuple[str, str | None], Target] = {}
    for i, item in items:
        if skip_blank and (item.value is None or (isinstance(item.value, str) and not item.value)):
            blank += 1
            continue
        try:
            label, score = parse_value(item.value)
            who = item.by or author
            if not who:
                raise LabelError("by: who gave the label is required")
            scope = scopes.get(item.scorer)
            key = (item.target, scope)
            if key not in cache:
                cache[key] = await resolve(item.target, scope, reads)
            target = cache[key]
            note = item.note or None
            if note is not None and len(note) > MAX_NOTE_CHARS:
                raise LabelError(f"note: at most {MAX_NOTE_CHARS} characters")
            records.append(
                LabelRecord(
                    id=label_id(target.type, target.id, item.scorer, who),
                    target_type=target.type,
                    target_id=target.id,
                    scorer_id=item.scorer,
                    author=who,
                    label=label,
                    score=score,
                    note=note,
                    source=source,
                    labelled_at=parse_time(item.at),
                    trace_id=target.trace_id,
                    conversation_id=target.conversation_id,
                )
            )
        except LabelError as exc:
            raise LabelError(f"{where(i)}: {exc}") from None
    return records, blank


async def store(
    items: Sequence[Mapping[str, Any]],
    *,
    labels: LabelStore,
    scopes: Mapping[str, str],
    source: str,
    reads: ReadStore,
    author: str | None = None,
    where: Callable[[int], str] = lambda i: f"labels[{i}]",
    skip_blank: bool = False,
) -> Stored:
    """Validate, resolve and store labels, all or none; raises LabelError naming the bad item."""
    records, blank = await build(
        inputs(items, where),
        scopes=scopes,
        source=source,
        author=author,
        reads=reads,
        where=where,
        skip_blank=skip_blank,
    )
    written = await labels.write_labels(records) if records else 0
    unique = len({r.id for r in records})
    return Stored(written=written, older=unique - written, blank=blank, labels=tuple(records))


def answer(stored: Stored, items: Sequence[Mapping[str, Any]], scopes: Mapping[str, str]) -> dict[str, Any]:
    """What storing labels came to, as the ops API answers and the CLI reports it."""
    return {
        "written": stored.written,
        "older": stored.older,
        "blank": stored.blank,
        "unbound": unbound(items, scopes),
        "labels": [
            {
                "id": r.id,
                "target": f"{r.target_type}:{r.target_id}",
                "scorer": r.scorer_id,
                "by": r.author,
                "label": r.label,
                "score": r.score,
            }
            for r in stored.labels
        ],
    }


def unbound(items: Sequence[Mapping[str, Any]], scopes: Mapping[str, str]) -> list[str]:
    """Scorer ids of these items that no binding of the configuration has (a note, not an error:
    labels may be for another tool's evaluator or a scorer bound elsewhere)."""
    return sorted({str(i.get("scorer")) for i in items if isinstance(i, Mapping) and i.get("scorer") not in scopes})
