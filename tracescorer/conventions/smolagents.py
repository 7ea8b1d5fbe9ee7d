"""smolagents through ``openinference-instrumentation-smolagents``: an extension of OpenInference.

The instrumentation names an agent's AGENT span ``<agent.name>.run`` (the class name for an
agent without a name) and records no ``agent.name``; ``input.value`` is the ``run()`` call's
arguments (``{"task", "stream", "reset", ...}``), ``output.value`` ``str()`` of its result.
Steps are ``Step N`` CHAIN spans, model calls LLM spans (``OpenAIModel.generate``, ...), tools
TOOL spans (``tool.name``); a managed agent runs inside its manager's step as an AGENT span of
its own (a nested run).

A code or tool-calling agent answers by calling the ``final_answer`` tool — its argument is the
answer, never assistant text (a ToolCallingAgent's last model turn is that tool call, a
CodeAgent's is the code that calls it). The run's answer is that argument (the ``final_answer``
TOOL span's ``answer``), else the agent span's output; the agent is named after the agent, not
the instrumented method. A tool span's input is the ``Tool.__call__`` record (``{"args",
"kwargs", "sanitize_inputs_outputs"}``): the arguments are the call's (a CodeAgent calls its
tools from code, so those executions are the only record of their arguments).

A later task (``reset=False``) gets the earlier tasks replayed, their final steps only as
``tool-call`` / ``tool-response`` turns (``Calling tools:`` and the calls' Python repr): the answer
such a step gave (a ``final_answer`` call's argument, or the last output of code calling
``final_answer(...)``) is added after it as the assistant turn the user saw, so the later run's
history reads question, answer, question.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracescorer.conventions import openinference, pyrepr
from tracescorer.conventions.answers import answer_text
from tracescorer.conventions.base import AgentInfo, Convention, LlmCall, NotOne, ToolExec, TraceFacts, TraceView
from tracescorer.conventions.calls import tool_arguments
from tracescorer.conventions.common import ASSISTANT, first_str, loads_maybe, text_message
from tracescorer.model import Message, Span

NAME = "smolagents"
SCOPE = "openinference.instrumentation.smolagents"
FINAL_ANSWER = "final_answer"
#: smolagents' own agent classes: the span of an agent without a name is ``<Class>.run``.
_CLASSES = frozenset({"CodeAgent", "ToolCallingAgent", "MultiStepAgent"})
_RECORD_KEYS = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})
#: how smolagents replays an earlier step's tool calls (``ActionStep.to_messages``), and what a
#: code step's observation ends with (the value of its last line: the answer, for a final step)
_CALLING, _LAST_OUTPUT = "Calling tools:\n", "Last output from code snippet:\n"


def agent_name(span_name: str) -> str | None:
    """The agent's name from its span name (``weather_scout.run`` -> ``weather_scout``)."""
    name = span_name.removesuffix(".run")
    return None if not name or name in _CLASSES else name


def _argument(value: Any) -> Any:
    """The ``answer`` argument of a ``final_answer`` call record (``{"args", "kwargs"}``)."""
    data = loads_maybe(value)
    if not isinstance(data, Mapping):
        return None
    kwargs = data.get("kwargs")
    if isinstance(kwargs, Mapping) and "answer" in kwargs:
        return kwargs["answer"]
    args = data.get("args")
    return args[0] if isinstance(args, list) and args else None


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return str(value)


def _answer(span: Span, trace: TraceView) -> list[Message]:
    """The run's answer: the last ``final_answer`` call of this agent (nested agents excluded),
    else the agent span's output."""
    answer: str | None = None
    own = trace.descendants(span, stop=lambda s: openinference.kind(s) == "AGENT")
    for s in own:
        if openinference.kind(s) == "TOOL" and first_str(s.attributes, "tool.name") == FINAL_ANSWER:
            answer = _as_text(_argument(s.attributes.get("input.value"))) or answer
    if answer is None:
        output = span.attributes.get("output.value")
        answer = output if isinstance(output, str) and output != openinference.REDACTED else None
    return [text_message(ASSISTANT, answer)] if answer else []


def read_agent(span: Span, trace: TraceView) -> AgentInfo | NotOne | None:
    info = openinference.scoped_agent(span, trace, SCOPE)
    if not isinstance(info, AgentInfo):
        return info
    info.name = first_str(span.attributes, "agent.name") or agent_name(span.name)
    info.wrapper = False
    info.answer = _answer(span, trace)
    return info


def _replayed_calls(msg: Message) -> list[Mapping[str, Any]]:
    """The ``function`` objects of a replayed ``tool-call`` turn (``Calling tools:`` and a list)."""
    if msg.role != "tool-call" or not msg.content.startswith(_CALLING):
        return []
    try:
        data = pyrepr.parse(msg.content[len(_CALLING) :])
    except pyrepr.ReprError:
        return []
    calls = data if isinstance(data, list) else []
    return [c["function"] for c in calls if isinstance(c, Mapping) and isinstance(c.get("function"), Mapping)]


def _replayed_answer(call: Message, response: Message | None) -> str | None:
    """The answer an earlier task's final step gave: a ``final_answer`` call's argument, or for a
    code step calling ``final_answer(...)`` its observation's last output."""
    for function in _replayed_calls(call):
        arguments = function.get("arguments")
        if function.get("name") == FINAL_ANSWER:
            return answer_text(arguments)
        if isinstance(arguments, str) and FINAL_ANSWER + "(" in arguments and response is not None:
            _, found, answer = response.content.rpartition(_LAST_OUTPUT)
            return (answer.strip() or None) if found else None
    return None


def with_replayed_answers(messages: Sequence[Message]) -> list[Message]:
    """The model's input with each earlier task's answer as the assistant turn the user saw, after
    the final step's tool turns (smolagents replays that step only as ``tool-call`` /
    ``tool-response`` turns, which are not text history)."""
    out: list[Message] = []
    i = 0
    while i < len(messages):
        msg = messages[i]
        out.append(msg)
        i += 1
        if msg.role != "tool-call":
            continue
        response = messages[i] if i < len(messages) and messages[i].role == "tool-response" else None
        answer = _replayed_answer(msg, response)
        if answer is None:
            continue
        if response is not None:
            out.append(response)
            i += 1
        out.append(text_message(ASSISTANT, answer))
    return out


def read_llm_call(span: Span, trace: TraceView) -> LlmCall | None:
    """A model call whose input replays earlier tasks: their answers read as assistant turns."""
    if span.scope.name != SCOPE:
        return None
    call = openinference.read_llm_call(span, trace)
    if call is not None:
        call.input = with_replayed_answers(call.input)
    return call


def read_tool(span: Span, trace: TraceView) -> ToolExec | None:
    """A tool span: its input is the ``Tool.__call__`` record (``{"args", "kwargs",
    "sanitize_inputs_outputs"}``), the arguments are the call's."""
    if span.scope.name != SCOPE:
        return None
    tool = openinference.read_tool(span, trace)
    args = tool.arguments if tool is not None else None
    if tool is not None and isinstance(args, Mapping) and "kwargs" in args and args.keys() <= _RECORD_KEYS:
        tool.arguments = tool_arguments({k: v for k, v in args.items() if k != "sanitize_inputs_outputs"})
    return tool


def detect(facts: TraceFacts) -> float:
    return 0.83 if SCOPE in facts.scopes else 0.0


CONVENTION = Convention(
    name=NAME,
    label=openinference.NAME,
    detect=detect,
    agent=read_agent,
    llm_call=read_llm_call,
    tool=read_tool,
    markers=(SCOPE.encode(),),
)
