"""What the single-run LLM judges (:mod:`tracescorer.scorers.prebuilt.llm_judges`) answer: their
structured output models, one verdict per statement, claim, opinion, tool call or criterion.

A scorer's version hashes each model's JSON schema (:mod:`tracescorer.runner.versions`): renaming
a model or a field, or editing a docstring, gives the scorers that use it a new version.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Verdict(BaseModel):
    """One judged statement, claim or opinion."""

    statement: str = ""
    verdict: Literal["yes", "no", "unsure"]
    reason: str = ""


class Verdicts(BaseModel):
    verdicts: list[Verdict] = Field(default_factory=list)


class Alignment(BaseModel):
    intent_alignment: float = Field(ge=0, le=1)
    requirements_fulfillment: float = Field(ge=0, le=1)
    completeness: float = Field(ge=0, le=1)
    response_appropriateness: float = Field(ge=0, le=1)
    reasoning: str = ""


class ToolVerdicts(BaseModel):
    verdicts: list[Verdict] = Field(default_factory=list)
    missing_tools: list[str] = Field(default_factory=list)


class CriterionVerdict(BaseModel):
    criterion: str
    satisfied: bool
    reasoning: str = ""


class RubricVerdicts(BaseModel):
    verdicts: list[CriterionVerdict]
