"""The ``filter:`` key of a scorer binding: its model (validated when the configuration loads) and
its evaluation against runs and conversations, in one place.

A filter is a set of clauses, all of which must hold. :meth:`RunFilter.check` returns ``None``
when the target passes, else a short description of the first failing clause; that text is
stored in ``scoring_decisions.detail`` and printed by ``tracescorer explain``.

For a :class:`~tracescorer.model.Conversation`, the per-run clauses (``agent_name``,
``service_name``, ``convention``, each ``attributes`` entry) hold when any of its runs satisfies
them (each clause on its own); ``status`` is ``error`` when any run errored; the duration runs
from the first start to the last end; ``input_regex`` searches every user turn and
``output_regex`` every assistant message of the conversation.

Imports stay light (pydantic and the domain model): the configuration and every read command
load it.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from tracescorer.model import AgentRun, Conversation, Message

__all__ = ["AttributeCondition", "Convention", "RunFilter", "check_condition"]

# A convention label runs carry (`filter: {convention: ...}`): one of tracescorer.conventions.names().
Convention = str
Scalar = str | int | float | bool


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """``re.compile`` with the error as a ValueError naming the pattern (pydantic reports it)."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None


class AttributeCondition(BaseModel):
    """One condition on an attribute value: exactly one of ``equals``, ``in``, ``regex``,
    ``exists``. A plain scalar in YAML is shorthand for ``{equals: value}``."""

    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True)

    equals: Scalar | None = None
    in_: Annotated[list[Scalar] | None, Field(alias="in")] = None
    regex: str | None = None
    exists: bool | None = None

    _pattern: re.Pattern[str] | None = PrivateAttr(None)

    @field_validator("regex")
    @classmethod
    def _valid_regex(cls, value: str | None) -> str | None:
        if value is not None:
            compile_pattern(value)
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> AttributeCondition:
        values = {"equals": self.equals, "in": self.in_, "regex": self.regex, "exists": self.exists}
        given = [k for k, v in values.items() if v is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of 'equals', 'in', 'regex', 'exists'"
                + (f" (got {', '.join(given)})" if given else "")
            )
        return self

    def model_post_init(self, context: Any) -> None:
        if self.regex is not None:
            self._pattern = compile_pattern(self.regex)

    @property
    def pattern(self) -> re.Pattern[str] | None:
        """The compiled ``regex`` (None for the other kinds of condition)."""
        return self._pattern

    def check(self, present: bool, value: Any) -> str | None:
        """None if an attribute (``present``, ``value``) satisfies the condition, else why not."""
        return check_condition(self, present, value)


class RunFilter(BaseModel):
    """Conditions a run or conversation must meet to be scored by a binding (all must hold).

    Every field is optional; an empty filter lets everything through. Globs use
    :func:`fnmatch.fnmatchcase` (case-sensitive; ``*``, ``?``, ``[seq]``); regexes use
    :func:`re.search` (add ``(?i)`` for case-insensitive matching).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_name: Annotated[
        str | list[str] | None, Field(description="glob(s) on the agent name; a run without a name never matches")
    ] = None
    service_name: Annotated[str | list[str] | None, Field(description="glob(s) on service.name")] = None
    has_conversation: Annotated[
        bool | None, Field(description="whether the run belongs to a conversation (always true for one)")
    ] = None
    status: Literal["ok", "error"] | None = None
    min_duration_s: Annotated[float | None, Field(ge=0)] = None
    max_duration_s: Annotated[float | None, Field(ge=0)] = None
    attributes: Annotated[
        dict[str, AttributeCondition], Field(description="run attribute key -> value, or {equals|in|regex|exists}")
    ] = {}
    input_regex: Annotated[str | None, Field(description="searched in each input (user) message")] = None
    output_regex: Annotated[str | None, Field(description="searched in each output message")] = None
    convention: Annotated[
        Convention | list[Convention] | None,
        Field(description="convention label(s) runs carry (tracescorer.conventions.names())"),
    ] = None

    _input: re.Pattern[str] | None = PrivateAttr(None)
    _output: re.Pattern[str] | None = PrivateAttr(None)
    _clauses: list[Any] | None = PrivateAttr(None)  # built on first use (clauses_of)

    @field_validator("agent_name", "service_name", "convention")
    @classmethod
    def _non_empty_list(cls, value: Any) -> Any:
        if isinstance(value, list) and not value:
            raise ValueError("give at least one value (or leave the key out)")
        return value

    @field_validator("convention")
    @classmethod
    def _known_convention(cls, value: str | list[str] | None) -> str | list[str] | None:
        if value is None:
            return value
        from tracescorer import conventions  # only when a filter names one: config loads stay light

        known = conventions.names()
        unknown = [v for v in ([value] if isinstance(value, str) else value) if v not in known]
        if unknown:
            raise ValueError(f"unknown convention {', '.join(map(repr, unknown))}; known: {', '.join(known)}")
        return value

    @field_validator("input_regex", "output_regex")
    @classmethod
    def _valid_regex(cls, value: str | None) -> str | None:
        if value is not None:
            compile_pattern(value)
        return value

    @field_validator("attributes", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value  # pydantic reports the type error
        out: dict[Any, Any] = {}
        for key, cond in value.items():
            if cond is None:
                raise ValueError(f"{key}: null is not a condition; use {{exists: false}}")
            if isinstance(cond, (list, tuple)):
                raise ValueError(f"{key}: a list is not a condition; use {{in: [...]}}")
            out[key] = {"equals": cond} if isinstance(cond, (str, int, float, bool)) else cond
        return out

    @model_validator(mode="after")
    def _duration_range(self) -> RunFilter:
        if (
            self.min_duration_s is not None
            and self.max_duration_s is not None
            and self.min_duration_s > self.max_duration_s
        ):
            raise ValueError("min_duration_s is greater than max_duration_s")
        return self

    def model_post_init(self, context: Any) -> None:
        self._input = compile_pattern(self.input_regex) if self.input_regex is not None else None
        self._output = compile_pattern(self.output_regex) if self.output_regex is not None else None

    @property
    def input_pattern(self) -> re.Pattern[str] | None:
        return self._input

    @property
    def output_pattern(self) -> re.Pattern[str] | None:
        return self._output

    @property
    def is_empty(self) -> bool:
        """True when the filter has no clause (everything passes)."""
        return not self.model_dump(exclude_defaults=True)

    def check(self, target: AgentRun | Conversation) -> str | None:
        """``None`` when ``target`` passes every clause, else a description of the first failing
        clause (e.g. ``agent_name 'billing' does not match 'support-*'``)."""
        if self._clauses is None:  # checked for every run and binding: the clauses are built once
            self._clauses = clauses_of(self)
        return check_clauses(self._clauses, target)

    def matches(self, target: AgentRun | Conversation) -> bool:
        """Whether ``target`` passes (``check(target) is None``)."""
        return self.check(target) is None


# --- evaluation ----------------------------------------------------------------------------------

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
