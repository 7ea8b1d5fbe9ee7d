"""``run_evals``: run a target (an agent) over a data set and score every item."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracescorer.model import Message, Part
from tracescorer.scorers.agent_io import AgentInput
from tracescorer.scorers.errors import ScorerRunError
from tracescorer.scorers.types import ScorerLike, ScorerResult, ScorerRun

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
class Threshold:
    """A pass range for a scorer's average: ``min <= average <= max`` (either bound optional).

    ``{"threshold": 0.8}`` is ``Threshold(min=0.8)``; ``{"threshold": {"min": 0.2, "max": 0.6}}``
    a range. Bounds lie in 0..1.
    """

    min: float | None = None
    max: float | None = None

    def passes(self, value: float) -> bool:
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)


@dataclass(frozen=True, kw_only=True, slots=True)
class ScorerSummary:
    """Per scorer: the average score over scored items, and pass/fail of that average against
    the threshold (``None`` without a threshold, ``False`` when nothing was scored)."""

    scorer_id: str
    average: float | None
    threshold: Threshold | None
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
        return Message(
            role=str(reply.get("role") or "assistant"),
            content=content,
            parts=(Part(type="text", content=content),) if content else (),
        )
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


def _bound(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where} must be a number in 0..1, got {value!r}")
    number = float(value)
    if not 0.0 <= number <= 1.0:  # also refuses NaN
        raise ValueError(f"{where} must lie in 0..1, got {value!r}")
    return number


def parse_threshold(value: Any, scorer_id: str = "?") -> Threshold | None:
    """A threshold from a number (the minimum) or ``{"min": ..., "max": ...}``; ValueError
    naming the scorer when it is malformed or out of 0..1."""
    where = f"threshold of scorer {scorer_id!r}"
    if value is None:
        return None
    if isinstance(value, Threshold):
        return parse_threshold({"min": value.min, "max": value.max}, scorer_id)
    if isinstance(value, Mapping):
        unknown = set(value) - {"min", "max"}
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)} (use 'min' and/or 'max')")
        low = None if value.get("min") is None else _bound(value["min"], f"{where} min")
        high = None if value.get("max") is None else _bound(value["max"], f"{where} max")
        if low is None and high is None:
            raise ValueError(f"{where} needs 'min' and/or 'max'")
        if low is not None and high is not None and low > high:
            raise ValueError(f"{where}: min {low} is above max {high}")
        return Threshold(min=low, max=high)
    return Threshold(min=_bound(value, where))


def _normalise(scorers: Sequence[Any]) -> list[tuple[ScorerLike, Threshold | None]]:
    out: list[tuple[ScorerLike, Threshold | None]] = []
    for entry in scorers:
        if isinstance(entry, Mapping):
            if "scorer" not in entry:
                raise ValueError(f"a scorer entry needs 'scorer', got keys {sorted(entry)}")
            scorer = entry["scorer"]
            if not isinstance(scorer, ScorerLike):
                raise TypeError(f"{scorer!r} is not a scorer")
            out.append((scorer, parse_threshold(entry.get("threshold"), scorer.id)))
        elif isinstance(entry, ScorerLike):
            out.append((entry, None))
        else:
            raise TypeError(f"{entry!r} is neither a scorer nor {{'scorer': ..., 'threshold': ...}}")
    return out


def _turns(index: int, item: Mapping[str, Any]) -> list[Any]:
    if not isinstance(item, Mapping):
        raise ValueError(f"data item {index} must be a mapping with 'input' or 'inputs', got {type(item).__name__}")
    if "inputs" in item:
        inputs = item["inputs"]
        if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
            raise ValueError(f"data item {index}: 'inputs' must be a list of turns")
        if not inputs:
            raise ValueError(f"data item {index}: 'inputs' is empty (give at least one turn)")
        return list(inputs)
    if "input" in item:
        return [item["input"]]
    raise ValueError(f"data item {index} needs 'input' or 'inputs'")


async def _run_item(
    index: int, item: Mapping[str, Any], target: Target, scorers: list[tuple[ScorerLike, Threshold | None]]
) -> EvalItemResult:
    turns = _turns(index, item)
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
        input=AgentInput(input_messages=tuple(users)),
        output=tuple(outputs),
        ground_truth=item.get("ground_truth"),
        request_context=item.get("request_context"),
        metadata={"entity_type": "conversation" if len(turns) > 1 else "agent", "item": index},
    )
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
            passed[scorer.id] = threshold.passes(result.score)
    return EvalItemResult(index=index, run=run, results=results, errors=errors, passed=passed)


async def run_evals(
    *,
    data: Sequence[Mapping[str, Any]],
    target: Target,
    scorers: Sequence[ScorerLike | Mapping[str, Any]],
    concurrency: int = 4,
) -> EvalResult:
    """Run ``target`` on every item and score the outcome.

    Args:
        data: items ``{"input": text}`` (one turn) or ``{"inputs": [text, ...]}`` (multi-turn:
            each turn is sent with the history so far and ``run.output`` accumulates every
            assistant reply); optional ``ground_truth`` and ``request_context``.
        target: ``callable(messages) -> reply`` (sync or async), reply being text, a
            :class:`~tracescorer.model.Message` or ``{"role", "content"}``.
        scorers: scorers, or ``{"scorer": s, "threshold": t}`` to get pass/fail of the average:
            ``t`` a number (average >= t) or ``{"min": a, "max": b}`` (a <= average <= b),
            bounds in 0..1.
        concurrency: items processed at once.

    Raises ValueError before running anything when ``data`` or ``scorers`` is empty, an item
    has neither ``input`` nor a non-empty ``inputs`` list, or a threshold is malformed. A
    failing scorer is recorded in the item's ``errors`` (and counted), never raised; a failing
    target raises.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    if not callable(target):
        raise TypeError(f"target must be callable(messages) -> reply, got {type(target).__name__}")
    data = list(data)
    if not data:
        raise ValueError("data is empty: give at least one item ({'input': ...} or {'inputs': [...]})")
    for index, item in enumerate(data):
        _turns(index, item)
    normalised = _normalise(scorers)
    if not normalised:
        raise ValueError("scorers is empty: give at least one scorer")
    ids = [scorer.id for scorer, _ in normalised]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(
            f"scorer ids must be unique in one run_evals, got duplicates {duplicates} (prebuilt checks take id=...)"
        )
    gate = asyncio.Semaphore(concurrency)

    async def one(index: int, item: Mapping[str, Any]) -> EvalItemResult:
        async with gate:
            return await _run_item(index, item, target, normalised)

    items = await asyncio.gather(*(one(i, item) for i, item in enumerate(data)))
    summaries: dict[str, ScorerSummary] = {}
    for scorer, threshold in normalised:
        scores = [
            r.results[scorer.id].score
            for r in items
            if scorer.id in r.results and r.results[scorer.id].score is not None
        ]
        numeric = [s for s in scores if s is not None]
        average = sum(numeric) / len(numeric) if numeric else None
        summaries[scorer.id] = ScorerSummary(
            scorer_id=scorer.id,
            average=average,
            threshold=threshold,
            passed=None if threshold is None else (average is not None and threshold.passes(average)),
            scored=len(numeric),
            not_scorable=sum(
                1 for r in items if scorer.id in r.results and r.results[scorer.id].status == "not_scorable"
            ),
            errors=sum(1 for r in items if scorer.id in r.errors),
        )
    return EvalResult(items=tuple(items), scorers=summaries)


def run_evals_sync(**kwargs: Any) -> EvalResult:
    """:func:`run_evals` for synchronous code."""
    return asyncio.run(run_evals(**kwargs))
