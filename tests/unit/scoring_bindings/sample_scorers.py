"""User scorers that the tests' ``python:`` bindings load.

Imported as ``unit.scoring_bindings.sample_scorers`` (pytest's pythonpath has ``tests``).
"""

from __future__ import annotations

from typing import Any

from tracescorer import Judge, PromptStep, create_scorer

quality = create_scorer(id="quality", description="The answer is not empty").generate_score(
    lambda *, run, results: 1.0 if run.output else 0.0
)


def make_length(max_chars: int = 200) -> Any:
    """A factory: called with the binding's options."""
    return create_scorer(id="length", description=f"Answers under {max_chars} characters", type="agent").generate_score(
        lambda *, run, results: 1.0 if sum(len(m.content) for m in run.output) <= max_chars else 0.0
    )


def _prompt(*, run: Any, results: Any) -> str:
    return "Is the answer polite? Reply with a score from 0 to 1."


# An LLM scorer that relies on the daemon's judge defaults (no model of its own).
politeness = create_scorer(id="politeness", description="Polite answers").generate_score(
    PromptStep(description="judge politeness", create_prompt=_prompt)
)

# An LLM scorer with its own judge.
own_judge = create_scorer(
    id="own-judge", judge=Judge(model="anthropic/claude-haiku-4-5", temperature=0.0)
).generate_score(PromptStep(description="judge", create_prompt=_prompt))

# The model is given by the step's own judge.
step_judge = create_scorer(id="step-judge").generate_score(
    PromptStep(description="judge", create_prompt=_prompt, judge=Judge(model="openai/gpt-4.1-mini"))
)

not_a_scorer = 42


def returns_text() -> str:
    return "not a scorer"


def raises() -> Any:
    raise RuntimeError("no database configured")


class Holder:
    inner = quality
