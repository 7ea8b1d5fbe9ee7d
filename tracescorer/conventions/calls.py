"""Traced function calls and model requests as messages: what decorator-based SDKs record.

Langfuse's ``@observe``, MLflow's ``@mlflow.trace`` and LangSmith's ``@traceable`` record the
function a span wraps, not a conversation: its arguments and its return value, JSON encoded.
Langfuse writes ``{"args": [...], "kwargs": {...}}``; MLflow and LangSmith the arguments by
parameter name (``{"history": [...], "question": "..."}``), LangSmith wraps a return value that
is not a mapping as ``{"output": value}``. Their model-call spans hold the request and the
response as the client library had them: an OpenAI chat request (``{"messages", "tools", ...}``
or the bare message list), a chat completion (``choices[].message``) or the returned message,
LangChain's ``{"messages": [[...]]}`` and ``LLMResult`` (``generations[][].message``), a
Responses API ``input`` / ``output``.

The rules, the same for every such SDK:

- an argument that is a list of chat messages is what the function was *given* (history, maybe
  with the new turn); ``{"messages": [...]}`` too;
- the one argument that is a non-empty string is the *new input*; with several string
  arguments (a question and a user id, say) none is taken: the model's own input decides;
- a return value is the assistant's answer when it is text, a message or a completion;
- tool arguments: the keyword arguments, the one positional argument, or both.

Nothing is guessed: a value in none of these shapes gives no message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracescorer.conventions.common import (
    ASSISTANT,
    SYSTEM,
    USER,
    loads_maybe,
    output_from_text,
    parse_message,
    parse_messages,
    text_message,
)
from tracescorer.conventions.logfire import responses_items
from tracescorer.model import Message

#: LangChain message ``type`` values (``model_dump`` of a message object).
_LC_TYPES = frozenset({"human", "ai", "system", "tool", "function", "chat", "developer"})


def _is_message(item: Any) -> bool:
    if not isinstance(item, Mapping):
        return False
    if isinstance(item.get("role"), str):
        return True
    if "lc" in item and isinstance(item.get("kwargs"), Mapping):  # LangChain dumpd
        return True
    kind = item.get("type")
    if isinstance(kind, str) and kind in _LC_TYPES:
        return "content" in item or isinstance(item.get("data"), Mapping)
    return False


def is_message_list(value: Any) -> bool:
    """A non-empty list whose items are all chat messages (a tools list is not: its items have
    ``type: function`` and no content)."""
    return isinstance(value, list) and bool(value) and all(_is_message(v) for v in value)


def call_arguments(data: Any) -> list[Any] | None:
    """The argument values of a call record, positional first; None when ``data`` is not one.

    ``{"args": [...], "kwargs": {...}}`` (Langfuse) or arguments by parameter name (MLflow,
    LangSmith). A chat message or a message list is a value, not a record.
    """
    if not isinstance(data, Mapping) or not data or _is_message(data):
        return None
    keys = data.keys()
    if keys <= {"args", "kwargs"} and isinstance(data.get("args", []), list):
        kwargs = data.get("kwargs") or {}
        if isinstance(kwargs, Mapping):
            return [*data.get("args", []), *kwargs.values()]
    return list(data.values())


def _given(values: Sequence[Any]) -> list[Message]:
    for value in values:
        if is_message_list(value):
            return parse_messages(value)
        if isinstance(value, Mapping) and is_message_list(value.get("messages")):
            return parse_messages(value["messages"])
    return []


def call_input(value: Any) -> tuple[list[Message], list[Message]]:
    """(new input, messages given) of a traced call's recorded input (see the module rules)."""
    data = loads_maybe(value)
    if isinstance(data, str):
        return ([text_message(USER, data)] if data.strip() else []), []
    if is_message_list(data):
        return [], parse_messages(data)
    if isinstance(data, Mapping) and _is_message(data):
        return [], parse_messages([data])
    args = call_arguments(data)
    if args is None:
        return [], []
    texts = [a for a in args if isinstance(a, str) and a.strip()]
    return ([text_message(USER, texts[0])] if len(texts) == 1 else []), _given(args)


def tool_arguments(value: Any) -> Any:
    """A tool's arguments from its call record: keyword arguments, the one positional argument,
    or ``{"args": [...], **kwargs}``; a value that is no record as it is."""
    data = loads_maybe(value)
    if isinstance(data, Mapping) and data.keys() <= {"args", "kwargs"} and data:
        args, kwargs = data.get("args") or [], data.get("kwargs") or {}
        if not isinstance(args, list) or not isinstance(kwargs, Mapping):
            return data
        if not args:
            return dict(kwargs)
        if not kwargs:
            return args[0] if len(args) == 1 else args
        return {"args": args, **kwargs}
    if data == "":
        return None
    return data


def unwrap_output(data: Any) -> Any:
    """LangSmith's ``{"output": value}`` wrapping of a return value, removed."""
    if isinstance(data, Mapping) and len(data) == 1 and "output" in data:
        return data["output"]
    return data


# --- model requests and responses ---------------------------------------------------------------


def _completion_messages(data: Mapping[str, Any]) -> list[Message] | None:
    """Assistant messages of a chat completion, an LLMResult or a Responses API response."""
    choices = data.get("choices")
    if isinstance(choices, list):
        out = []
        for choice in choices:
            message = choice.get("message") if isinstance(choice, Mapping) else None
            if isinstance(message, Mapping):
                msg = parse_message({**message, "role": message.get("role") or ASSISTANT})
                if msg is not None and (msg.parts or msg.content):
                    out.append(msg)
        return out
    generations = data.get("generations")
    if isinstance(generations, list):
        flat = [g for batch in generations for g in (batch if isinstance(batch, list) else [batch])]
        out = []
        for gen in flat:
            if not isinstance(gen, Mapping):
                continue
            msg = parse_message(gen["message"]) if isinstance(gen.get("message"), Mapping) else None
            if msg is None and isinstance(gen.get("text"), str) and gen["text"]:
                msg = text_message(ASSISTANT, gen["text"])
            if msg is not None and (msg.parts or msg.content):
                out.append(msg)
        return out
    if isinstance(data.get("output"), list) and data.get("object") == "response":
        return responses_items(data["output"])
    return None


def response_messages(value: Any) -> list[Message]:
    """The assistant messages of a model call's recorded response (or a function's return
    value): text, a message, a message list, a chat completion, an LLMResult."""
    data = unwrap_output(loads_maybe(value))
    if isinstance(data, Mapping):
        found = _completion_messages(data)
        if found is not None:
            return [m for m in found if m.role == ASSISTANT]
        if _is_message(data):
            msg = parse_message(data)
            return [msg] if msg is not None and msg.role == ASSISTANT and (msg.parts or msg.content) else []
        if is_message_list(data.get("messages")):
            return [m for m in parse_messages(data["messages"]) if m.role == ASSISTANT][-1:]
    if is_message_list(data):
        return [m for m in parse_messages(data) if m.role == ASSISTANT]
    if isinstance(data, (str, Mapping)):
        return output_from_text(data)
    return []


def request_messages(value: Any) -> list[Message]:
    """The messages a model call was sent, from its recorded request: a message list, an OpenAI
    request body (``messages``; LangChain's batched ``[[...]]``), a Responses API request
    (``instructions`` + ``input``), a prompt string, or a call record (a decorated model-call
    function) with a message-list argument, else its one string argument as the prompt."""
    data = loads_maybe(value)
    if isinstance(data, str):
        return [text_message(USER, data)] if data.strip() else []
    if isinstance(data, list) and len(data) == 1 and is_message_list(data[0]):
        data = data[0]  # one prompt of a batch (LangChain's callbacks record [[messages]])
    if is_message_list(data):
        return parse_messages(data)
    if not isinstance(data, Mapping):
        return []
    messages = data.get("messages")
    if isinstance(messages, list) and messages and is_message_list(messages[0]):
        messages = messages[0]  # LangChain: one list per prompt in the batch
    if is_message_list(messages):
        return parse_messages(messages)
    if "input" in data and ("model" in data or "instructions" in data):  # Responses API
        system = [text_message(SYSTEM, data["instructions"])] if isinstance(data.get("instructions"), str) else []
        return system + responses_items(data["input"])
    for key in ("prompt", "prompts"):
        prompt = data.get(key)
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if isinstance(prompt, str) and prompt.strip():
            return [text_message(USER, prompt)]
    args = call_arguments(data)
    if args is None:
        return []
    given = _given(args)
    if not given:  # a decorated model-call function given its prompt as its one string argument
        texts = [a for a in args if isinstance(a, str) and a.strip()]
        given = [text_message(USER, texts[0])] if len(texts) == 1 else []
    return given
