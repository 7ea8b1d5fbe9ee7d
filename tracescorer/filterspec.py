"""The ``filter:`` key of a scorer binding, as it is written in YAML (validation only).

This model is what :mod:`tracescorer.config` needs to validate a configuration; it imports
nothing of the scoring stage, so ``check-config`` and the read commands load settings without
it. The evaluation of a filter against runs and conversations lives in
:mod:`tracescorer.scoring.filters` (:meth:`RunFilter.check` delegates there on first use).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

if TYPE_CHECKING:
    from tracescorer.model import AgentRun, Conversation

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
        from tracescorer.scoring.filters import check_condition

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
    _clauses: list[Any] | None = PrivateAttr(None)  # built on first use (scoring.filters)

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
        from tracescorer.scoring.filters import check_clauses, clauses_of

        if self._clauses is None:  # checked for every run and binding: the clauses are built once
            self._clauses = clauses_of(self)
        return check_clauses(self._clauses, target)

    def matches(self, target: AgentRun | Conversation) -> bool:
        """Whether ``target`` passes (``check(target) is None``)."""
        return self.check(target) is None
