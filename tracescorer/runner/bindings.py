"""Scorer bindings: the ``scorers:`` section of the configuration turned into scorers.

Each enabled :class:`~tracescorer.config.ScorerBinding` becomes a :class:`BoundScorer`:

- ``prebuilt: <name>`` calls the factory in :data:`PREBUILT` with the binding's ``options``.
  LLM judges (factories taking ``model=``) get the judge model and connection settings: the
  binding's ``judge`` keys win over ``options``, which win over the ``judge:`` defaults
  section (``model``, ``api_base``, ``api_key``, ``timeout_s``). Quick checks (factories
  taking ``id=``) are built with the binding id.
- ``python: "package.module:attribute"`` imports a :class:`~tracescorer.scorers.scorer.Scorer`,
  or a callable returning one (called with the binding's ``options`` as keyword arguments).
  Its ``id`` must equal the binding id: a user scorer's id is its identity in the score
  history, so it is never silently changed. If it has prompt steps, the binding's ``judge``
  keys are merged over its own judge, and where a prompt step would still have no model the
  ``judge:`` defaults go underneath (a judge the scorer configured keeps its own settings).

Binding ``judge`` keys: ``model``, ``api_base``, ``api_key``, ``timeout_s``, ``retries``,
``retry_initial_s``, and any other :class:`Judge` argument or litellm option (``temperature``,
``max_tokens``, ``instructions``). ``retries`` (default: the ``judge:`` section's, 2) retries the
requests a provider did not answer with :func:`~tracescorer.scorers.retry.retry_options`.
The global limits (``max_concurrency``, ``requests_per_minute``, ``daily_budget_usd``) are
refused there: they belong to the ``judge:`` section (a binding's own caps are its ``limits:``,
:mod:`tracescorer.runner.caps`).

Prebuilt scorers with a fixed id (``multi-turn-judge-scorer``, ``faithfulness-scorer``...) are
renamed to the binding id, so one prebuilt can be bound several times (two multi-turn judges
with different criteria). Scores are stored under the binding id: the registry built by
:func:`registry_from` holds exactly the bound ids (the seed's rule: only registered ids are
persisted).

Building never calls a model and never imports litellm (a :class:`Judge` is configuration only).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracescorer.config import JudgeSettings, ScorerBinding
from tracescorer.filters import clauses_of
from tracescorer.model import AgentRun, Conversation
from tracescorer.runner.versions import scorer_version
from tracescorer.scorers.judge import Judge
from tracescorer.scorers.prebuilt import PREBUILT
from tracescorer.scorers.registry import ScorerRegistry
from tracescorer.scorers.retry import retry_options
from tracescorer.scorers.scorer import PromptStep, Scorer

# Judge options the ``judge:`` defaults provide (``timeout`` from ``timeout_s``); a binding's
# ``judge`` keys override them, and its other keys are passed to the Judge as they are
# (``temperature``, ``max_tokens``, ``instructions``...).
_CONNECTION_OPTIONS = ("api_base", "api_key", "timeout")
# How many times a request the provider did not answer is retried (become error processors).
_RETRY_KEYS = ("retries", "retry_initial_s")
# JudgeSettings keys that belong to the runner's limits, never to a Judge object.
_RUNNER_KEYS = frozenset({"max_concurrency", "requests_per_minute", "daily_budget_usd", "reuse_max_age_s"})


#: a filter clause (:func:`~tracescorer.filters.clauses_of`): None when the target passes, else why not
Clause = Callable[[AgentRun | Conversation, Sequence[AgentRun]], "str | None"]


class BindingError(ValueError):
    """A scorer binding cannot be built; the message starts with ``scorers[<index>] (<id>): ``."""


@dataclass(frozen=True, slots=True)
class BoundScorer:
    """A binding with its built scorer.

    ``uses_judge`` is True when the scorer has a :class:`PromptStep` (it calls the LLM judge,
    so judge concurrency, rate and budget limits apply). A function step that calls a model by
    itself is not detected: such a scorer counts as a code scorer.
    """

    binding: ScorerBinding
    scorer: Scorer[Any, Any]
    uses_judge: bool
    #: a stable hash of the binding's definition (:mod:`tracescorer.runner.versions`), on every score
    version: str = ""
    #: the binding filter's clauses, built once: the decider checks them for every target
    #: (``RunFilter.check`` reads its own cached clauses through pydantic's slow private-attribute path)
    clauses: tuple[Clause, ...] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "clauses", tuple(clauses_of(self.binding.filter)))

    @property
    def judge_requests(self) -> int:
        """Judge requests one run of the scorer makes (what the requests-per-minute limit counts)."""
        return len(self.scorer.prompt_steps)


def uses_judge(scorer: Scorer[Any, Any]) -> bool:
    """Whether any step of ``scorer`` is a :class:`PromptStep` (asks the judge)."""
    return bool(scorer.prompt_steps)


def scoped(bound: Sequence[BoundScorer], scope: str) -> list[BoundScorer]:
    """The bindings of ``bound`` of one scope (``run`` or ``conversation``)."""
    return [b for b in bound if b.binding.scope == scope]


def build_bindings(bindings: Sequence[ScorerBinding], judge_defaults: JudgeSettings) -> list[BoundScorer]:
    """Build the scorers of the enabled ``bindings`` (disabled ones are skipped).

    Raises :class:`BindingError` for the first binding that cannot be built.
    """
    bound: list[BoundScorer] = []
    for index, binding in enumerate(bindings):
        if not binding.enabled:
            continue
        try:
            scorer = _build(binding, judge_defaults)
        except _Problem as exc:
            raise BindingError(f"scorers[{index}] ({binding.id}): {exc}") from exc.__cause__
        bound.append(
            BoundScorer(
                binding=binding, scorer=scorer, uses_judge=uses_judge(scorer), version=scorer_version(binding, scorer)
            )
        )
    _check_gates(bindings, bound)
    return bound


def _check_gates(bindings: Sequence[ScorerBinding], bound: Sequence[BoundScorer]) -> None:
    """Each ``when.scorer`` names another enabled binding of the same scope, and no gate waits on
    itself through others."""
    by_id = {b.binding.id: b.binding for b in bound}
    for index, binding in enumerate(bindings):
        gate = binding.when
        if not binding.enabled or gate is None:
            continue
        where = f"scorers[{index}] ({binding.id}): when.scorer"
        other = by_id.get(gate.scorer)
        if other is None:
            raise BindingError(f"{where} {gate.scorer!r} is not an enabled binding; bound: {', '.join(by_id)}")
        if other.scope != binding.scope:
            raise BindingError(f"{where} {gate.scorer!r} scores {other.scope}s, this binding {binding.scope}s")
        path = [binding.id]
        while other is not None and other.when is not None:
            if other.id in path:
                raise BindingError(f"{where}: the gates wait on each other ({' -> '.join([*path, other.id])})")
            path.append(other.id)
            other = by_id.get(other.when.scorer)


def registry_from(bound: Sequence[BoundScorer]) -> ScorerRegistry:
    """A registry holding the bound scorers, by binding id."""
    registry = ScorerRegistry()
    for item in bound:
        registry.register(item.scorer)
    return registry


# -- building ----------------------------------------------------------------------------------
class _Problem(Exception):
    """What is wrong with one binding (wrapped into a BindingError naming it)."""


def _build(binding: ScorerBinding, defaults: JudgeSettings) -> Scorer[Any, Any]:
    runner_keys = sorted(_RUNNER_KEYS & binding.judge.keys())
    if runner_keys:
        key = runner_keys[0]
        own = f", or limits.{key} for this binding alone" if key != "max_concurrency" else ""
        raise _Problem(f"judge.{key} is a global limit: set it in the 'judge:' section{own}")
    if binding.prebuilt is not None:
        return _build_prebuilt(binding, binding.prebuilt, defaults)
    if binding.python is not None:
        return _build_python(binding, binding.python, defaults)
    raise _Problem("exactly one of 'prebuilt' or 'python' is required")


def _build_prebuilt(binding: ScorerBinding, name: str, defaults: JudgeSettings) -> Scorer[Any, Any]:
    factory = PREBUILT.get(name)
    if factory is None:
        raise _Problem(f"unknown prebuilt scorer {name!r}; valid names: {', '.join(sorted(PREBUILT))}")
    params = inspect.signature(factory).parameters
    kwargs = dict(binding.options)
    if "model" in params:
        kwargs.update(_judge_kwargs(binding, name, kwargs, defaults))
        kwargs.update(_retries(binding.judge, kwargs, defaults))
    elif binding.judge:
        raise _Problem(f"'judge' is set but prebuilt {name!r} is a code scorer that uses no judge")
    if "id" in params:
        if "id" in kwargs:
            raise _Problem("options.id is not allowed: the binding id is the scorer id")
        kwargs["id"] = binding.id
    _check_options(f"prebuilt {name!r}", params, binding.options, supplied=kwargs.keys() - binding.options.keys())
    try:
        scorer = factory(**kwargs)
    except re.error as exc:  # a pattern option (matches) that does not compile
        raise _Problem(f"bad options for prebuilt {name!r}: invalid regular expression: {exc}") from exc
    except (TypeError, ValueError) as exc:  # unknown/missing options, values out of range
        raise _Problem(f"bad options for prebuilt {name!r}: {exc}") from exc
    if scorer.id != binding.id:
        # Fixed-id prebuilts take the binding's id (see the module docstring); the display
        # name stays the prebuilt's own.
        scorer = dataclasses.replace(scorer, id=binding.id)
    return scorer


def _check_options(
    what: str, params: Mapping[str, inspect.Parameter], options: Mapping[str, Any], *, supplied: Any = ()
) -> None:
    """Name the option that is wrong, and the valid ones, before a factory's TypeError would:
    an unknown option (a misspelt one even where extra options go on to the judge: they would
    reach the provider as request parameters) and a missing required one."""
    named = {
        n: p
        for n, p in params.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n not in supplied and n not in ("id", "model")
    }
    open_ended = any(p.kind == p.VAR_KEYWORD for p in params.values())
    listed = ", ".join(named) or "none"
    valid = f"valid options: {listed}" + (" (and Judge/litellm options such as temperature)" if open_ended else "")
    for key in options:
        if key in named or key in supplied:
            continue
        close = difflib.get_close_matches(key, list(named), n=1, cutoff=0.75)
        if close:
            raise _Problem(f"{what}: unknown option {key!r} (did you mean {close[0]!r}?); {valid}")
        if not open_ended:
            raise _Problem(f"{what}: unknown option {key!r}; {valid}")
    missing = [n for n, p in named.items() if p.default is p.empty and n not in options]
    if missing:
        raise _Problem(f"{what} needs option {missing[0]!r} (under options:); {valid}")


def _judge_kwargs(
    binding: ScorerBinding, name: str, options: Mapping[str, Any], defaults: JudgeSettings
) -> dict[str, Any]:
    """model/api_base/api_key/timeout for an LLM factory: binding ``judge`` > ``options`` >
    the ``judge:`` defaults; other ``judge`` keys become Judge options."""
    override = _judge_override(binding)
    model = override.pop("model", None) or options.get("model") or defaults.model
    if not model:
        raise _Problem(
            f"prebuilt {name!r} is an LLM judge and needs a model: set judge.model "
            "on the binding, or the 'judge: model:' default (TRACESCORER_JUDGE_MODEL)"
        )
    from_options = {k: options[k] for k in _CONNECTION_OPTIONS if k in options}
    return _drop_unset({**_connection(defaults), **from_options, **override, "model": model})


def _judge_override(binding: ScorerBinding) -> dict[str, Any]:
    """The binding's ``judge`` keys as Judge arguments (``timeout_s`` is litellm's ``timeout``;
    the retry keys are turned into error processors by :func:`_retries`)."""
    override = {k: v for k, v in binding.judge.items() if k not in _RETRY_KEYS}
    if "timeout_s" in override:
        override["timeout"] = override.pop("timeout_s")
    return override


def _retries(given: Mapping[str, Any], options: dict[str, Any], defaults: JudgeSettings | None) -> dict[str, Any]:
    """Judge arguments for the retry keys: the binding's ``judge`` keys > ``options`` > the
    ``judge:`` defaults (None: no default, nothing unless given). Removes them from ``options``."""
    picked: dict[str, Any] = {}
    for key in _RETRY_KEYS:
        if key in given:
            picked[key] = given[key]
            options.pop(key, None)
        elif key in options:
            picked[key] = options.pop(key)
        elif defaults is not None:
            picked[key] = getattr(defaults, key)
    if not picked:
        return {}
    initial = picked.get("retry_initial_s", defaults.retry_initial_s if defaults is not None else 1.0)
    try:
        return retry_options(picked.get("retries", defaults.retries if defaults is not None else 0), initial_s=initial)
    except ValueError as exc:
        raise _Problem(f"judge.{exc}") from None


def _connection(defaults: JudgeSettings) -> dict[str, Any]:
    """The Judge options the ``judge:`` defaults section provides (its fallbacks too, when set)."""
    given = {"api_base": defaults.api_base, "api_key": defaults.api_key, "timeout": defaults.timeout_s}
    return _drop_unset({**given, "fallbacks": defaults.fallbacks} if defaults.fallbacks else given)


def _drop_unset(options: dict[str, Any]) -> dict[str, Any]:
    # ``api_key: ${KEY:-}`` expands to "": leave the key out so litellm falls back to the
    # provider's environment variable instead of sending an empty key.
    return {k: v for k, v in options.items() if not (k in _CONNECTION_OPTIONS and (v is None or v == ""))}


def _build_python(binding: ScorerBinding, spec: str, defaults: JudgeSettings) -> Scorer[Any, Any]:
    target = _import(spec)
    if isinstance(target, Scorer):
        if binding.options:
            raise _Problem(f"{spec!r} is a Scorer instance: 'options' need a function that returns a scorer")
        scorer = target
    elif callable(target):
        try:
            params = inspect.signature(target).parameters
        except (TypeError, ValueError):  # no signature to check (a C function): the call says
            params = None
        if params is not None:
            _check_options(repr(spec), params, binding.options)
        try:
            scorer = target(**binding.options)
        except Exception as exc:  # user code: any failure is a configuration error to report
            raise _Problem(f"calling {spec!r} failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(scorer, Scorer):
            raise _Problem(f"{spec!r} returned {type(scorer).__name__}, not a Scorer")
    else:
        raise _Problem(f"{spec!r} is {type(target).__name__}, not a Scorer or a function returning one")
    if scorer.id != binding.id:
        raise _Problem(
            f"{spec!r} has id {scorer.id!r}; a python scorer's id must equal the binding id (set id: {scorer.id})"
        )
    return _with_judge(scorer, binding, defaults)


def _import(spec: str) -> Any:
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise _Problem(f"python: {spec!r} is not of the form 'package.module:attribute'")
    try:
        value: Any = importlib.import_module(module_name)
    except Exception as exc:  # an import runs user code: report whatever it raised
        missing = isinstance(exc, ModuleNotFoundError)
        hint = " (is it installed, or on PYTHONPATH?)" if missing else ""
        raise _Problem(f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}{hint}") from exc
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise _Problem(f"module {module_name!r} has no attribute {attribute!r}") from None
    return value


def _with_judge(scorer: Scorer[Any, Any], binding: ScorerBinding, defaults: JudgeSettings) -> Scorer[Any, Any]:
    """A python scorer's judge: the binding's ``judge`` keys on top of the scorer's own judge;
    where a prompt step would have no model, the ``judge:`` defaults underneath."""
    steps = list(scorer.prompt_steps)
    if not steps:
        if binding.judge:
            raise _Problem("'judge' is set but the scorer has no prompt step that uses a judge")
        return scorer
    judge = scorer.judge
    if binding.judge:
        try:
            extra = Judge(**_drop_unset(_judge_override(binding)), **_retries(binding.judge, {}, None))
        except (TypeError, ValueError) as exc:
            raise _Problem(f"bad judge settings: {exc}") from exc
        judge = judge.merged_with(extra) if judge is not None else extra
    if any(_model_of(judge, step) is None for step in steps):
        if not defaults.model:
            raise _Problem(
                "the scorer has a prompt step without a judge model: set judge.model "
                "on the binding, or the 'judge: model:' default "
                "(TRACESCORER_JUDGE_MODEL)"
            )
        base = Judge(model=defaults.model, **_connection(defaults), **_retries({}, {}, defaults))
        judge = base.merged_with(judge)
    return dataclasses.replace(scorer, judge=judge) if judge is not scorer.judge else scorer


def _model_of(judge: Judge | None, step: PromptStep) -> str | None:
    if step.judge is not None and step.judge.model:
        return step.judge.model
    return judge.model if judge is not None and judge.model else None
