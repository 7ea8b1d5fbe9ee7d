"""``run_evals``: run a target (an agent) over a data set and score every item."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracescorer.model import Message, Part
from tracescorer.scoring.agent_io import AgentInput
from tracescorer.scoring.errors import ScorerRunError
from tracescorer.scoring.types import ScorerLike, ScorerResult, ScorerRun

Target = Callable[[list[Message]], Any]
"""Gets the message list so far; returns the assistant reply (text, Message or dict), or an
awaitable of it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class EvalItemResult:
    """One data item: the scored run, and per scorer id its result (or the error text)."""

    index: int
    run: ScorerRun[AgentInput, tuple[Message, ...]]
    results: Mapping[str, ScorerResult]
    errors: Mapping[str, str] = field(default_factory=dict)
    passed: Mapping[str, bool] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class ScorerSummary:
    """Per scorer: the average score over scored items, and pass/fail against the threshold."""

    scorer_id: str
    average: float | None
    threshold: float | None
    passed: bool | None
    scored: int
    not_scorable: int
    errors: int


@dataclass(frozen=True, kw_only=True, slots=True)
class EvalResult:
    """What :func:`run_evals` returns."""

    items: tuple[EvalItemResult, ...]
    scorers: Mapping[str, ScorerSummary]

    @property
    def passed(self) -> bool:
        """True when every scorer with a threshold passed."""
        return all(s.passed is not False for s in self.scorers.values())


def _to_message(reply: Any) -> Message:
    if isinstance(reply, Message):
        return reply
    if isinstance(reply, str):
        return Message(role="assistant", content=reply, parts=(Part(type="text", content=reply),))
    if isinstance(reply, Mapping):
        content = str(reply.get("content") or "")
        return Message(role=str(reply.get("role") or "assistant"), content=content,
                       parts=(Part(type="text", content=content),) if content else ())
    raise TypeError(f"target must return text, a Message or a dict, got {type(reply).__name__}")


def _user(text: Any) -> Message:
    if isinstance(text, Message):
        return text
    content = str(text)
    return Message(role="user", content=content, parts=(Part(type="text", content=content),))


async def _call_target(target: Target, messages: list[Message]) -> Message:
    reply = target(list(messages))
    if inspect.isawaitable(reply):
        reply = await reply
    return _to_message(reply)


def _normalise(scorers: Sequence[Any]) -> list[tuple[ScorerLike, float | None]]:
    out: list[tuple[ScorerLike, float | None]] = []
    for entry in scorers:
        if isinstance(entry, Mapping):
            threshold = entry.get("threshold")
            out.append((entry["scorer"], float(threshold) if threshold is not None else None))
        else:
            out.append((entry, None))
    return out


async def _run_item(index: int, item: Mapping[str, Any], target: Target,
                    scorers: list[tuple[ScorerLike, float | None]]) -> EvalItemResult:
    if "inputs" in item:
        turns = list(item["inputs"])
    elif "input" in item:
        turns = [item["input"]]
    else:
        raise ValueError(f"data item {index} needs 'input' or 'inputs'")
    history: list[Message] = []
    users: list[Message] = []
    outputs: list[Message] = []
    for turn in turns:
        user = _user(turn)
        users.append(user)
        history.append(user)
        reply = await _call_target(target, history)
        history.append(reply)
        outputs.append(reply)
    run: ScorerRun[AgentInput, tuple[Message, ...]] = ScorerRun(
        input=AgentInput(input_messages=tuple(users)), output=tuple(outputs),
        ground_truth=item.get("ground_truth"), request_context=item.get("request_context"),
        metadata={"entity_type": "conversation" if len(turns) > 1 else "agent", "item": index})
    results: dict[str, ScorerResult] = {}
    errors: dict[str, str] = {}
    passed: dict[str, bool] = {}
    for scorer, threshold in scorers:
        try:
            result = await scorer.run(run)
        except ScorerRunError as exc:
            errors[scorer.id] = str(exc)
            continue
        results[scorer.id] = result
        if threshold is not None and result.score is not None:
            passed[scorer.id] = result.score >= threshold
    return EvalItemResult(index=index, run=run, results=results, errors=errors, passed=passed)


async def run_evals(*, data: Sequence[Mapping[str, Any]], target: Target,
                    scorers: Sequence[ScorerLike | Mapping[str, Any]],
                    concurrency: int = 4) -> EvalResult:
    """Run ``target`` on every item and score the outcome.

    Args:
        data: items ``{"input": text}`` (one turn) or ``{"inputs": [text, ...]}`` (multi-turn:
            each turn is sent with the history so far and ``run.output`` accumulates every
            assistant reply); optional ``ground_truth`` and ``request_context``.
        target: ``callable(messages) -> reply`` (sync or async), reply being text, a
            :class:`~tracescorer.model.Message` or ``{"role", "content"}``.
        scorers: scorers, or ``{"scorer": s, "threshold": t}`` to get pass/fail (average >= t).
        concurrency: items processed at once.

    A failing scorer is recorded in the item's ``errors`` (and counted), never raised; a
    failing target raises.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    normalised = _normalise(scorers)
    ids = [scorer.id for scorer, _ in normalised]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"scorer ids must be unique in one run_evals, got duplicates {duplicates}"
                         " (prebuilt checks take id=...)")
    gate = asyncio.Semaphore(concurrency)

    async def one(index: int, item: Mapping[str, Any]) -> EvalItemResult:
        async with gate:
            return await _run_item(index, item, target, normalised)

    items = await asyncio.gather(*(one(i, item) for i, item in enumerate(data)))
    summaries: dict[str, ScorerSummary] = {}
    for scorer, threshold in normalised:
        scores = [r.results[scorer.id].score for r in items if scorer.id in r.results
                  and r.results[scorer.id].score is not None]
        numeric = [s for s in scores if s is not None]
        average = sum(numeric) / len(numeric) if numeric else None
        summaries[scorer.id] = ScorerSummary(
            scorer_id=scorer.id, average=average, threshold=threshold,
            passed=None if threshold is None else (average is not None and average >= threshold),
            scored=len(numeric),
            not_scorable=sum(1 for r in items if scorer.id in r.results
                             and r.results[scorer.id].status == "not_scorable"),
            errors=sum(1 for r in items if scorer.id in r.errors))
    return EvalResult(items=tuple(items), scorers=summaries)


def run_evals_sync(**kwargs: Any) -> EvalResult:
    """:func:`run_evals` for synchronous code."""
    return asyncio.run(run_evals(**kwargs))
