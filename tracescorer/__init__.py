"""tracescorer: score AI agents in production from their OpenTelemetry traces.

The public API for scorer authors::

    from tracescorer import create_scorer, PromptStep, Judge, run_evals
    from tracescorer.prebuilt import create_multi_turn_judge_scorer
"""

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
