"""The prebuilt scorers by config name (``prebuilt: <name>`` in the ``scorers:`` section)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracescorer.scorers.prebuilt import code, context, llm_judges, multi_turn, quick, reference, trajectory
from tracescorer.scorers.scorer import Scorer

PREBUILT: dict[str, Callable[..., Scorer[Any, Any]]] = {
    # LLM judges (take model=)
    "multi_turn_judge": multi_turn.create_multi_turn_judge_scorer,
    "answer_relevancy": llm_judges.create_answer_relevancy_scorer,
    "answer_similarity": reference.create_answer_similarity_scorer,
    "faithfulness": llm_judges.create_faithfulness_scorer,
    "hallucination": llm_judges.create_hallucination_scorer,
    "toxicity": llm_judges.create_toxicity_scorer,
    "bias": llm_judges.create_bias_scorer,
    "prompt_alignment": llm_judges.create_prompt_alignment_scorer,
    "tool_call_appropriateness": llm_judges.create_tool_call_appropriateness_scorer,
    "rubric": llm_judges.create_rubric_scorer,
    "context_precision": context.create_context_precision_scorer,
    "context_relevance": context.create_context_relevance_scorer,
    "context_recall": context.create_context_recall_scorer,
    "noise_sensitivity": reference.create_noise_sensitivity_scorer,
    "summarization": reference.create_summarization_scorer,
    "trajectory_accuracy_llm": trajectory.create_trajectory_accuracy_llm_scorer,
    # code scorers
    "completeness": code.create_completeness_scorer,
    "keyword_coverage": code.create_keyword_coverage_scorer,
    "content_similarity": code.create_content_similarity_scorer,
    "textual_difference": code.create_textual_difference_scorer,
    "tone_consistency": code.create_tone_consistency_scorer,
    "tool_call_accuracy": code.create_tool_call_accuracy_scorer,
    "trajectory_accuracy": trajectory.create_trajectory_accuracy_scorer,
    # quick checks (take id=)
    "includes": quick.create_includes_check,
    "excludes": quick.create_excludes_check,
    "equals": quick.create_equals_check,
    "matches": quick.create_matches_check,
    "similarity": quick.create_similarity_check,
    "called_tool": quick.create_called_tool_check,
    "did_not_call": quick.create_did_not_call_check,
    "tool_order": quick.create_tool_order_check,
    "max_tool_calls": quick.create_max_tool_calls_check,
    "used_no_tools": quick.create_used_no_tools_check,
    "no_tool_errors": quick.create_no_tool_errors_check,
    "non_empty_response": quick.create_non_empty_response_check,
}
"""Config name -> factory. LLM judges take ``model=``; quick checks take ``id=``."""
