"""The scorer library: build scorers with :func:`create_scorer`, judge with LLMs through
litellm (imported lazily by :mod:`tracescorer.scorers.judge` only), run them on agent runs or
data sets (:func:`run_evals`) and persist through a :class:`ScorerRegistry`."""

from tracescorer.scorers.agent_io import AgentInput, AgentOutput, agent_run_input
from tracescorer.scorers.errors import (
    JudgeCallError,
    JudgeError,
    JudgeOutputError,
    ScorerConfigError,
    ScorerError,
    ScorerRunError,
)
from tracescorer.scorers.evals import EvalItemResult, EvalResult, ScorerSummary, Threshold, run_evals
from tracescorer.scorers.judge import Judge
from tracescorer.scorers.pii import Detector, PhoneDetector, RegexDetector, default_detectors
from tracescorer.scorers.processors import InputProcessor, OutputProcessor, Redactor, RedactPII
from tracescorer.scorers.registry import InMemoryScoreSink, ScorerRegistry, ScoreSink
from tracescorer.scorers.retry import (
    ErrorProcessor,
    RetryDecision,
    RetryMatcher,
    StreamErrorRetryProcessor,
)
from tracescorer.scorers.scorer import PromptStep, Scorer, create_scorer
from tracescorer.scorers.trim import filter_run
from tracescorer.scorers.types import (
    JudgeCall,
    NotScorable,
    ScorerLike,
    ScorerResult,
    ScorerRun,
    SkipJudge,
    StepResults,
    not_scorable,
    skip_judge,
)

__all__ = [
    "AgentInput",
    "AgentOutput",
    "Detector",
    "ErrorProcessor",
    "EvalItemResult",
    "EvalResult",
    "InMemoryScoreSink",
    "InputProcessor",
    "Judge",
    "JudgeCall",
    "JudgeCallError",
    "JudgeError",
    "JudgeOutputError",
    "NotScorable",
    "OutputProcessor",
    "PhoneDetector",
    "PromptStep",
    "RedactPII",
    "Redactor",
    "RegexDetector",
    "RetryDecision",
    "RetryMatcher",
    "ScoreSink",
    "Scorer",
    "ScorerConfigError",
    "ScorerError",
    "ScorerLike",
    "ScorerRegistry",
    "ScorerResult",
    "ScorerRun",
    "ScorerRunError",
    "ScorerSummary",
    "SkipJudge",
    "StepResults",
    "StreamErrorRetryProcessor",
    "Threshold",
    "agent_run_input",
    "create_scorer",
    "default_detectors",
    "filter_run",
    "not_scorable",
    "run_evals",
    "skip_judge",
]
