"""Judge verdicts kept for reuse, in both engines: the newest verdict of a request under a scorer
version is found within the age asked for, never for another version or request; a write deletes
verdicts past its age; through the scoring runner, a reused verdict costs no request and no rate
token."""

from __future__ import annotations

import dataclasses
import time

from fakes.fake_openai import FakeOpenAI, Reply
from support.records import numbered_run

from tracescorer.config import Settings
from tracescorer.metrics import Metrics
from tracescorer.model import AgentRun
from tracescorer.records.scores import ScoreRecord, VerdictRecord
from tracescorer.runner.bindings import build_bindings
from tracescorer.runner.decider import Decision
from tracescorer.runner.stage import ScoringRunner
from tracescorer.runner.targets import run_target

DAY_S = 86_400.0


def _verdict(text: str, *, version: str = "v1", key: str = "k" * 32) -> VerdictRecord:
    return VerdictRecord(
        input_hash=key, scorer_version=version, scorer_id="judge", model="openai/m", raw_output=text, score_id="s1"
    )


async def test_the_newest_verdict_of_a_request_is_found_for_its_version_only(any_store):
    scores = any_store.scores
    await scores.write_verdicts([_verdict('{"score": 0}')], max_age_s=DAY_S)
    await scores.write_verdicts([_verdict('{"score": 1}'), _verdict("other", version="v2")], max_age_s=DAY_S)
    found = await scores.find_verdict("k" * 32, "v1", max_age_s=DAY_S)
    assert found is not None and found.raw_output == '{"score": 1}'
    assert found == _verdict('{"score": 1}')  # every field back as written
    assert (await scores.find_verdict("k" * 32, "v2", max_age_s=DAY_S)).raw_output == "other"
    assert await scores.find_verdict("k" * 32, "v3", max_age_s=DAY_S) is None
    assert await scores.find_verdict("x" * 32, "v1", max_age_s=DAY_S) is None
    # judged longer ago than a nanosecond: too old for that age
    assert await scores.find_verdict("k" * 32, "v1", max_age_s=1e-9) is None


async def test_a_write_deletes_the_verdicts_past_its_age(any_store):
    scores = any_store.scores
    await scores.write_verdicts([_verdict("old", key="a" * 32)], max_age_s=DAY_S)
    await scores.write_verdicts([_verdict("new", key="b" * 32)], max_age_s=1e-9)
    assert await scores.find_verdict("a" * 32, "v1", max_age_s=DAY_S) is None
    assert (await scores.find_verdict("b" * 32, "v1", max_age_s=DAY_S)).raw_output == "new"


class _Told:
    def __init__(self, rows: list[ScoreRecord]) -> None:
        self.rows = rows

    def on_scores(self, scores: list[ScoreRecord]) -> None:
        self.rows.extend(scores)


def _run(i: int, like: int) -> AgentRun:
    """Run ``i`` saying what run ``like`` says (the same judge request when ``like`` is the same)."""
    said = numbered_run(like)
    return dataclasses.replace(numbered_run(i), input_messages=said.input_messages, output=said.output)


async def test_through_the_runner_a_reused_verdict_takes_no_request_and_no_rate_token(any_store, tmp_path):
    """A binding capped at one judge request a minute: the first run asks (its token taken), the same
    run again is answered by the stored verdict and scored, a new run is refused by the cap at
    admission (rate_limited, no error row, no request)."""
    with FakeOpenAI() as fake:
        fake.script("Criterion:", Reply.json({"satisfied": True, "reasoning": "answered"}))
        settings = Settings.model_validate(
            {
                "store": {"path": str(tmp_path / "unused.duckdb")},
                "judge": {"model": "openai/gpt-4o-mini", "api_base": fake.base_url, "api_key": "k", "retries": 0},
                "scoring": {"recover_window_s": 0},
                "scorers": [
                    {
                        "id": "judge",
                        "prebuilt": "multi_turn_judge",
                        "options": {"criterion": "helpful"},
                        "limits": {"requests_per_minute": 1},
                    }
                ],
            }
        )
        committed: list[ScoreRecord] = []
        runner = ScoringRunner(
            build_bindings(settings.scorers, settings.judge), any_store.runs, any_store.scores, Metrics(), settings
        )
        runner.add_score_listener(_Told(committed))
        await runner.start_workers()
        bound = runner.bindings[0]
        try:
            assert await runner.decide(bound, run_target(_run(1, 1)), "live") == Decision.SCORED
            await runner.judging.drain(10)  # the verdict is stored aside
            assert await runner.decide(bound, run_target(_run(2, 1)), "live") == Decision.SCORED
            assert await runner.decide(bound, run_target(_run(3, 3)), "live") == Decision.RATE_LIMITED
            await runner.flush()
        finally:
            await runner.stop(time.monotonic() + 10)
        assert fake.attempts("Criterion:") == 1
    by_run = {r.run_id: r for r in committed}
    assert set(by_run) == {"run-1", "run-2"}  # the refused run has no score row
    assert by_run["run-1"].judge_reused is None and by_run["run-1"].judge_cost_usd
    assert by_run["run-2"].judge_reused == 1 and by_run["run-2"].judge_cost_usd is None
    assert by_run["run-2"].score == by_run["run-1"].score == 1.0
    assert by_run["run-2"].metadata["judge_calls"][0]["reused_from"] == by_run["run-1"].id
