"""``create_scorer`` and the scorer pipeline: preprocess → analyze → generate_score → generate_reason.

Each step is a function (sync or async, called with keyword arguments ``run=``, ``results=``,
plus ``score=`` for ``generate_reason``) or a :class:`PromptStep` that asks the judge.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal

from tracescorer.model import AgentRun, Conversation
from tracescorer.scorers.agent_io import agent_run_input
from tracescorer.scorers.errors import JudgeError, ScorerConfigError, ScorerRunError
from tracescorer.scorers.judge import call_judge
from tracescorer.scorers.judge_config import Judge
from tracescorer.scorers.mapping import run_from_mapping
from tracescorer.scorers.structured import SCORE_SCHEMA, CompiledSchema, OutputSchema, compile_schema
from tracescorer.scorers.types import (
    STEP_ORDER,
    InputT,
    JudgeCall,
    NotScorable,
    OutputT,
    ScorerResult,
    ScorerRun,
    SkipJudge,
    StepName,
    StepResults,
    check_score,
)

log = logging.getLogger(__name__)

StepFn = Callable[..., Any]
PrepareRun = Callable[[ScorerRun[Any, Any]], ScorerRun[Any, Any] | Awaitable[ScorerRun[Any, Any]]]


@dataclass(frozen=True, kw_only=True)
class PromptStep:
    """A step that asks the judge.

    Args:
        description: what the step does (documentation; not sent to the model).
        create_prompt: called like a function step (``run=``, ``results=``, plus ``score=`` for
            generate_reason), sync or async; returns the prompt text, or
            :func:`~tracescorer.scorers.types.not_scorable` to end the run, or
            :func:`~tracescorer.scorers.types.skip_judge` to use a result without asking.
        output_schema: pydantic model class or JSON schema dict of the judge's structured
            output (preprocess/analyze: becomes the step result; generate_score: defaults to
            ``{"score": number}``). Not used by generate_reason, which returns the judge's text.
        judge: overrides the scorer-level judge field by field for this step.
        calculate_score: generate_score only: ``(run=, results=, output=) -> number`` turning
            the judge's structured output into the score.
    """

    description: str
    create_prompt: Callable[..., str | NotScorable | SkipJudge | Awaitable[str | NotScorable | SkipJudge]]
    output_schema: OutputSchema | None = None
    judge: Judge | None = None
    calculate_score: Callable[..., Any] | None = None


Step = StepFn | PromptStep


@dataclass(frozen=True, kw_only=True, slots=True)
class _BoundStep:
    name: StepName
    step: Step
    schema: CompiledSchema | None


async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    value = fn(*args, **kwargs)
    if type(value) not in _NOT_AWAITABLE and inspect.isawaitable(value):
        value = await value
    return value


# what plain function steps return: never awaitable, so no isinstance check against the ABC
_NOT_AWAITABLE = frozenset({float, int, str, bool, dict, list, tuple, type(None)})


@dataclass(frozen=True, kw_only=True)
class Scorer(Generic[InputT, OutputT]):
    """A scorer pipeline. Build with :func:`create_scorer`; each step method returns a new scorer.

    Scorers are immutable and safe to run concurrently.
    """

    id: str
    name: str
    description: str
    judge: Judge | None = None
    type: str | None = None
    prepare_run: PrepareRun | None = None
    _steps: tuple[_BoundStep, ...] = ()

    # -- building ----------------------------------------------------------------------------
    def _with(self, name: StepName, step: Step) -> Scorer[InputT, OutputT]:
        if any(s.name == name for s in self._steps):
            raise ScorerConfigError(f"scorer {self.id!r}: step {name!r} is already defined")
        schema: CompiledSchema | None = None
        if isinstance(step, PromptStep):
            if step.calculate_score is not None and name != "generate_score":
                raise ScorerConfigError(f"scorer {self.id!r}: calculate_score is only for generate_score")
            if name == "generate_score":
                schema = compile_schema(step.output_schema or SCORE_SCHEMA)
            elif name != "generate_reason" and step.output_schema is not None:
                schema = compile_schema(step.output_schema)
        elif not callable(step):
            raise ScorerConfigError(
                f"scorer {self.id!r}: step {name!r} must be a function or a PromptStep, got {type(step).__name__}"
            )
        steps = sorted(
            (*self._steps, _BoundStep(name=name, step=step, schema=schema)), key=lambda s: STEP_ORDER.index(s.name)
        )
        return dataclasses.replace(self, _steps=tuple(steps))

    def preprocess(self, step: Step) -> Scorer[InputT, OutputT]:
        """Add the optional preprocess step; its result is ``results.preprocess_step_result``."""
        return self._with("preprocess", step)

    def analyze(self, step: Step) -> Scorer[InputT, OutputT]:
        """Add the optional analyze step; its result is ``results.analyze_step_result``."""
        return self._with("analyze", step)

    def generate_score(self, step: Step) -> Scorer[InputT, OutputT]:
        """Add the required score step (a function returning a number, or a PromptStep)."""
        return self._with("generate_score", step)

    def generate_reason(self, step: Step) -> Scorer[InputT, OutputT]:
        """Add the optional reason step (a function returning text, or a PromptStep)."""
        return self._with("generate_reason", step)

    @property
    def steps(self) -> tuple[StepName, ...]:
        """The defined steps, in execution order."""
        return tuple(s.name for s in self._steps)

    @property
    def prompt_steps(self) -> tuple[PromptStep, ...]:
        """The steps that ask the judge, in execution order (empty for a code-only scorer)."""
        return tuple(s.step for s in self._steps if isinstance(s.step, PromptStep))

    # -- running -----------------------------------------------------------------------------
    def run_sync(self, run: ScorerRun[InputT, OutputT] | AgentRun | Conversation | Mapping[str, Any]) -> ScorerResult:
        """:meth:`run` for synchronous code (not from inside a running event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(run))
        raise RuntimeError("run_sync() called from a running event loop; use 'await scorer.run()'")

    async def run(self, run: ScorerRun[InputT, OutputT] | AgentRun | Conversation | Mapping[str, Any]) -> ScorerResult:
        """Score ``run``: a :class:`ScorerRun`; an AgentRun/Conversation (turned into the
        agent-typed run by :func:`~tracescorer.scorers.agent_io.agent_run_input`); or a plain
        mapping with the ScorerRun field names (``{"input": ..., "output": ...,
        "ground_truth": ..., "request_context": ..., "run_id": ...}``; for ``type="agent"``
        message dicts become :class:`~tracescorer.model.Message` objects, see
        :func:`~tracescorer.scorers.mapping.run_from_mapping`).

        Returns a :class:`ScorerResult` (``status`` ``ok`` or ``not_scorable``); raises
        :class:`ScorerRunError` when a step fails.
        """
        started = time.perf_counter()
        target: ScorerRun[Any, Any]
        if isinstance(run, (AgentRun, Conversation)):
            target = agent_run_input(run)
        elif isinstance(run, ScorerRun):
            target = run
        elif isinstance(run, Mapping):
            target = run_from_mapping(run, agent=self.type == "agent")
        else:
            raise TypeError(
                f"scorer.run() takes a ScorerRun, a mapping, an AgentRun or a Conversation, got {type(run).__name__}"
            )
        if not target.run_id:
            target = dataclasses.replace(target, run_id=str(uuid.uuid4()))
        state = _RunState(self, target, started)
        for bound in self._steps:
            if bound.name == "generate_score":
                break
        else:
            missing = ScorerConfigError(f"scorer {self.id!r} has no generate_score step")
            raise state.failure("generate_score", missing)
        if self.prepare_run is not None:
            try:
                prepared = await _call(self.prepare_run, target)
            except Exception as exc:  # user code: reported as a failed run, never a crash
                raise state.failure("prepare_run", exc) from exc
            if not isinstance(prepared, ScorerRun):
                cause = TypeError(f"prepare_run must return a ScorerRun, got {type(prepared).__name__}")
                raise state.failure("prepare_run", cause)
            if not prepared.run_id:  # a rebuilt run keeps the id of the run it came from
                prepared = dataclasses.replace(prepared, run_id=target.run_id)
            state.run = prepared
        for bound in self._steps:
            try:
                step = bound.step
                if isinstance(step, PromptStep):
                    value = await state.prompt_step(bound, step)
                else:  # a function step, called here: awaited only when it gave an awaitable
                    if bound.name == "generate_reason":
                        value = step(run=state.run, results=state.results, score=state.score)
                    else:
                        value = step(run=state.run, results=state.results)
                    if type(value) not in _NOT_AWAITABLE and inspect.isawaitable(value):
                        value = await value
                if isinstance(value, NotScorable):
                    return state.result("not_scorable", reason=value.reason)
                state.keep(bound.name, value)
            except ScorerRunError:
                raise
            except Exception as exc:  # user steps and judge failures become ScorerRunError
                raise state.failure(bound.name, exc) from exc
            state.completed.append(bound.name)
        return state.result("ok")


class _RunState:
    """Mutable bookkeeping of one run (kept off the immutable Scorer)."""

    def __init__(self, scorer: Scorer[Any, Any], run: ScorerRun[Any, Any], started: float) -> None:
        self.scorer = scorer
        self.run = run
        self.started = started
        self.results = StepResults()
        self.prompts: dict[str, str] = {}
        self.calls: list[JudgeCall] = []
        self.completed: list[str] = []
        self.score: float | None = None
        self.reason: str | None = None

    def result(
        self, status: Literal["ok", "not_scorable", "error"], *, reason: str | None = None, error: str | None = None
    ) -> ScorerResult:
        prompts = self.prompts
        return ScorerResult(
            scorer_id=self.scorer.id,
            scorer_name=self.scorer.name,
            run_id=str(self.run.run_id),
            status=status,
            score=None if status == "not_scorable" else self.score,
            reason=reason if reason is not None else self.reason,
            preprocess_step_result=self.results.preprocess_step_result,
            analyze_step_result=self.results.analyze_step_result,
            preprocess_prompt=prompts.get("preprocess") if prompts else None,
            analyze_prompt=prompts.get("analyze") if prompts else None,
            generate_score_prompt=prompts.get("generate_score") if prompts else None,
            generate_reason_prompt=prompts.get("generate_reason") if prompts else None,
            judge_calls=tuple(self.calls) if self.calls else (),
            duration_ms=(time.perf_counter() - self.started) * 1000.0,
            error=error,
            run=self.run,
        )

    def failure(self, step: str, cause: BaseException) -> ScorerRunError:
        if isinstance(cause, JudgeError) and cause.calls:
            self.calls.extend(cause.calls)
            if step in STEP_ORDER:
                self.prompts[step] = cause.calls[-1].prompt
        log.debug("scorer %s failed in %s: %s", self.scorer.id, step, type(cause).__name__)
        return ScorerRunError(
            scorer_id=self.scorer.id,
            failed_step=step,
            completed_steps=tuple(self.completed),
            steps=self.scorer.steps,
            cause=cause,
            result=self.result("error", error=f"{type(cause).__name__}: {cause}"),
        )

    def kwargs(self, step: StepName) -> dict[str, Any]:
        """What a step (or a prompt step's ``create_prompt``) is called with."""
        if step == "generate_reason":
            return {"run": self.run, "results": self.results, "score": self.score}
        return {"run": self.run, "results": self.results}

    def keep(self, step: StepName, value: Any) -> None:
        """Take a step's result (not :class:`NotScorable`) into the results later steps get."""
        results = self.results  # frozen: a new StepResults per step (built directly: no replace())
        if step == "preprocess":
            self.results = StepResults(
                preprocess_step_result=value,
                analyze_step_result=results.analyze_step_result,
                generate_score_step_result=results.generate_score_step_result,
            )
        elif step == "analyze":
            self.results = StepResults(
                preprocess_step_result=results.preprocess_step_result,
                analyze_step_result=value,
                generate_score_step_result=results.generate_score_step_result,
            )
        elif step == "generate_score":
            self.score = check_score(value)
            self.results = StepResults(
                preprocess_step_result=results.preprocess_step_result,
                analyze_step_result=results.analyze_step_result,
                generate_score_step_result=self.score,
            )
        else:
            if value is not None and not isinstance(value, str):
                raise TypeError(f"generate_reason must return text, got {type(value).__name__}")
            self.reason = value

    async def prompt_step(self, bound: _BoundStep, step: PromptStep) -> Any:
        prompt = await _call(step.create_prompt, **self.kwargs(bound.name))
        if isinstance(prompt, NotScorable):
            return prompt
        if isinstance(prompt, SkipJudge):
            return prompt.result
        if not isinstance(prompt, str):
            raise TypeError(f"create_prompt must return text, got {type(prompt).__name__}")
        base = self.scorer.judge
        judge = base.merged_with(step.judge) if base is not None else step.judge
        if judge is None:
            raise ScorerConfigError(
                f"scorer {self.scorer.id!r}: prompt step {bound.name!r} "
                "needs a judge (create_scorer(judge=...) or PromptStep(judge=...))"
            )
        reply = await call_judge(judge, step=bound.name, prompt=prompt, schema=bound.schema)
        self.calls.extend(reply.calls)
        self.prompts[bound.name] = reply.call.prompt  # as sent: after the input processors
        if bound.name != "generate_score":
            return reply.output
        if step.calculate_score is not None:
            return await _call(step.calculate_score, run=self.run, results=self.results, output=reply.output)
        output = reply.output
        return output.get("score") if isinstance(output, dict) else getattr(output, "score", None)


def create_scorer(
    *,
    id: str,
    description: str = "",
    name: str | None = None,
    judge: Judge | None = None,
    type: str | None = None,
    prepare_run: PrepareRun | None = None,
) -> Scorer[Any, Any]:
    """Start building a scorer; chain ``.preprocess()``, ``.analyze()``, ``.generate_score()``
    (required) and ``.generate_reason()``.

    Args:
        id: unique id (used for registration and persistence); required.
        description: what the scorer measures.
        name: display name; defaults to ``id``.
        judge: the default :class:`Judge` for prompt steps.
        type: ``"agent"`` for scorers of agent runs (``run.input`` is an
            :class:`~tracescorer.scorers.agent_io.AgentInput`, ``run.output`` the assistant
            messages), or ``None`` for any input/output types.
        prepare_run: transforms the run before the pipeline (sync or async), e.g.
            :func:`~tracescorer.scorers.trim.filter_run`.

    Example::

        scorer = create_scorer(id="short-answer", description="Answers stay short").generate_score(
            lambda *, run, results: 1.0 if len(run.output[-1].content) < 500 else 0.0)
    """
    if not isinstance(id, str) or not id.strip():
        raise ScorerConfigError("create_scorer() needs a non-empty id")
    if type not in (None, "agent"):
        raise ScorerConfigError(f"unknown scorer type {type!r} (use 'agent' or None)")
    return Scorer(id=id, name=name or id, description=description, judge=judge, type=type, prepare_run=prepare_run)
