"""Ids that carry from one command to the next: a trace, run, score or conversation id, whole
or as a unique prefix, names what a command works on.

An exact match wins over prefixes (conversation ``c1`` is not ambiguous beside ``c10``); when
one text names ids of several kinds that are the same string (a conversation id equal to its
trace id), the command's preferred kind wins; a prefix that starts ids of different values is
refused with the candidates listed. A whole 32-hex trace id is accepted as it is even when no run
of it is stored (``explain`` says what happened to it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from tracescorer.store.api import QueryResult, ReadStore

#: Shown in tables: hex ids cut to this many characters are unique prefixes in practice (48 bits).
SHORT = 12
_CANDIDATES = 10
_TRACE_ID = re.compile(r"^[0-9a-fA-F]{32}$")


@dataclass(frozen=True, slots=True)
class Ref:
    """One stored id and its kind: trace, run, conversation or score."""

    kind: str
    id: str


def short(value: str | None) -> str:
    """A hex id as tables show it: a prefix every command accepts."""
    return "" if not value else value[:SHORT]


async def resolve(reads: ReadStore, text: str, kinds: Sequence[str] = ("trace", "run", "conversation", "score")) -> Ref:
    """The one stored id of ``kinds`` (in order of preference) that ``text`` is or starts.

    Raises a ClickException naming the candidates when the prefix is ambiguous, or saying that
    nothing matched.
    """
    text = text.strip()
    if not text:
        raise click.BadParameter("an id may not be empty")
    exact = _refs(await reads.ids_equal(text, kinds))
    if exact:
        return _preferred(exact, kinds)
    result = await reads.ids_starting(text, kinds, _CANDIDATES * 4)
    found = _refs(result)
    if not found and "trace" in kinds:
        found = [Ref("trace", r[0]) for r in (await reads.assembled_trace_ids(text, _CANDIDATES)).rows]
    if not found:
        if "trace" in kinds and _TRACE_ID.match(text):
            return Ref("trace", text.lower())
        what = ", ".join(kinds[:-1]) + (" or " if len(kinds) > 1 else "") + kinds[-1]
        noun = f"{kinds[0]} id" if len(kinds) == 1 else "id"
        raise click.ClickException(f"unknown {noun} {text!r}: no stored {what} id is or starts with it")
    values = {r.id for r in found}
    if len(values) == 1:
        return _preferred(found, kinds)
    listed = ", ".join(f"{r.kind} {r.id}" for r in found[:_CANDIDATES])
    more = " …" if len(found) > _CANDIDATES or result.truncated else ""
    raise click.ClickException(
        f"ambiguous id {text!r}: it starts {len(found)}{'+' if more else ''} ids ({listed}{more}); give more characters"
    )


def _refs(result: QueryResult) -> list[Ref]:
    return [Ref(str(kind), str(value)) for kind, value in result.rows]


def _preferred(refs: list[Ref], kinds: Sequence[str]) -> Ref:
    return min(refs, key=lambda r: kinds.index(r.kind))


@dataclass(frozen=True, slots=True)
class ScoreTarget:
    """What a score is about."""

    conversation: bool
    run_id: str | None
    trace_id: str | None
    conversation_id: str | None


async def score_target(reads: ReadStore, score_id: str) -> ScoreTarget:
    rows = (await reads.score_target(score_id)).dicts()
    if not rows:
        raise click.ClickException(f"unknown score id {score_id!r}")
    r = rows[0]
    return ScoreTarget(
        conversation=r["entity_type"] == "conversation",
        run_id=r["run_id"],
        trace_id=r["trace_id"],
        conversation_id=r["conversation_id"],
    )


async def target_ids(reads: ReadStore, ref: Ref, scope: str) -> list[str]:
    """The run ids (``scope='run'``) or conversation ids a stored id stands for: a trace's runs
    or their conversations, a run or its conversation, a conversation or its runs, a score's
    target (or its runs / conversation)."""
    kind, value = ref.kind, ref.id
    if kind == "score":
        target = await score_target(reads, value)
        if target.conversation and target.conversation_id:
            kind, value = "conversation", target.conversation_id
        elif target.run_id:
            kind, value = "run", target.run_id
        else:
            return []
    if scope == "conversation" and kind == "conversation":
        return [value]
    runs = (await reads.runs_of(kind, value)).dicts()
    if scope == "run":
        return [r["run_id"] for r in runs]
    return list(dict.fromkeys(r["conversation_id"] for r in runs if r["conversation_id"]))
