"""The static-first layout of judge messages and the cache marks (pure functions)."""

from __future__ import annotations

from types import SimpleNamespace

from tracescorer.scorers.prompt_cache import cached_tokens, mark_static, needs_marks, static_first

RUN = {"role": "user", "content": "the run"}


def test_the_schema_joins_the_instructions_or_leads_on_its_own() -> None:
    system = {"role": "system", "content": "rubric"}
    assert static_first([system, RUN], "schema") == [{"role": "system", "content": "rubric\n\nschema"}, RUN]
    assert static_first([RUN], "schema") == [{"role": "system", "content": "schema"}, RUN]
    assert static_first([system, RUN], None) == [system, RUN]


def test_only_the_leading_system_message_is_marked_and_only_for_anthropic() -> None:
    marked = mark_static([{"role": "system", "content": "rubric"}, RUN])
    assert marked == [
        {"role": "system", "content": [{"type": "text", "text": "rubric", "cache_control": {"type": "ephemeral"}}]},
        RUN,
    ]
    assert mark_static([RUN]) == [RUN]  # nothing static to mark
    assert needs_marks("anthropic") and not needs_marks("openai") and not needs_marks(None)


def test_cached_tokens_read_both_usage_shapes() -> None:
    openai = SimpleNamespace(prompt_tokens_details=SimpleNamespace(cached_tokens=1024))
    anthropic = SimpleNamespace(cache_read_input_tokens=900, cache_creation_input_tokens=0)
    written = SimpleNamespace(cache_read_input_tokens=0, cache_creation_input_tokens=2000, prompt_tokens_details=None)
    assert cached_tokens(openai) == (1024, None)
    assert cached_tokens(anthropic) == (900, None)
    assert cached_tokens(written) == (None, 2000)
    assert cached_tokens(None) == (None, None)
