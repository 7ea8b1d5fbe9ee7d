"""agent_run_input and filter_run (Mastra's keep rules)."""

from __future__ import annotations

from typing import Any

import pytest
from support.agent_runs import make_run, text_message, tool_message

from tracescorer import ScorerRun, create_scorer, filter_run
from tracescorer.model import Conversation, Message, Part, ToolCall
from tracescorer.scorers import AgentInput, agent_run_input
from tracescorer.scorers.agent_io import assistant_texts, input_text, output_text, tool_calls_of


def test_agent_run_input_from_agent_run() -> None:
    tc = (ToolCall(id="1", name="weather", arguments={"city": "Paris"}, result="sunny"),)
    run = agent_run_input(make_run(tool_calls=tc), ground_truth="Sunny")
    assert isinstance(run.input, AgentInput)
    assert [m.content for m in run.input.input_messages] == ["What is the weather in Paris?"]
    assert len(run.input.remembered_messages) == 2
    assert run.input.system_messages[0].content == "You are a weather bot."
    assert run.input.tagged_system_messages["rules"][0].content == "be brief"
    assert run.input.tool_calls == tc
    assert run.output[0].content == "Sunny, 21C."
    assert run.run_id == "run-1" and run.ground_truth == "Sunny"
    assert run.metadata["entity_type"] == "agent" and run.metadata["trace_id"] == "t" * 32


def test_agent_run_input_from_conversation() -> None:
    first = make_run(run_id="a", user="u1", output=(tool_message("lookup"), text_message("assistant", "a1")))
    second = make_run(run_id="b", user="u2", output=(text_message("assistant", "a2"),))
    second = type(second)(
        **{
            **{f: getattr(second, f) for f in second.__dataclass_fields__},
            "system_messages": (text_message("system", "other"),),
        }
    )
    run = agent_run_input(Conversation(conversation_id="conv", runs=(first, second)))
    assert isinstance(run.input, AgentInput)
    assert [m.content for m in run.input.input_messages] == ["u1", "u2"]
    assert [m.content for m in run.output] == ["", "a1", "a2"]
    assert run.input.system_messages[0].content == "You are a weather bot."  # from the first run
    assert run.run_id == "conv" and run.metadata["entity_type"] == "conversation"
    assert run.metadata["run_ids"] == ["a", "b"]
    assert assistant_texts(run) == ["a1", "a2"]
    assert input_text(run) == "u1\nu2" and output_text(run) == "a1\na2"
    # no ToolCall records in these runs: derived from the tool_call parts of the output
    assert [c.name for c in tool_calls_of(run)] == ["lookup"]
    assert [c.name for c in tool_calls_of(ScorerRun(output=run.output))] == ["lookup"]


def _msg(*types: str, tool: str | None = None) -> Message:
    return Message(
        role="assistant",
        content="x",
        parts=tuple(Part(type=t, content="x", name=tool if t == "tool_call" else None) for t in types),
    )


def _run(remembered: tuple[Message, ...], output: tuple[Message, ...]) -> ScorerRun[Any, Any]:
    return ScorerRun(
        input=AgentInput(remembered_messages=remembered),
        output=output,
        ground_truth="gt",
        request_context={"user": "u"},
    )


def test_filter_part_types() -> None:
    text, tool, reasoning, plain = (
        _msg("text"),
        _msg("tool_call", tool="search"),
        _msg("reasoning"),
        Message(role="user", content="plain"),
    )
    run = _run((text, tool, reasoning, plain), (tool, text))
    out = filter_run(part_types=["text"])(run)
    assert out.input.remembered_messages == (text, plain)  # plain content always kept
    assert out.output == (text,)
    assert filter_run(part_types=["tool-invocation"])(run).output == (tool,)  # Mastra alias
    assert filter_run(part_types=["reas"])(run).input.remembered_messages == (reasoning, plain)


def test_filter_tool_names_prefix_and_non_tool_unaffected() -> None:
    text = _msg("text")
    write, view, other = (
        _msg("text", "tool_call", tool="write_file"),
        _msg("tool_call", tool="view"),
        _msg("tool_call", tool="delete"),
    )
    run = _run((text, write, view, other), (write, other, text))
    out = filter_run(tool_names=["write", "view"])(run)
    assert out.input.remembered_messages == (text, write, view)
    assert out.output == (write, text)
    both = filter_run(tool_names=["write"], part_types=["tool_call"])(run)
    assert both.output == (write,)  # text-only message dropped by part_types


def test_filter_limits_and_drops() -> None:
    msgs = tuple(text_message("user", str(i)) for i in range(10))
    run = _run(msgs, msgs)
    out = filter_run(
        max_remembered_messages=3, max_output_messages=2, drop_ground_truth=True, drop_request_context=True
    )(run)
    assert [m.content for m in out.input.remembered_messages] == ["7", "8", "9"]
    assert [m.content for m in out.output] == ["8", "9"]
    assert out.ground_truth is None and out.request_context is None
    kept = filter_run()(run)
    assert kept.ground_truth == "gt" and kept.request_context == {"user": "u"}
    assert len(kept.output) == 10
    # Mastra: a limit of 0 means no limit
    unlimited = filter_run(max_output_messages=0, max_remembered_messages=0)(run)
    assert len(unlimited.output) == 10 and len(unlimited.input.remembered_messages) == 10
    with pytest.raises(ValueError, match="max_output_messages"):
        filter_run(max_output_messages=-1)


def test_filter_on_non_agent_runs_is_harmless() -> None:
    run = ScorerRun(input="q", output="text", ground_truth="g")
    out = filter_run(part_types=["text"], max_output_messages=1, drop_ground_truth=True)(run)
    assert out.input == "q" and out.output == "text" and out.ground_truth is None


async def test_filter_run_as_prepare_run() -> None:
    scorer = create_scorer(id="f", type="agent", prepare_run=filter_run(max_output_messages=1)).generate_score(
        lambda *, run, results: float(len(run.output))
    )
    run = make_run(output=(text_message("assistant", "a"), text_message("assistant", "b")))
    result = await scorer.run(run)
    assert result.score == 1.0
    assert result.run is not None and result.run.output[0].content == "b"
