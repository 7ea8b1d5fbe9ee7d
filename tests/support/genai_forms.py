"""One agent's turns in the two GenAI forms a fleet sends at once, emitted with the OTel SDK the way
the instrumentations emit them.

- The **old form** (semantic conventions 1.36 and before, what an instrumentation keeps unless
  ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``): an ``invoke_agent`` CLIENT span
  with ``gen_ai.system``, ``gen_ai.agent.id``; ``chat`` spans whose messages are the per-message
  events (``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message``,
  ``gen_ai.tool.message``, ``gen_ai.choice``) as log records, as opentelemetry-instrumentation-openai-v2
  writes them by default; ``finish_reason`` on the choice.
- The **new form** (the GenAI conventions' own repository): spans from OpenTelemetry's
  ``opentelemetry-util-genai`` (the library the contrib GenAI instrumentations emit through) —
  ``invoke_workflow``, an INTERNAL ``invoke_agent`` without ``gen_ai.agent.id`` or
  ``gen_ai.provider.name``, ``chat`` inference spans with ``gen_ai.input.messages`` /
  ``gen_ai.output.messages`` / ``gen_ai.system_instructions`` (JSON strings on spans, structured
  on the ``gen_ai.client.inference.operation.details`` event with ``EVENT_ONLY``), ``execute_tool``;
  a ``plan`` span around the model call that plans, and ``gen_ai.usage.cache_write.input_tokens``.

Content capture follows ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (the caller sets it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry._logs import LogRecord
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind
from opentelemetry.util.genai.handler import TelemetryHandler
from opentelemetry.util.genai.types import InputMessage, OutputMessage, Text, ToolCallRequest, ToolCallResponse

MODEL = "gpt-4o-mini"
SYSTEM = "You are a weather assistant."
TOOL, ARGS, RESULT = "get_weather", {"city": "Paris"}, "sunny, 22C"
#: the history a turn was given: (role, text) pairs, user and assistant turns before the question
History = Sequence[tuple[str, str]]


# --- the old form -----------------------------------------------------------------------------


def _event(logger: Any, name: str, body: dict[str, Any]) -> None:
    logger.emit(LogRecord(event_name=name, body=body, attributes={"gen_ai.system": "openai"}))


def _old_chat(tracer: Any, logger: Any, messages: list[tuple[str, Any]], reply: dict[str, Any], finish: str) -> None:
    """One ``chat`` span of the old form: its messages as events in the span's context."""
    with tracer.start_as_current_span(
        f"chat {MODEL}",
        kind=SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": MODEL,
            "gen_ai.response.model": MODEL,
            "gen_ai.response.finish_reasons": (finish,),
            "gen_ai.usage.input_tokens": 20,
            "gen_ai.usage.output_tokens": 5,
        },
    ):
        for role, body in messages:
            _event(logger, f"gen_ai.{role}.message", body)
        _event(logger, "gen_ai.choice", {"index": 0, "finish_reason": finish, "message": reply})


def _old_chats(tracer: Any, logger: Any, question: str, answer: str, history: History, call_id: str) -> None:
    given: list[tuple[str, Any]] = [("system", {"content": SYSTEM})]
    given += [(role, {"content": text}) for role, text in history]
    given.append(("user", {"content": question}))
    call = {"id": call_id, "type": "function", "function": {"name": TOOL, "arguments": json.dumps(ARGS)}}
    _old_chat(tracer, logger, given, {"role": "assistant", "tool_calls": [call]}, "tool_calls")
    with tracer.start_as_current_span(
        f"execute_tool {TOOL}",
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": TOOL, "gen_ai.tool.call.id": call_id},
    ):
        pass
    given += [("assistant", {"tool_calls": [call]}), ("tool", {"content": RESULT, "id": call_id})]
    _old_chat(tracer, logger, given, {"role": "assistant", "content": answer}, "stop")


def old_form_turn(
    tracer_provider: TracerProvider,
    logger_provider: LoggerProvider,
    *,
    agent: str,
    conversation_id: str,
    question: str,
    answer: str,
    history: History = (),
    call_id: str = "call_old_1",
) -> None:
    """One turn of ``agent`` as an instrumentation on semantic conventions 1.36 emits it."""
    tracer = tracer_provider.get_tracer("app.agents", "0.9.0")
    logger = logger_provider.get_logger("opentelemetry.instrumentation.openai_v2", "2.1b0")
    with tracer.start_as_current_span(
        f"invoke_agent {agent}",
        kind=SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.system": "openai",
            "gen_ai.agent.name": agent,
            "gen_ai.agent.id": f"asst_{agent}",
            "gen_ai.conversation.id": conversation_id,
        },
    ):
        _old_chats(tracer, logger, question, answer, history, call_id)


# --- the new form -----------------------------------------------------------------------------


def _messages(history: History, question: str) -> list[InputMessage]:
    return [InputMessage(role=role, parts=[Text(content=text)]) for role, text in (*history, ("user", question))]


def _new_chat(handler: TelemetryHandler, given: list[InputMessage], reply: OutputMessage) -> None:
    with handler.inference("openai", request_model=MODEL) as call:
        call.system_instruction = [Text(content=SYSTEM)]
        call.input_messages = list(given)
        call.output_messages = [reply]
        call.response_model_name = MODEL
        call.input_tokens, call.output_tokens = 20, 5
        call.attributes["gen_ai.usage.cache_write.input_tokens"] = 7


def _new_chats(
    handler: TelemetryHandler, tracer: Any, agent: str, question: str, answer: str, history: History, call_id: str
) -> None:
    given = _messages(history, question)
    request = ToolCallRequest(arguments=ARGS, name=TOOL, id=call_id)
    plan = {"gen_ai.operation.name": "plan", "gen_ai.agent.name": agent}
    with tracer.start_as_current_span(f"plan {agent}", attributes=plan):
        _new_chat(handler, given, OutputMessage(role="assistant", parts=[request], finish_reason="tool_call"))
    with handler.tool(TOOL, tool_call_id=call_id) as tool:
        tool.arguments = ARGS
        tool.tool_result = RESULT
    given += [
        InputMessage(role="assistant", parts=[request]),
        InputMessage(role="tool", parts=[ToolCallResponse(response=RESULT, id=call_id)]),
    ]
    _new_chat(handler, given, OutputMessage(role="assistant", parts=[Text(content=answer)], finish_reason="stop"))


@contextmanager
def workflow(tracer_provider: TracerProvider, logger_provider: LoggerProvider, name: str) -> Iterator[None]:
    """An ``invoke_workflow`` span (opentelemetry-util-genai) around the turns inside."""
    with TelemetryHandler(tracer_provider=tracer_provider, logger_provider=logger_provider).workflow(name):
        yield


def new_form_turn(
    tracer_provider: TracerProvider,
    logger_provider: LoggerProvider,
    *,
    agent: str,
    conversation_id: str,
    question: str,
    answer: str,
    history: History = (),
    call_id: str = "call_new_1",
    old_chats: bool = False,
) -> None:
    """One turn of ``agent`` as opentelemetry-util-genai emits it (an in-process agent: INTERNAL).

    ``old_chats``: the model calls below come from an instrumentation still on the old form (the
    framework upgraded, its OpenAI instrumentation not): both forms in one trace.
    """
    handler = TelemetryHandler(tracer_provider=tracer_provider, logger_provider=logger_provider)
    tracer = tracer_provider.get_tracer("app.agents", "1.0.0")
    with handler.invoke_local_agent(agent_name=agent, request_model=MODEL) as run:
        run.conversation_id = conversation_id
        run.system_instruction = [Text(content=SYSTEM)]
        run.input_messages = _messages(history, question)
        run.output_messages = [OutputMessage(role="assistant", parts=[Text(content=answer)], finish_reason="stop")]
        if old_chats:
            logger = logger_provider.get_logger("opentelemetry.instrumentation.openai_v2", "2.1b0")
            _old_chats(tracer, logger, question, answer, history, call_id)
        else:
            _new_chats(handler, tracer, agent, question, answer, history, call_id)
