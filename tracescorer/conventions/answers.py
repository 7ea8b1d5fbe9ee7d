"""Final answers given as tool calls: the answer a user saw, where the model gave it as a tool's argument.

Some agent frameworks end a run by having the model call a tool whose argument *is* the answer:
smolagents' ``final_answer`` (argument ``answer``), BeeAI's ``RequirementAgent`` ``final_answer``
(``FinalAnswerTool``, argument ``response``, or the whole argument object for a structured
answer). The model's last turn then has no text: the run's output is that argument, and a later
run's history shows it as the assistant turn the user saw (after the call and its tool result).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tracescorer.conventions.common import ASSISTANT, TOOL, loads_maybe, text_message
from tracescorer.model import Message

#: tool names that give the final answer (smolagents' and BeeAI's ``final_answer``)
FINAL_ANSWER_TOOLS = frozenset({"final_answer"})
#: the argument holding the answer: smolagents ``answer``, BeeAI ``response``
_ANSWER_KEYS = ("answer", "response")


def answer_text(arguments: Any) -> str | None:
    """The answer a final-answer call gives: its ``answer`` / ``response`` argument, else the
    arguments as JSON (a structured answer)."""
    data = loads_maybe(arguments)
    if isinstance(data, dict):
        data = next((data[key] for key in _ANSWER_KEYS if key in data), data)
    if data is None or data == "" or data == {}:
        return None
    return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)


def given_answer(message: Message) -> str | None:
    """The answer an assistant turn without text gives by calling a final-answer tool, if any."""
    if message.role != ASSISTANT or message.content:
        return None
    for call in message.tool_calls:
        if call.name in FINAL_ANSWER_TOOLS:
            return answer_text(call.arguments)
    return None


def with_answers(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with each final answer given as a tool call also as the assistant text the
    user saw, after the call's tool results."""
    out: list[Message] = []
    pending: str | None = None
    for msg in messages:
        if pending is not None and msg.role != TOOL:
            out.append(text_message(ASSISTANT, pending))
            pending = None
        out.append(msg)
        pending = given_answer(msg) or pending
    if pending is not None:
        out.append(text_message(ASSISTANT, pending))
    return out
