"""Scorer versions: the same definition gives the same version in every process; what changes a
score's meaning (criterion, threshold, judge model or options, prompt text, a prompt constant, a
step's code) gives a new one; where the judge is reached (endpoint, key, timeout) does not."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tracescorer.config import JudgeSettings, ScorerBinding
from tracescorer.runner.bindings import build_bindings
from tracescorer.runner.versions import VERSION_DIGITS

DEFAULTS = JudgeSettings(model="openai/gpt-4o-mini", api_base="http://judge.local/v1", api_key="sk-1", timeout_s=12)
JUDGE = {"id": "judge", "prebuilt": "multi_turn_judge", "scope": "conversation", "threshold": 1}


def _version(binding: dict, defaults: JudgeSettings = DEFAULTS) -> str:
    (bound,) = build_bindings([ScorerBinding.model_validate(binding)], defaults)
    return bound.version


def _judge(**changes: object) -> dict:
    return {**JUDGE, "options": {"criterion": "Answers every question."}, **changes}


def test_a_version_is_a_short_hex_hash_the_same_for_the_same_definition():
    version = _version(_judge())
    assert len(version) == VERSION_DIGITS and int(version, 16) >= 0
    assert _version(_judge()) == version
    assert _version({"id": "empty", "prebuilt": "non_empty_response"}) != version


def test_what_defines_a_score_changes_the_version():
    base = _version(_judge())
    changed = {
        "criterion": _version(_judge(options={"criterion": "Answers politely."})),
        "threshold": _version(_judge(threshold=0.5)),
        "judge model": _version(_judge(judge={"model": "openai/gpt-4.1"})),
        "judge option": _version(_judge(judge={"temperature": 0.7})),
        "default model": _version(_judge(), JudgeSettings(model="anthropic/claude-haiku-4-5")),
        "scope": _version({**_judge(), "scope": "run"}),
    }
    assert all(v != base for v in changed.values()), changed
    assert len(set(changed.values())) == len(changed)


def test_where_the_judge_is_reached_does_not_change_the_version():
    base = _version(_judge())
    elsewhere = JudgeSettings(model="openai/gpt-4o-mini", api_base="http://other/v1", api_key="sk-2", timeout_s=99)
    assert _version(_judge(), elsewhere) == base
    assert _version(_judge(judge={"api_key": "sk-3", "timeout_s": 5})) == base
    assert _version({**_judge(), "sampling": {"ratio": 0.1}, "filter": {"agent_name": "x*"}}) == base


_MODULE = """
from tracescorer import PromptStep, create_scorer

PROMPT = {prompt!r}


def _ask(*, run, results):
    return PROMPT + " Reply with a score from 0 to 1."


def _helper(*, run, results):
    return {factor}


def make():
    return (
        create_scorer(id="custom", description="custom")
        .preprocess(_helper)
        .generate_score(PromptStep(description="ask", create_prompt=_ask))
    )
"""

_PRINT = """
from tracescorer.config import JudgeSettings, ScorerBinding
from tracescorer.runner.bindings import build_bindings
(b,) = build_bindings([ScorerBinding(id="custom", python="custom_scorer_mod:make")], JudgeSettings(model="m"))
print(b.version)
"""


def _python_version(tmp_path: Path, prompt: str, factor: str = "1.0") -> str:
    """The version of a python scorer as a fresh interpreter computes it (the module rewritten)."""
    (tmp_path / "custom_scorer_mod.py").write_text(textwrap.dedent(_MODULE.format(prompt=prompt, factor=factor)))
    out = subprocess.run(
        [sys.executable, "-c", _PRINT], capture_output=True, text=True, check=True, cwd=tmp_path, timeout=60
    )
    return out.stdout.strip()


def test_a_python_scorer_has_the_same_version_in_every_process_until_its_prompt_or_code_changes(tmp_path):
    first = _python_version(tmp_path, "Is the answer polite?")
    assert _python_version(tmp_path, "Is the answer polite?") == first  # another process, same module
    assert _python_version(tmp_path, "Is the answer correct?") != first  # the module's prompt constant
    assert _python_version(tmp_path, "Is the answer polite?", factor="0.5") != first  # a function step's code
