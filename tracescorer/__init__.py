"""tracescorer: score AI agents in production from their OpenTelemetry traces.

The public API for scorer authors::

    from tracescorer import create_scorer, PromptStep, Judge, run_evals
    from tracescorer.prebuilt import create_multi_turn_judge_scorer
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracescorer.scorers import (
        AgentInput,
        InMemoryScoreSink,
        Judge,
        JudgeCall,
        PromptStep,
        RedactPII,
        RetryMatcher,
        Scorer,
        ScorerRegistry,
        ScorerResult,
        ScorerRun,
        ScorerRunError,
        ScoreSink,
        StepResults,
        StreamErrorRetryProcessor,
        agent_run_input,
        create_scorer,
        filter_run,
        not_scorable,
        run_evals,
    )

# Lazy (PEP 562): every ``tracescorer.*`` import runs this file first, and the CLI's start-up must
# not pay for the scorer library (~90 ms) when a command does not score.


def __getattr__(name: str) -> Any:
    if name in __all__ and name != "__version__":
        import tracescorer.scorers

        return getattr(tracescorer.scorers, name)
    raise AttributeError(f"module 'tracescorer' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "AgentInput",
    "InMemoryScoreSink",
    "Judge",
    "JudgeCall",
    "PromptStep",
    "RedactPII",
    "RetryMatcher",
    "ScoreSink",
    "Scorer",
    "ScorerRegistry",
    "ScorerResult",
    "ScorerRun",
    "ScorerRunError",
    "StepResults",
    "StreamErrorRetryProcessor",
    "__version__",
    "agent_run_input",
    "create_scorer",
    "filter_run",
    "not_scorable",
    "run_evals",
]
