"""Prebuilt code scorers: deterministic, no judge call.

Text is taken from agent runs (``run.input.input_messages`` / ``run.output``) or from plain
strings, so they also work on custom runs such as ``ScorerRun(input="...", output="...")``. The word
lists (stopwords, sentiment words) are in :mod:`tracescorer.scorers.prebuilt.lexicon`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from difflib import SequenceMatcher
from typing import Any

from tracescorer.scorers.agent_io import input_text, message_text, output_text, tool_calls_of
from tracescorer.scorers.prebuilt._common import check_scale
from tracescorer.scorers.prebuilt.lexicon import NEGATIVE, POSITIVE, STOPWORDS
from tracescorer.scorers.scorer import Scorer, create_scorer
from tracescorer.scorers.types import ScorerRun, StepResults

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'_-]*")


def words(text: str) -> list[str]:
    """Lower-cased word tokens of ``text``."""
    return [w.lower().strip("'") for w in _WORD.findall(text)]


def terms(text: str) -> list[str]:
    """Content words of ``text`` (no stopwords, no one-letter tokens), first-seen order, unique."""
    seen: dict[str, None] = {}
    for w in words(text):
        if len(w) > 1 and w not in STOPWORDS:
            seen.setdefault(w, None)
    return list(seen)


def _stem(word: str) -> str:
    for suffix in ("ing", "es", "ed", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _reference(run: ScorerRun[Any, Any]) -> str:
    return message_text(run.ground_truth) if run.ground_truth is not None else input_text(run)


def _coverage_scorer(
    *,
    id: str,
    name: str,
    description: str,
    scale: float,
    noun: str,
    split: Callable[[ScorerRun[Any, Any]], tuple[list[str], list[str]]],
) -> Scorer[Any, Any]:
    """A scorer of the share of wanted items found: ``split(run) -> (wanted, found)``.

    Analysis result: ``{"wanted", "found", "missing"}``; nothing wanted scores ``scale``.
    """
    factor = check_scale(scale)

    def analyze(*, run: ScorerRun[Any, Any], results: StepResults) -> dict[str, list[str]]:
        wanted, found = split(run)
        return {"wanted": wanted, "found": found, "missing": [w for w in wanted if w not in found]}

    def score(*, run: ScorerRun[Any, Any], results: StepResults) -> float:
        a = results.analyze_step_result
        return factor if not a["wanted"] else len(a["found"]) / len(a["wanted"]) * factor

    def reason(*, run: ScorerRun[Any, Any], results: StepResults, score: float) -> str:
        a = results.analyze_step_result
        return f"Found {len(a['found'])} of {len(a['wanted'])} {noun}" + (
            f"; missing: {', '.join(a['missing'][:20])}" if a["missing"] else ""
        )

    return (
        create_scorer(id=id, name=name, description=description, type="agent")
        .analyze(analyze)
        .generate_score(score)
        .generate_reason(reason)
    )


def create_completeness_scorer(*, scale: float = 1) -> Scorer[Any, Any]:
    """Share of the input's content words (stemmed) that the output covers.

    Analysis result: ``{"wanted", "found", "missing"}`` (input terms); an input without
    content words scores ``scale``.
    """

    def split(run: ScorerRun[Any, Any]) -> tuple[list[str], list[str]]:
        wanted = terms(input_text(run))
        have = {_stem(w) for w in words(output_text(run))}
        return wanted, [t for t in wanted if _stem(t) in have]

    return _coverage_scorer(
        id="completeness-scorer",
        name="Completeness",
        scale=scale,
        description="How much of the input the output covers",
        noun="input terms",
        split=split,
    )


def create_keyword_coverage_scorer(
    *, keywords: Sequence[str] | None = None, case_sensitive: bool = False, scale: float = 1
) -> Scorer[Any, Any]:
    """Share of keywords present in the output: ``keywords=`` (phrases allowed, matched on word
    boundaries), else the input's content words. No keywords scores ``scale``."""
    flags = 0 if case_sensitive else re.IGNORECASE

    def split(run: ScorerRun[Any, Any]) -> tuple[list[str], list[str]]:
        wanted = list(keywords) if keywords is not None else terms(input_text(run))
        out = output_text(run)
        return wanted, [k for k in wanted if re.search(rf"(?<!\w){re.escape(k)}(?!\w)", out, flags)]

    return _coverage_scorer(
        id="keyword-coverage-scorer",
        name="Keyword Coverage",
        scale=scale,
        description="Share of keywords found in the output",
        noun="keywords",
        split=split,
    )


def _normalise(text: str, ignore_case: bool, ignore_whitespace: bool) -> str:
    if ignore_case:
        text = text.lower()
    if ignore_whitespace:
        text = " ".join(text.split())
    return text


def create_content_similarity_scorer(
    *, ignore_case: bool = True, ignore_whitespace: bool = True, scale: float = 1
) -> Scorer[Any, Any]:
    """Character-level similarity (difflib ratio, 0-1) between the output and the reference:
    the ground truth when given, else the input."""
    factor = check_scale(scale)

    def score(*, run: ScorerRun[Any, Any], results: StepResults) -> float:
        a = _normalise(_reference(run), ignore_case, ignore_whitespace)
        b = _normalise(output_text(run), ignore_case, ignore_whitespace)
        return SequenceMatcher(None, a, b, autojunk=False).ratio() * factor

    return (
        create_scorer(
            id="content-similarity-scorer",
            name="Content Similarity",
            type="agent",
            description="Textual similarity of output and reference",
        )
        .generate_score(score)
        .generate_reason(lambda *, run, results, score: f"Similarity {score:.3g}")
    )


def create_textual_difference_scorer(*, scale: float = 1) -> Scorer[Any, Any]:
    """How close the output is to the reference (ground truth, else input), with the edit
    operations in the analysis: ``{"ratio", "changes", "length_diff"}``; score = ratio."""
    factor = check_scale(scale)

    def analyze(*, run: ScorerRun[Any, Any], results: StepResults) -> dict[str, float]:
        a, b = _reference(run), output_text(run)
        matcher = SequenceMatcher(None, a, b, autojunk=False)
        changes = sum(1 for op in matcher.get_opcodes() if op[0] != "equal")
        longest = max(len(a), len(b)) or 1
        return {"ratio": matcher.ratio(), "changes": changes, "length_diff": abs(len(a) - len(b)) / longest}

    def reason(*, run: ScorerRun[Any, Any], results: StepResults, score: float) -> str:
        a = results.analyze_step_result
        return f"Similarity {a['ratio']:.3g} with {a['changes']} change(s); length differs by {a['length_diff']:.0%}"

    return (
        create_scorer(
            id="textual-difference-scorer",
            name="Textual Difference",
            type="agent",
            description="Difference between output and reference",
        )
        .analyze(analyze)
        .generate_score(lambda *, run, results: results.analyze_step_result["ratio"] * factor)
        .generate_reason(reason)
    )


def sentiment(text: str) -> float:
    """Lexicon sentiment in [-1, 1]: (positive - negative) / (positive + negative)."""
    toks = words(text)
    pos = sum(1 for t in toks if t in POSITIVE)
    neg = sum(1 for t in toks if t in NEGATIVE)
    return 0.0 if pos + neg == 0 else (pos - neg) / (pos + neg)


def create_tone_consistency_scorer(*, scale: float = 1) -> Scorer[Any, Any]:
    """Tone consistency. With a reference (ground truth, else input) the score is
    ``1 - |sentiment(output) - sentiment(reference)| / 2``; without one, the stability of
    sentiment across the output's sentences, ``1 - variance``."""
    factor = check_scale(scale)

    def analyze(*, run: ScorerRun[Any, Any], results: StepResults) -> dict[str, Any]:
        out = output_text(run)
        ref = _reference(run)
        if ref.strip():
            return {"mode": "reference", "output_sentiment": sentiment(out), "reference_sentiment": sentiment(ref)}
        values = [sentiment(s) for s in re.split(r"[.!?]+", out) if s.strip()]
        mean = sum(values) / len(values) if values else 0.0
        var = sum((v - mean) ** 2 for v in values) / len(values) if values else 0.0
        return {"mode": "stability", "mean": mean, "variance": var}

    def score(*, run: ScorerRun[Any, Any], results: StepResults) -> float:
        a = results.analyze_step_result
        if a["mode"] == "reference":
            return (1 - abs(float(a["output_sentiment"]) - float(a["reference_sentiment"])) / 2) * factor
        return max(0.0, 1 - float(a["variance"])) * factor

    return (
        create_scorer(
            id="tone-consistency-scorer", name="Tone Consistency", type="agent", description="Consistency of sentiment"
        )
        .analyze(analyze)
        .generate_score(score)
        .generate_reason(lambda *, run, results, score: f"Tone consistency {score:.3g} ({results.analyze_step_result})")
    )


def create_tool_call_accuracy_scorer(
    *,
    expected_tool: str | None = None,
    expected_tool_order: Sequence[str] | None = None,
    strict_mode: bool = False,
    scale: float = 1,
) -> Scorer[Any, Any]:
    """Whether the agent called the expected tool(s). Binary: ``scale`` or 0.

    - ``expected_tool``: called at all; in ``strict_mode``, it must be the only tool called.
    - ``expected_tool_order``: the tools appear in this relative order (other calls may come in
      between); in ``strict_mode`` the calls must be exactly this sequence.
    """
    if (expected_tool is None) == (expected_tool_order is None):
        raise ValueError("give exactly one of expected_tool or expected_tool_order")
    factor = check_scale(scale)
    order = list(expected_tool_order or [])

    def analyze(*, run: ScorerRun[Any, Any], results: StepResults) -> dict[str, Any]:
        called = [c.name for c in tool_calls_of(run)]
        if expected_tool is not None:
            ok = called == [expected_tool] if strict_mode else expected_tool in called
        elif strict_mode:
            ok = called == order
        else:
            it = iter(called)
            ok = all(any(name == c for c in it) for name in order)
        return {"called": called, "correct": ok}

    def reason(*, run: ScorerRun[Any, Any], results: StepResults, score: float) -> str:
        a = results.analyze_step_result
        want = expected_tool if expected_tool is not None else " -> ".join(order)
        mode = "strict" if strict_mode else "lenient"
        return (
            f"{'Correct' if a['correct'] else 'Incorrect'} ({mode}): expected {want}, "
            f"called {', '.join(a['called']) or 'no tools'}"
        )

    return (
        create_scorer(
            id="tool-call-accuracy-scorer",
            name="Tool Call Accuracy",
            type="agent",
            description="Whether the expected tools were called",
        )
        .analyze(analyze)
        .generate_score(lambda *, run, results: factor if results.analyze_step_result["correct"] else 0.0)
        .generate_reason(reason)
    )
