"""Judge outages heal (``scoring.heal``) through a real daemon, OTLP traces from the SDK exporter
and a fake judge that answers 503 and then recovers: transient error scores become ok without a
backfill, also after a restart; a 401 error score is not retried; ok scores are not re-judged;
explain shows the pending retry; a score whose every attempt failed gives up; the backoff is
measured by the App's clock."""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fakes.fake_openai import FakeOpenAI, RecordedRequest, Reply
from support.clock import ManualClock
from support.daemon import DaemonProcess, config_dict, running_app, wait_for, wait_for_async
from support.db import fetch
from support.otlp import agent_trace, span_exporter, tracer

from tracescorer.config import Settings

VERDICT = Reply.json({"satisfied": True, "reasoning": "answered"})
SCORES = (
    "SELECT r.output, r.trace_id, s.status, s.source, s.error_class, s.heal_attempts, s.error_type "
    "FROM scores s JOIN runs r USING (run_id)"
)


def _asks(answer: str) -> Callable[[RecordedRequest], bool]:
    return lambda r: answer in r.prompt_text


def _config(tmp_path: Path, fake: FakeOpenAI, *, workers: bool = False, **heal: Any) -> dict[str, Any]:
    """The judge on ``fake`` and short heal periods; without worker processes (healing is the
    daemon's runner's) unless ``workers``, as deployed."""
    cfg = config_dict(
        tmp_path,
        assembly={"idle_s": 0.2},
        judge={"model": "openai/gpt-4o-mini", "api_base": fake.base_url, "api_key": "k", "retries": 0},
        scoring={"heal": {"check_s": 0.1, "initial_backoff_s": 0.1, "max_backoff_s": 0.3} | heal},
        scorers=[{"id": "judge", "prebuilt": "multi_turn_judge", "scope": "run", "options": {"criterion": "helpful"}}],
    )
    if not workers:
        cfg["workers"] = {"count": 0}
    return cfg


def _by_answer(daemon: DaemonProcess) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for row in daemon.query_json(SCORES):
        answer = next(a for a in ("flaky", "locked out", "fine", "down") if a in str(row["output"]))
        out[answer] = row
    return out


def _heal_metrics(daemon: DaemonProcess) -> dict[str, float]:
    text = urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10).read().decode()
    found = re.findall(r'^tracescorer_judge_heal_total\{result="(\w+)"\} (\S+)$', text, re.MULTILINE)
    return {result: float(value) for result, value in found}


def test_transient_errors_heal_after_a_restart_and_others_are_left_alone(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script(_asks("fine"), VERDICT)
        fake.script(_asks("flaky"), Reply.server_error(503))  # the judge is down for this one
        fake.script(_asks("locked out"), Reply.unauthorized())
        # first run: the backoff is an hour, so nothing is retried before the restart; as deployed:
        # worker processes store the error scores, the daemon's runner heals them
        cfg = _config(tmp_path, fake, workers=True, initial_backoff_s=3600, max_backoff_s=3600)
        daemon = DaemonProcess(tmp_path, cfg).start()
        try:
            with tracer(span_exporter("http", http_url=daemon.http_url)) as t:
                for answer in ("flaky", "locked out", "fine"):
                    agent_trace(t, answer=answer)
            wait_for(lambda: len(daemon.query_json(SCORES)) == 3, 60, interval_s=0.1, what="3 scores")
            before = _by_answer(daemon)
            explained = daemon.cli("explain", before["flaky"]["trace_id"]).stdout
        finally:
            assert daemon.stop() == 0, daemon.log()
        assert before["flaky"]["status"] == "error" and before["flaky"]["error_class"] == "transient"
        assert before["locked out"]["status"] == "error" and before["locked out"]["error_class"] == "permanent"
        assert before["fine"]["status"] == "ok" and before["fine"]["error_class"] is None
        assert re.search(r"heal: error \(transient\), retry 1 of 5 due in (1h00m|[1-5]?\dm)", explained), explained

        # the judge recovers after one more 503; the restarted daemon heals from the stored rows
        fake.script(_asks("flaky"), [Reply.server_error(503), VERDICT])
        daemon = DaemonProcess(tmp_path, _config(tmp_path, fake, workers=True)).start()
        try:
            wait_for(lambda: _by_answer(daemon)["flaky"]["status"] == "ok", 60, interval_s=0.1, what="healed")
            after = _by_answer(daemon)
            metrics = _heal_metrics(daemon)
            explained = daemon.cli("explain", before["flaky"]["trace_id"]).stdout
            locked = daemon.cli("explain", before["locked out"]["trace_id"]).stdout
            # a few more checks: nothing else is re-judged
            checks = len(daemon.query_json(SCORES))
            wait_for(lambda: fake.attempts(_asks("flaky")) == 3, 10, what="no extra request")
        finally:
            assert daemon.stop() == 0, daemon.log()
    # one 503 before the restart, one in the first retry after it, then the verdict
    assert after["flaky"]["source"] == "heal" and after["flaky"]["heal_attempts"] == 2
    assert after["flaky"]["error_class"] is None
    assert metrics["retried"] == 2.0 and metrics["healed"] == 1.0
    assert "(heal)" in explained and "healed after 2 automatic retries" in explained, explained
    # the 401 is permanent: asked once, never again; the ok score was judged once
    assert after["locked out"]["status"] == "error" and after["locked out"]["heal_attempts"] is None
    assert "not retried automatically (not a transient error)" in locked, locked
    assert fake.attempts(_asks("locked out")) == 1
    assert fake.attempts(_asks("fine")) == 1
    assert after["fine"]["source"] == "live" and checks == 3


def test_every_error_heals_once_the_judge_answers_again(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script(_asks("flaky"), Reply.server_error(503))
        fake.script(_asks("question 2"), Reply.disconnect())  # a connection dropped without an answer
        daemon = DaemonProcess(tmp_path, _config(tmp_path, fake, max_attempts=50)).start()
        try:
            with tracer(span_exporter("http", http_url=daemon.http_url)) as t:
                for i in range(3):
                    agent_trace(t, user=f"question {i}", answer="flaky")
            wait_for(lambda: len(daemon.query_json(SCORES)) == 3, 60, interval_s=0.1, what="3 scores")
            # the outage goes on through a few retries
            wait_for(lambda: _heal_metrics(daemon).get("retried", 0) >= 3, 60, interval_s=0.1, what="3 retries")
            errors = daemon.query_json(SCORES)
            assert all(r["status"] == "error" and r["error_class"] == "transient" for r in errors), errors
            fake.reset()  # the judge answers again
            fake.script(_asks("flaky"), VERDICT)

            def healed() -> bool:
                return all(r["status"] == "ok" for r in daemon.query_json(SCORES))

            wait_for(healed, 60, interval_s=0.1, what="every score healed")
            wait_for(lambda: _heal_metrics(daemon).get("healed") == 3.0, 10, what="3 healed counted")
            rows = daemon.query_json(SCORES)
        finally:
            assert daemon.stop() == 0, daemon.log()
    assert all(r["source"] == "heal" and r["heal_attempts"] >= 1 for r in rows)


def test_a_score_whose_every_retry_failed_gives_up(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script(_asks("down"), Reply.server_error(503))
        daemon = DaemonProcess(tmp_path, _config(tmp_path, fake, max_attempts=2)).start()
        try:
            with tracer(span_exporter("http", http_url=daemon.http_url)) as t:
                agent_trace(t, answer="down")
            wait_for(lambda: _heal_metrics(daemon).get("gave_up") == 1.0, 60, interval_s=0.1, what="gave_up counted")
            (down,) = daemon.query_json(SCORES)
            explained = daemon.cli("explain", down["trace_id"]).stdout
            requests = fake.attempts(_asks("down"))
        finally:
            assert daemon.stop() == 0, daemon.log()
    assert down["status"] == "error" and down["heal_attempts"] == 2 and down["source"] == "heal"
    assert requests == 3  # the live attempt and two retries
    assert "heal: error (transient), gave up after 2 automatic retries" in explained, explained


def test_one_daemon_of_several_heals_a_conversation_score_in_postgres(tmp_path: Path, pg_dsn: str) -> None:
    with FakeOpenAI() as fake:
        # the live attempt and the first retry meet the outage, the second retry is answered
        fake.script(_asks("flaky"), [Reply.server_error(503), Reply.server_error(503), VERDICT])
        daemons = []
        for name in ("a", "b"):
            home = tmp_path / name
            home.mkdir()
            cfg = _config(home, fake)
            cfg["store"] |= {"backend": "postgres", "postgres": {"dsn": pg_dsn, "claim_interval_s": 0.2}}
            cfg["assembly"]["conversation_idle_s"] = 0.5
            cfg["scorers"] = [
                {"id": "judge", "prebuilt": "multi_turn_judge", "scope": "conversation", "options": {"criterion": "x"}}
            ]
            daemons.append(DaemonProcess(home, cfg).start())
        sql = "SELECT status, source, heal_attempts, error_class FROM scores WHERE entity_type = 'conversation'"
        try:
            with tracer(span_exporter("http", http_url=daemons[0].http_url)) as t:
                agent_trace(t, answer="flaky")
            wait_for(lambda: daemons[0].query_json(sql), 60, interval_s=0.1, what="the conversation's score")
            wait_for(lambda: daemons[0].query_json(sql)[0]["status"] == "ok", 60, interval_s=0.1, what="healed")
            (row,) = daemons[1].query_json(sql)
            healed = sum(_heal_metrics(d).get("healed", 0) for d in daemons)
            requests = fake.attempts(_asks("flaky"))
        finally:
            for daemon in daemons:
                assert daemon.stop() == 0, daemon.log()
    assert row["source"] == "heal" and row["heal_attempts"] == 2 and row["error_class"] is None
    assert healed == 1.0
    assert requests == 3  # no daemon re-judged it twice


async def test_an_error_score_is_due_once_the_apps_clock_passed_its_backoff(tmp_path: Path) -> None:
    """An App on the test's loop and a clock the test moves: a check a second before the backoff
    passed leaves the error score alone, the first check after it re-scores it; no real waiting."""
    clock = ManualClock(start=time.time())  # the store stamps the rows with the machine's time
    sql = "SELECT status, error_class, source, heal_attempts, extract(epoch FROM updated_at) FROM scores"
    with FakeOpenAI() as fake:
        fake.script(_asks("flaky"), [Reply.server_error(503), VERDICT])
        # check_s: the loop's own checks (the first at start) stay out of the way of the test's
        cfg = _config(tmp_path, fake, check_s=3600, initial_backoff_s=3600, max_backoff_s=3600)
        async with running_app(Settings.model_validate(cfg), clock) as app:

            def send() -> None:
                with tracer(span_exporter("http", http_url=f"http://127.0.0.1:{app.http_port}")) as t:
                    agent_trace(t, answer="flaky")

            await asyncio.to_thread(send)

            async def scores() -> list[tuple[Any, ...]]:
                clock.advance(0.2)  # assembly.idle_s passes on the same clock
                return await fetch(app.stores.queries, sql)

            [(*failed, failed_at)] = await wait_for_async(scores, 60, interval_s=0.05, what="the error score")
            assert failed == ["error", "transient", "live", None]
            assert await app.healer.heal_once() == 0
            clock.advance(failed_at + 3600 - 1 - clock.time())  # a second before the backoff passed
            assert await app.healer.heal_once() == 0 and fake.attempts(_asks("flaky")) == 1
            clock.advance(2)
            assert await app.healer.heal_once() == 1

            async def healed() -> list[Any]:
                [(*row, _)] = await fetch(app.stores.queries, sql)
                return row if row[0] == "ok" else []

            assert await wait_for_async(healed, 30, interval_s=0.05, what="the re-score") == ["ok", None, "heal", 1]
    assert fake.attempts(_asks("flaky")) == 2
