"""Evaluating ``RunFilter`` (the ``filter:`` key, modelled in :mod:`tracescorer.filterspec`).

A filter is a set of clauses, all of which must hold. :func:`check_filter` returns ``None``
when the target passes, else a short description of the first failing clause; that text is
stored in ``scoring_decisions.detail`` and printed by ``tracescorer explain``.

For a :class:`~tracescorer.model.Conversation`, the per-run clauses (``agent_name``,
``service_name``, ``convention``, each ``attributes`` entry) hold when any of its runs satisfies
them (each clause on its own); ``status`` is ``error`` when any run errored; the duration runs
from the first start to the last end; ``input_regex`` searches every user turn and
``output_regex`` every assistant message of the conversation.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from tracescorer.filterspec import AttributeCondition, Convention, RunFilter
from tracescorer.model import AgentRun, Conversation, Message

__all__ = ["AttributeCondition", "Convention", "RunFilter", "check_condition", "check_filter"]

Target = AgentRun | Conversation

_NANOS_PER_S = 1_000_000_000


def check_condition(cond: AttributeCondition, present: bool, value: Any) -> str | None:
    """None if an attribute (``present``, ``value``) satisfies ``cond``, else why not."""
    if cond.exists is not None:
        if present == cond.exists:
            return None
        return "missing" if cond.exists else f"present ({value!r}), expected absent"
    if not present:
        return "missing"
    if cond.pattern is not None:
        if cond.pattern.search(str(value)):
            return None
        return f"{value!r} does not match /{cond.pattern.pattern}/"
    if cond.in_ is not None:
        if any(_same(value, v) for v in cond.in_):
            return None
        return f"{value!r} not in {cond.in_!r}"
    if _same(value, cond.equals):
        return None
    return f"{value!r} != {cond.equals!r}"


def _same(actual: Any, expected: Any) -> bool:
    """Equality that keeps booleans apart from numbers (``True`` is not ``1`` here) and
    compares ints with floats numerically; a string never equals a number."""
    if isinstance(actual, bool) or isinstance(expected, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    if isinstance(actual, (int, float)) and isinstance(expected, (int, float)):
        return actual == expected
    return type(actual) is type(expected) and bool(actual == expected)


def _as_list(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def check_filter(spec: RunFilter, target: AgentRun | Conversation) -> str | None:
    """``None`` when ``target`` passes every clause of ``spec``, else a description of the
    first failing clause (e.g. ``agent_name 'billing' does not match 'support-*'``)."""
    return spec.check(target)


def check_clauses(clauses: Sequence[_Clause], target: AgentRun | Conversation) -> str | None:
    """The first failing clause's description, None when all hold."""
    runs = target.runs if isinstance(target, Conversation) else (target,)
    for clause in clauses:
        failure = clause(target, runs)
        if failure is not None:
            return failure
    return None


def clauses_of(spec: RunFilter) -> list[_Clause]:
    """The clauses in evaluation order (cheap checks first, message regexes last)."""
    clauses: list[_Clause] = []
    if spec.agent_name is not None:
        clauses.append(partial(_glob, "agent_name", _as_list(spec.agent_name), lambda r: r.agent_name))
    if spec.service_name is not None:
        clauses.append(partial(_glob, "service_name", _as_list(spec.service_name), lambda r: r.service_name))
    if spec.convention is not None:
        clauses.append(partial(_convention, _as_list(spec.convention)))
    if spec.has_conversation is not None:
        clauses.append(partial(_has_conversation, spec.has_conversation))
    if spec.status is not None:
        clauses.append(partial(_status, spec.status))
    if spec.min_duration_s is not None or spec.max_duration_s is not None:
        clauses.append(partial(_duration, spec.min_duration_s, spec.max_duration_s))
    for key, cond in spec.attributes.items():
        clauses.append(partial(_attribute, key, cond))
    if spec.input_pattern is not None:
        clauses.append(partial(_search, "input_regex", "input", spec.input_pattern, lambda t: t.input_messages))
    if spec.output_pattern is not None:
        clauses.append(partial(_search, "output_regex", "output", spec.output_pattern, lambda t: t.output))
    return clauses


_Clause = Callable[[Target, Sequence[AgentRun]], "str | None"]


def _distinct(values: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def _values(values: Sequence[Any]) -> str:
    """One value as its repr; a conversation's several runs' values as a list."""
    return repr(values[0]) if len(values) == 1 else f"(of its runs) {list(values)!r}"


def _show(patterns: Sequence[str]) -> str:
    return repr(patterns[0]) if len(patterns) == 1 else f"any of {list(patterns)!r}"


def _glob(
    field: str, patterns: Sequence[str], get: Callable[[AgentRun], str | None], target: Target, runs: Sequence[AgentRun]
) -> str | None:
    values = [get(r) for r in runs]
    if any(v is not None and fnmatch.fnmatchcase(v, p) for v in values for p in patterns):
        return None
    present = _distinct(v for v in values if v is not None)
    if not present:
        return f"{field} is not set; does not match {_show(patterns)}"
    return f"{field} {_values(present)} does not match {_show(patterns)}"


def _convention(wanted: Sequence[str], target: Target, runs: Sequence[AgentRun]) -> str | None:
    seen = _distinct(r.convention for r in runs)
    if any(c in wanted for c in seen):
        return None
    if not seen:
        return "convention unknown: the conversation has no runs"
    shown = repr(wanted[0]) if len(wanted) == 1 else f"one of {list(wanted)!r}"
    return f"convention {_values(seen)} is not {shown}"


def _has_conversation(wanted: bool, target: Target, runs: Sequence[AgentRun]) -> str | None:
    if isinstance(target, Conversation):
        return None if wanted else "has_conversation: the target is a conversation"
    if (target.conversation_id is not None) == wanted:
        return None
    if wanted:
        return "has_conversation: the run has no conversation id"
    return f"has_conversation: the run belongs to conversation {target.conversation_id!r}"


def _status(wanted: str, target: Target, runs: Sequence[AgentRun]) -> str | None:
    errored = sum(r.status == "error" for r in runs)
    status = "error" if errored else "ok"
    if status == wanted:
        return None
    if isinstance(target, Conversation):
        detail = f"{errored} of {len(runs)} run(s) errored" if errored else "no run errored"
        return f"status {status!r} is not {wanted!r} ({detail})"
    return f"status {status!r} is not {wanted!r}"


def _duration(low: float | None, high: float | None, target: Target, runs: Sequence[AgentRun]) -> str | None:
    if not runs:
        return "duration unknown: the conversation has no runs"
    seconds = (max(r.ended_at for r in runs) - min(r.started_at for r in runs)) / _NANOS_PER_S
    if low is not None and seconds < low:
        return f"duration {seconds:g}s is below min_duration_s {low:g}"
    if high is not None and seconds > high:
        return f"duration {seconds:g}s is above max_duration_s {high:g}"
    return None


def _attribute(key: str, cond: AttributeCondition, target: Target, runs: Sequence[AgentRun]) -> str | None:
    failures = []
    for run in runs:
        failure = check_condition(cond, key in run.attributes, run.attributes.get(key))
        if failure is None:
            return None
        failures.append(failure)
    if not failures:
        return f"attributes.{key}: the conversation has no runs"
    if len(runs) == 1:
        return f"attributes.{key}: {failures[0]}"
    return f"attributes.{key}: no run satisfies it ({'; '.join(_distinct(failures))})"


def _search(
    field: str,
    what: str,
    pattern: re.Pattern[str],
    get: Callable[[Target], Sequence[Message]],
    target: Target,
    runs: Sequence[AgentRun],
) -> str | None:
    texts = [m.content for m in get(target) if m.content]
    if any(pattern.search(text) for text in texts):
        return None
    if not texts:
        return f"{field}: no {what} message has text to match /{pattern.pattern}/"
    return f"{field}: no {what} message matches /{pattern.pattern}/"
