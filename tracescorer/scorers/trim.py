"""``filter_run``: a declarative ``prepare_run`` that trims a run's messages before scoring (Mastra's ``filterRun`` keep rules)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from tracescorer.model import Message, Part
from tracescorer.scorers.agent_io import AgentInput
from tracescorer.scorers.types import ScorerRun

_TOOL_PART_TYPES = ("tool_call", "tool_call_response")
# Mastra part type names accepted as aliases of the OTel GenAI part types of our messages.
_ALIASES = {"tool-invocation": ("tool_call", "tool_call_response"), "image": ("blob", "uri")}


def _expand(patterns: Sequence[str]) -> tuple[str, ...]:
    out: list[str] = []
    for pattern in patterns:
        out.extend(_ALIASES.get(pattern, (pattern,)))
    return tuple(out)


def _is_tool_part(part: Part) -> bool:
    return part.type in _TOOL_PART_TYPES


def _keep(message: Message, part_types: tuple[str, ...] | None, tool_names: tuple[str, ...] | None) -> bool:
    parts = message.parts
    if not parts:
        return True  # plain-content messages carry no part types to filter on: always kept
    matches_type = part_types is not None and any(p.type.startswith(pattern) for p in parts for pattern in part_types)
    if not any(_is_tool_part(p) for p in parts):
        return part_types is None or matches_type
    if tool_names is not None and not any(
        p.name is not None and p.name.startswith(name) for p in parts if _is_tool_part(p) for name in tool_names
    ):
        return False
    return part_types is None or matches_type


def filter_run(
    *,
    part_types: Sequence[str] | None = None,
    tool_names: Sequence[str] | None = None,
    max_remembered_messages: int | None = None,
    max_output_messages: int | None = None,
    drop_request_context: bool = False,
    drop_ground_truth: bool = False,
) -> Callable[[ScorerRun[Any, Any]], ScorerRun[Any, Any]]:
    """Build a ``prepare_run`` function that trims a run before scoring.

    Keep rules (Mastra's, applied to ``run.input.remembered_messages`` of agent runs and to a
    message-list ``run.output``):

    - ``part_types``: keep messages with at least one part whose type starts with one of the
      patterns (``text``, ``tool_call``, ``reasoning``...; Mastra's ``tool-invocation`` is an
      alias of the tool parts). Messages without parts (plain content) are always kept.
    - ``tool_names``: messages with tool parts are kept only if one of their tools' names
      starts with one of these; messages without tool parts are unaffected.
    - ``max_remembered_messages`` / ``max_output_messages``: keep the most recent N, after
      the filters above; ``0`` (like ``None``) means no limit, as in Mastra.
    - ``drop_request_context`` / ``drop_ground_truth``: set those fields to ``None``.
    """
    for key, value in (
        ("max_remembered_messages", max_remembered_messages),
        ("max_output_messages", max_output_messages),
    ):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ValueError(f"{key} must be a whole number >= 0 (0 = no limit), got {value!r}")
    types = _expand(part_types) if part_types is not None else None
    names = tuple(tool_names) if tool_names is not None else None
    filtering = types is not None or names is not None

    def trim(messages: Sequence[Any], limit: int | None) -> tuple[Any, ...]:
        kept = [m for m in messages if not isinstance(m, Message) or not filtering or _keep(m, types, names)]
        if limit and len(kept) > limit:  # None or 0: no limit
            kept = kept[len(kept) - limit :]
        return tuple(kept)

    def prepare(run: ScorerRun[Any, Any]) -> ScorerRun[Any, Any]:
        changes: dict[str, Any] = {}
        if drop_request_context:
            changes["request_context"] = None
        if drop_ground_truth:
            changes["ground_truth"] = None
        if isinstance(run.input, AgentInput):
            changes["input"] = dataclasses.replace(
                run.input, remembered_messages=trim(run.input.remembered_messages, max_remembered_messages)
            )
        if isinstance(run.output, (list, tuple)):
            changes["output"] = trim(run.output, max_output_messages)
        return dataclasses.replace(run, **changes)

    return prepare
