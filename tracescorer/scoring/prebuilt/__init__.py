"""Prebuilt scorers: one factory per scorer (LLM judges, code scorers, quick checks)."""

from tracescorer.scoring.prebuilt.code import (
    create_completeness_scorer,
    create_content_similarity_scorer,
    create_keyword_coverage_scorer,
    create_textual_difference_scorer,
    create_tone_consistency_scorer,
    create_tool_call_accuracy_scorer,
)
from tracescorer.scoring.prebuilt.llm_judges import (
    create_answer_relevancy_scorer,
    create_bias_scorer,
    create_faithfulness_scorer,
    create_hallucination_scorer,
    create_prompt_alignment_scorer,
    create_rubric_scorer,
    create_tool_call_appropriateness_scorer,
    create_toxicity_scorer,
)
from tracescorer.scoring.prebuilt.multi_turn import (
    MULTI_TURN_JUDGE_ID,
    MultiTurnVerdict,
    create_multi_turn_judge_scorer,
)
from tracescorer.scoring.prebuilt.quick import (
    create_called_tool_check,
    create_did_not_call_check,
    create_excludes_check,
    create_includes_check,
    create_matches_check,
    create_max_tool_calls_check,
    create_no_tool_errors_check,
    create_non_empty_response_check,
)

__all__ = [
    "MULTI_TURN_JUDGE_ID",
    "MultiTurnVerdict",
    "create_answer_relevancy_scorer",
    "create_bias_scorer",
    "create_called_tool_check",
    "create_completeness_scorer",
    "create_content_similarity_scorer",
    "create_did_not_call_check",
    "create_excludes_check",
    "create_faithfulness_scorer",
    "create_hallucination_scorer",
    "create_includes_check",
    "create_keyword_coverage_scorer",
    "create_matches_check",
    "create_max_tool_calls_check",
    "create_multi_turn_judge_scorer",
    "create_no_tool_errors_check",
    "create_non_empty_response_check",
    "create_prompt_alignment_scorer",
    "create_rubric_scorer",
    "create_textual_difference_scorer",
    "create_tone_consistency_scorer",
    "create_tool_call_accuracy_scorer",
    "create_tool_call_appropriateness_scorer",
    "create_toxicity_scorer",
]
