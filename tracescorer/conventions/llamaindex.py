"""LlamaIndex through ``openinference-instrumentation-llama-index``: an extension of OpenInference.

An agent workflow (``FunctionAgent``, ``ReActAgent``, ``AgentWorkflow``) is a CHAIN root
``<Class>.run`` over step spans (``BaseWorkflowAgent.setup_agent``, ``run_agent_step``,
``call_tool``, ...). Each model call is two LLM spans: ``<LLM>._prepare_chat_with_tools`` (it only
builds the request; its output is the reprs of the messages) and the call itself
(``<LLM>.chat`` / ``astream_chat`` / ...) with the flattened messages. The helper span is not a
model call. The agent's name is not an attribute: the workflow's events name it
(``current_agent_name='...'`` in the reprs of ``AgentInput`` / ``AgentOutput`` /
``AgentStream`` that the step spans record). A tool's output is LlamaIndex's ``ToolOutput``
(``{blocks, tool_name, raw_input, raw_output, is_error}``): the result is ``raw_output``.
Runs are labelled ``openinference``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tracescorer.conventions import openinference
from tracescorer.conventions.base import NOT_ONE, AgentInfo, Convention, NotOne, TraceFacts, TraceView
from tracescorer.model import Span

NAME = "llamaindex"
SCOPE = "openinference.instrumentation.llama_index"
_HELPERS = ("._prepare_chat_with_tools", "._prepare_chat")
_AGENT_NAME = re.compile(r"current_agent_name='([^'\\]{1,200})'")


def read_llm_call(span: Span, trace: TraceView) -> NotOne | None:
    """The request-building helper spans are not model calls (the call follows them)."""
    if span.scope.name == SCOPE and span.name.endswith(_HELPERS) and openinference.kind(span) == "LLM":
        return NOT_ONE
    return None


def read_root(span: Span, trace: TraceView) -> AgentInfo | None:
    """The workflow's root, named after the agent its steps' events name."""
    if span.scope.name != SCOPE:
        return None
    info = openinference.read_root(span, trace)
    if not isinstance(info, AgentInfo):
        return None
    if info.name is None:
        for child in trace.children.get(span.span_id, ()):
            for key in ("output.value", "input.value"):
                value = child.attributes.get(key)
                m = _AGENT_NAME.search(value) if isinstance(value, str) else None
                if m:
                    info.name = m.group(1)
                    break
            if info.name is not None:
                break
    # The root's own input/output are the workflow's start/stop events, not messages.
    info.given, info.new_input, info.output = [], [], []
    return info


def _tool_output(raw: Mapping[str, Any]) -> tuple[bool, Any, str | None]:
    if "tool_name" in raw and ("blocks" in raw or "content" in raw):
        return True, raw.get("raw_output"), None
    return False, None, None


def detect(facts: TraceFacts) -> float:
    return 0.81 if SCOPE in facts.scopes else 0.0


CONVENTION = Convention(
    name=NAME,
    label=openinference.NAME,
    detect=detect,
    llm_call=read_llm_call,
    root_agent=read_root,
    result_shapes={"raw_output": _tool_output},
    markers=(SCOPE.encode(),),
)
