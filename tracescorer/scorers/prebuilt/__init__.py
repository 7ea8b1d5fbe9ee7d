"""Prebuilt scorers: one factory per scorer (LLM judges, code scorers, quick checks).

:data:`PREBUILT` maps the config names (``prebuilt: <name>``) to the factories.
"""

from tracescorer.scorers.prebuilt.catalog import PREBUILT
from tracescorer.scorers.prebuilt.code import (
    create_completeness_scorer,
    create_content_similarity_scorer,
    create_keyword_coverage_scorer,
    create_textual_difference_scorer,
    create_tone_consistency_scorer,
    create_tool_call_accuracy_scorer,
)
from tracescorer.scorers.prebuilt.context import (
    create_context_precision_scorer,
    create_context_recall_scorer,
    create_context_relevance_scorer,
    retrieved_context,
)
from tracescorer.scorers.prebuilt.llm_judges import (
    create_answer_relevancy_scorer,
    create_bias_scorer,
    create_faithfulness_scorer,
    create_hallucination_scorer,
    create_prompt_alignment_scorer,
    create_rubric_scorer,
    create_tool_call_appropriateness_scorer,
    create_toxicity_scorer,
)
from tracescorer.scorers.prebuilt.multi_turn import (
    MULTI_TURN_JUDGE_ID,
    MultiTurnVerdict,
    create_multi_turn_judge_scorer,
)
from tracescorer.scorers.prebuilt.quick import (
    create_called_tool_check,
    create_did_not_call_check,
    create_equals_check,
    create_excludes_check,
    create_includes_check,
    create_matches_check,
    create_max_tool_calls_check,
    create_no_tool_errors_check,
    create_non_empty_response_check,
    create_similarity_check,
    create_tool_order_check,
    create_used_no_tools_check,
    dice_similarity,
)
from tracescorer.scorers.prebuilt.reference import (
    create_answer_similarity_scorer,
    create_noise_sensitivity_scorer,
    create_summarization_scorer,
)
from tracescorer.scorers.prebuilt.trajectory import (
    compare_trajectory,
    create_trajectory_accuracy_llm_scorer,
    create_trajectory_accuracy_scorer,
)

__all__ = [
    "MULTI_TURN_JUDGE_ID",
    "PREBUILT",
    "MultiTurnVerdict",
    "compare_trajectory",
    "create_answer_relevancy_scorer",
    "create_answer_similarity_scorer",
    "create_bias_scorer",
    "create_called_tool_check",
    "create_completeness_scorer",
    "create_content_similarity_scorer",
    "create_context_precision_scorer",
    "create_context_recall_scorer",
    "create_context_relevance_scorer",
    "create_did_not_call_check",
    "create_equals_check",
    "create_excludes_check",
    "create_faithfulness_scorer",
    "create_hallucination_scorer",
    "create_includes_check",
    "create_keyword_coverage_scorer",
    "create_matches_check",
    "create_max_tool_calls_check",
    "create_multi_turn_judge_scorer",
    "create_no_tool_errors_check",
    "create_noise_sensitivity_scorer",
    "create_non_empty_response_check",
    "create_prompt_alignment_scorer",
    "create_rubric_scorer",
    "create_similarity_check",
    "create_summarization_scorer",
    "create_textual_difference_scorer",
    "create_tone_consistency_scorer",
    "create_tool_call_accuracy_scorer",
    "create_tool_call_appropriateness_scorer",
    "create_tool_order_check",
    "create_toxicity_scorer",
    "create_trajectory_accuracy_llm_scorer",
    "create_trajectory_accuracy_scorer",
    "create_used_no_tools_check",
    "dice_similarity",
    "retrieved_context",
]
