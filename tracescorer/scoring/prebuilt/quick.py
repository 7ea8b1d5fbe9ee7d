"""Quick checks: binary code scorers (``scale`` when the check passes, else 0), with a reason.

Every check takes ``id=`` to override its default id, so several checks of one kind can be
registered or run together.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from tracescorer.scoring.agent_io import output_text, tool_calls_of
from tracescorer.scoring.prebuilt._common import check_scale
from tracescorer.scoring.scorer import Scorer, create_scorer
from tracescorer.scoring.types import ScorerRun, StepResults


def _check(id: str, name: str, description: str, scale: float,
           test: Callable[[ScorerRun[Any, Any]], tuple[bool, str]],
           custom_id: str | None = None) -> Scorer[Any, Any]:
    factor = check_scale(scale)
    id = custom_id or id

    def analyze(*, run: ScorerRun[Any, Any], results: StepResults) -> dict[str, Any]:
        passed, detail = test(run)
        return {"passed": passed, "detail": detail}

    return (create_scorer(id=id, name=name, description=description, type="agent")
            .analyze(analyze)
            .generate_score(lambda *, run, results:
                            factor if results.analyze_step_result["passed"] else 0.0)
            .generate_reason(lambda *, run, results, score:
                             ("Passed: " if results.analyze_step_result["passed"] else "Failed: ")
                             + results.analyze_step_result["detail"]))


def _as_list(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def create_includes_check(text: str | Sequence[str], *, case_sensitive: bool = False,
                          match_all: bool = True, scale: float = 1,
        id: str | None = None) -> Scorer[Any, Any]:
    """The output contains ``text`` (all of the strings, or any with ``match_all=False``)."""
    wanted = _as_list(text)

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        out = output_text(run) if case_sensitive else output_text(run).lower()
        found = [t for t in wanted if (t if case_sensitive else t.lower()) in out]
        ok = len(found) == len(wanted) if match_all else bool(found)
        return ok, f"found {found!r} of {wanted!r}"

    return _check("includes-check", "Includes", f"Output includes {wanted!r}", scale, test, id)


def create_excludes_check(text: str | Sequence[str], *, case_sensitive: bool = False,
                          scale: float = 1,
        id: str | None = None) -> Scorer[Any, Any]:
    """The output contains none of the strings."""
    banned = _as_list(text)

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        out = output_text(run) if case_sensitive else output_text(run).lower()
        found = [t for t in banned if (t if case_sensitive else t.lower()) in out]
        return not found, f"found {found!r}" if found else f"none of {banned!r} found"

    return _check("excludes-check", "Excludes", f"Output excludes {banned!r}", scale, test, id)


def create_matches_check(pattern: str, *, flags: int = 0, scale: float = 1,
        id: str | None = None) -> Scorer[Any, Any]:
    """The output matches the regular expression ``pattern`` (``re.search``)."""
    compiled = re.compile(pattern, flags)

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        match = compiled.search(output_text(run))
        return match is not None, (f"matched {match.group(0)[:80]!r}" if match
                                   else f"no match for /{pattern}/")

    return _check("matches-check", "Matches", f"Output matches /{pattern}/", scale, test, id)


def create_called_tool_check(tool_name: str, *, scale: float = 1,
        id: str | None = None) -> Scorer[Any, Any]:
    """The agent called ``tool_name`` at least once."""

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        called = [c.name for c in tool_calls_of(run)]
        return tool_name in called, f"called {called or 'no tools'}"

    return _check("called-tool-check", "Called Tool", f"Agent called {tool_name}", scale, test, id)


def create_did_not_call_check(tool_name: str, *, scale: float = 1,
        id: str | None = None) -> Scorer[Any, Any]:
    """The agent never called ``tool_name``."""

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        called = [c.name for c in tool_calls_of(run)]
        return tool_name not in called, f"called {called or 'no tools'}"

    return _check("did-not-call-check", "Did Not Call", f"Agent did not call {tool_name}",
                  scale, test, id)


def create_max_tool_calls_check(max_calls: int, *, scale: float = 1,
        id: str | None = None) -> Scorer[Any, Any]:
    """The agent made at most ``max_calls`` tool calls."""

    def test(run: ScorerRun[Any, Any]) -> tuple[bool, str]:
        n = len(tool_calls_of(run))
        return n <= max_calls, f"{n} tool call(s), limit {max_calls}"

    return _check("max-tool-calls-check", "Max Tool Calls", f"At most {max_calls} tool calls",
                  scale, test, id)


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

    return _check("non-empty-response-check", "Non-empty Response", "Output has text", scale,
                  test, id)
