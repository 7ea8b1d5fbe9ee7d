"""Quick checks: binary code scorers (``scale`` when the check passes, else 0), with a reason.

Every check takes ``id=`` to override its default id, so several checks of one kind can be
registered or run together.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from tracescorer.scorers.agent_io import output_text, tool_calls_of
from tracescorer.scorers.prebuilt._common import check_scale, check_unit
from tracescorer.scorers.scorer import Scorer, create_scorer
from tracescorer.scorers.types import ScorerRun, StepResults


def _check(
    id: str,
    name: str,
    description: str,
    scale: float,
    test: Callable[[ScorerRun[Any, Any]], tuple[bool, str]],
    custom_id: str | None = None,
) -> Scorer[Any, Any]:
    factor = check_scale(scale)
    id = custom_id or id

    def analyze(*, run: ScorerRun[Any, Any], results: StepResults) -> dict[str, Any]:
        passed, detail = test(run)
        return {"passed": passed, "detail": detail}

    return (
        create_scorer(id=id, name=name, description=description, type="agent")
        .analyze(analyze)
        .generate_score(lambda *, run, results: factor if results.analyze_step_result["passed"] else 0.0)
        .generate_reason(
            lambda *, run, results, score: (
                ("Passed: " if results.analyze_step_result["passed"] else "Failed: ")
                + results.analyze_step_result["detail"]
            )
        )
    )


def _as_list(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def create_includes_check(
    text: str | Sequence[str],
    *,
    case_sensitive: bool = False,
    match_all: bool = True,
    scale: float = 1,
    id: str | None = None,
) -> Scorer[Any, Any]:
    """The output contains ``text`` (all of the strings, or any with ``match_all=False``)."""
    wanted = _as_list(text)

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        out = output_text(run) if case_sensitive else output_text(run).lower()
        found = [t for t in wanted if (t if case_sensitive else t.lower()) in out]
        ok = len(found) == len(wanted) if match_all else bool(found)
        return ok, f"found {found!r} of {wanted!r}"

    return _check("includes-check", "Includes", f"Output includes {wanted!r}", scale, test, id)


def create_excludes_check(
    text: str | Sequence[str], *, case_sensitive: bool = False, scale: float = 1, id: str | None = None
) -> Scorer[Any, Any]:
    """The output contains none of the strings."""
    banned = _as_list(text)

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        out = output_text(run) if case_sensitive else output_text(run).lower()
        found = [t for t in banned if (t if case_sensitive else t.lower()) in out]
        return not found, f"found {found!r}" if found else f"none of {banned!r} found"

    return _check("excludes-check", "Excludes", f"Output excludes {banned!r}", scale, test, id)


def create_matches_check(pattern: str, *, flags: int = 0, scale: float = 1, id: str | None = None) -> Scorer[Any, Any]:
    """The output matches the regular expression ``pattern`` (``re.search``)."""
    compiled = re.compile(pattern, flags)

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        match = compiled.search(output_text(run))
        return match is not None, (f"matched {match.group(0)[:80]!r}" if match else f"no match for /{pattern}/")

    return _check("matches-check", "Matches", f"Output matches /{pattern}/", scale, test, id)


def create_called_tool_check(
    tool_name: str, *, times: int = 1, scale: float = 1, id: str | None = None
) -> Scorer[Any, Any]:
    """The agent called ``tool_name`` at least ``times`` times (default once)."""
    if isinstance(times, bool) or not isinstance(times, int) or times < 1:
        raise ValueError(f"times must be a whole number >= 1, got {times!r}")

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        called = [c.name for c in tool_calls_of(run)]
        count = called.count(tool_name)
        want = f"{times} time(s)" if times > 1 else "once"
        return count >= times, (
            f"{tool_name} called {count} time(s), wanted at least {want}; called {called or 'no tools'}"
        )

    more = f" at least {times} times" if times > 1 else ""
    return _check("called-tool-check", "Called Tool", f"Agent called {tool_name}{more}", scale, test, id)


def create_did_not_call_check(tool_name: str, *, scale: float = 1, id: str | None = None) -> Scorer[Any, Any]:
    """The agent never called ``tool_name``."""

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        called = [c.name for c in tool_calls_of(run)]
        return tool_name not in called, f"called {called or 'no tools'}"

    return _check("did-not-call-check", "Did Not Call", f"Agent did not call {tool_name}", scale, test, id)


def create_max_tool_calls_check(max_calls: int, *, scale: float = 1, id: str | None = None) -> Scorer[Any, Any]:
    """The agent made at most ``max_calls`` tool calls."""

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        n = len(tool_calls_of(run))
        return n <= max_calls, f"{n} tool call(s), limit {max_calls}"

    return _check("max-tool-calls-check", "Max Tool Calls", f"At most {max_calls} tool calls", scale, test, id)


def create_no_tool_errors_check(*, scale: float = 1, id: str | None = None) -> Scorer[Any, Any]:
    """No tool call ended in an error (``ToolCall.error`` from the trace)."""

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        failed = [f"{c.name}: {c.error}" for c in tool_calls_of(run) if c.error]
        return not failed, "; ".join(failed)[:500] if failed else "no tool errors"

    return _check("no-tool-errors-check", "No Tool Errors", "No tool call failed", scale, test, id)


def create_non_empty_response_check(*, scale: float = 1, id: str | None = None) -> Scorer[Any, Any]:
    """The output has non-whitespace text."""

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        n = len(output_text(run).strip())
        return n > 0, f"{n} character(s) of text"

    return _check("non-empty-response-check", "Non-empty Response", "Output has text", scale, test, id)


def create_equals_check(
    text: str, *, case_sensitive: bool = False, scale: float = 1, id: str | None = None
) -> Scorer[Any, Any]:
    """The output text equals ``text`` (ignoring case unless ``case_sensitive``, and
    surrounding whitespace)."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")

    def norm(value: str) -> str:
        value = value.strip()
        return value if case_sensitive else value.lower()

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        out = output_text(run)
        ok = norm(out) == norm(text)
        return ok, "output equals the expected text" if ok else (
            f"output {out.strip()[:80]!r} differs from {text[:80]!r}"
        )

    return _check("equals-check", "Equals", f"Output equals {text[:80]!r}", scale, test, id)


def dice_similarity(a: str, b: str) -> float:
    """Sørensen-Dice coefficient of the two strings' character bigrams, whitespace ignored
    (the measure of the ``string-similarity`` package Mastra uses): 1 for equal strings."""
    a, b = re.sub(r"\s+", "", a), re.sub(r"\s+", "", b)
    if a == b:
        return 1.0
    if len(a) < 2 or len(b) < 2:
        return 0.0
    bigrams = Counter(a[i : i + 2] for i in range(len(a) - 1))
    shared = 0
    for i in range(len(b) - 1):
        pair = b[i : i + 2]
        if bigrams[pair] > 0:
            bigrams[pair] -= 1
            shared += 1
    return 2.0 * shared / (len(a) + len(b) - 2)


def create_similarity_check(
    text: str, *, threshold: float | None = None, case_sensitive: bool = False, scale: float = 1, id: str | None = None
) -> Scorer[Any, Any]:
    """String similarity of the output and ``text`` (:func:`dice_similarity`, 0-1).

    Without ``threshold`` the score is the similarity times ``scale``; with one (0..1) it is
    binary: ``scale`` when the similarity reaches it, else 0.
    """
    if threshold is not None:
        check_unit("threshold", threshold)
    factor = check_scale(scale)

    def analyze(*, run: ScorerRun[Any, Any], results: StepResults) -> dict[str, Any]:
        out = output_text(run)
        a, b = (out, text) if case_sensitive else (out.lower(), text.lower())
        return {"similarity": dice_similarity(a, b), "threshold": threshold}

    def score(*, run: ScorerRun[Any, Any], results: StepResults) -> float:
        value = float(results.analyze_step_result["similarity"])
        if threshold is None:
            return value * factor
        return factor if value >= threshold else 0.0

    def reason(*, run: ScorerRun[Any, Any], results: StepResults, score: float) -> str:
        value = results.analyze_step_result["similarity"]
        bar = (
            "" if threshold is None else (f" ({'reaches' if value >= threshold else 'below'} threshold {threshold:g})")
        )
        return f"Similarity {value:.3g} to {text[:80]!r}{bar}"

    return (
        create_scorer(
            id=id or "similarity-check", name="Similarity", type="agent", description=f"Output similar to {text[:80]!r}"
        )
        .analyze(analyze)
        .generate_score(score)
        .generate_reason(reason)
    )


def create_tool_order_check(order: Sequence[str], *, scale: float = 1, id: str | None = None) -> Scorer[Any, Any]:
    """The tools in ``order`` were called in that order (other calls may come in between)."""
    expected = [str(name) for name in order]
    if not expected:
        raise ValueError("order must name at least one tool")

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        called = [c.name for c in tool_calls_of(run)]
        matched = 0
        for name in called:
            if matched < len(expected) and name == expected[matched]:
                matched += 1
        return matched == len(expected), (
            f"expected {' -> '.join(expected)}, called {' -> '.join(called) or 'no tools'}"
        )

    return _check("tool-order-check", "Tool Order", f"Tools called in order {expected}", scale, test, id)


def create_used_no_tools_check(*, scale: float = 1, id: str | None = None) -> Scorer[Any, Any]:
    """The agent made no tool call at all."""

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        called = [c.name for c in tool_calls_of(run)]
        return not called, f"called {called}" if called else "no tool calls"

    return _check("used-no-tools-check", "Used No Tools", "No tool was called", scale, test, id)
