"""The default ``store.spans: none``: runs and scores without a span row. Assembly reads traces
back from the segment log (spilled out of its window, late items of a trace assembled before),
the feed keeps the log's records of every trace not assembled yet, and a restart after kill -9
replays them: every acknowledged trace is assembled with all its spans, once, and scored once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind
from support.daemon import (
    DaemonProcess,
    app_metric,
    config_dict,
    running_app,
    settings_for,
    settled,
    store_children,
    wait_for,
    wait_for_async,
)
from support.db import fetch
from support.otlp import agent_trace, span_exporter, tracer
from support.routing import Acked, produce_agent_traces

from tracescorer.control import QUERY_PATH, read_serve_info
from tracescorer.store.duckdb import open_read_only

GENAI = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.provider.name": "openai"}
SCORERS = [{"id": "non-empty", "prebuilt": "non_empty_response"}]


def _send_mixed(grpc_port: int) -> dict[str, str]:
    """A plain trace, then an agent trace whose database span is exported before its model call;
    each span its own request."""
    ids: dict[str, str] = {}
    exporter = span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{grpc_port}")
    with tracer(exporter, service="checkout") as t:
        with t.start_as_current_span("GET /cart", kind=SpanKind.SERVER) as s:
            with t.start_as_current_span("SELECT carts", kind=SpanKind.CLIENT, attributes={"db.system.name": "pg"}):
                pass
            ids["plain"] = f"{s.get_span_context().trace_id:032x}"
    exporter = span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{grpc_port}")
    with tracer(exporter, service="support-bot") as t:
        with t.start_as_current_span("POST /ask", kind=SpanKind.SERVER) as s:
            with t.start_as_current_span("SELECT faq", kind=SpanKind.CLIENT, attributes={"db.system.name": "pg"}):
                pass
            with t.start_as_current_span("chat gpt-4o-mini", kind=SpanKind.CLIENT, attributes=GENAI):
                pass
            ids["agent"] = f"{s.get_span_context().trace_id:032x}"
    return ids


async def test_runs_and_scores_without_a_span_row(tmp_path):
    settings = settings_for(tmp_path, assembly={"idle_s": 0.3}, scorers=SCORERS)
    async with running_app(settings) as app:
        ids = await asyncio.to_thread(_send_mixed, app.grpc_port)
        queries = await settled(app)

        async def scored() -> list[tuple[Any, ...]]:
            return await fetch(queries, "SELECT r.trace_id FROM runs r JOIN scores s USING (run_id)")

        assert [r[0] for r in await wait_for_async(scored, 30, what="the agent run's score")] == [ids["agent"]]
        assembled = await fetch(queries, "SELECT trace_id, span_count, len(log_offsets) FROM assembled_traces")
        rows = await fetch(queries, "SELECT (SELECT count(*) FROM spans), (SELECT count(*) FROM log_records)")
        skipped = await fetch(queries, "SELECT DISTINCT trace_id FROM skipped_traces")
        read_back = await app_metric(app, "tracescorer_triage_items_total", signal="spans", decision="read_back")
    # every span of the agent trace, the database span sent before the model call included (three
    # requests); nothing of either trace in the span log
    assert assembled == [(ids["agent"], 3, 3)]
    assert rows == [(0, 0)]
    assert {r[0] for r in skipped} == {ids["plain"], ids["agent"]}
    assert read_back == 1


def test_explain_says_what_a_rowless_daemon_knows(tmp_path):
    """``explain`` from the CLI while the daemon runs: the agent trace assembled with its run and
    score, the plain trace skipped (naming the setting), an unknown id told that no span is kept."""
    cfg = config_dict(tmp_path, assembly={"idle_s": 0.3}, scorers=SCORERS)
    daemon = DaemonProcess(tmp_path, cfg).start()
    try:
        assert daemon.info is not None
        ids = _send_mixed(daemon.info.grpc_port)
        wait_for(lambda: int(daemon.query_json("SELECT count(*) AS n FROM scores")[0]["n"]) == 1, 60, what="the score")
        agent = daemon.cli("explain", ids["agent"]).stdout
        plain = daemon.cli("explain", ids["plain"]).stdout
        unknown = daemon.cli("explain", "0" * 32, check=False)
    finally:
        daemon.stop()
    assert "assembled: complete, 3 span(s)" in agent and "non-empty: scored" in agent, agent
    assert "skipped by triage: 2 span(s)" in plain and "neither decoded nor assembled" in plain, plain
    assert unknown.returncode != 0 and "With store.spans: none no span is stored" in unknown.stderr, unknown.stderr


def _agent_traces(grpc_port: int, n: int) -> list[str]:
    exporter = span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{grpc_port}")
    ids = []
    with tracer(exporter, service="window") as t:
        for i in range(n):
            with t.start_as_current_span("turn") as s:  # a root above the agent: 5 spans a trace
                agent_trace(t, user=f"question {i}", answer=f"answer {i}")
            ids.append(f"{s.get_span_context().trace_id:032x}")
    return ids


async def test_spilled_traces_are_read_back_from_the_segment_log(tmp_path):
    """A window of 12 spans for 30 traces of 5 spans each: most traces leave memory before they
    complete, and come back whole from the log's records."""
    settings = settings_for(tmp_path, assembly={"idle_s": 0.5, "max_spans": 12}, scorers=SCORERS)
    async with running_app(settings) as app:
        ids = await asyncio.to_thread(_agent_traces, app.grpc_port, 30)
        queries = await settled(app)

        async def assembled() -> list[tuple[Any, ...]]:
            rows = await fetch(queries, "SELECT trace_id, span_count, run_count FROM assembled_traces")
            return rows if len(rows) == len(ids) else []

        rows = await wait_for_async(assembled, 60, what="every trace assembled")
        spilled = app.pipeline.assembly.buffer.stats.traces_spilled

        async def scores() -> bool:
            return await fetch(queries, "SELECT count(*) FROM scores") == [(len(ids),)]

        await wait_for_async(scores, 30, what="every run scored")
        unreadable = await app_metric(app, "tracescorer_assembly_traces_unreadable_total")
    assert spilled >= 10
    assert sorted(rows) == sorted((tid, 5, 1) for tid in ids)
    assert unreadable == 0


async def test_late_spans_assemble_the_whole_trace_again_from_the_log(tmp_path):
    settings = settings_for(tmp_path, assembly={"idle_s": 0.3}, scorers=SCORERS)
    async with running_app(settings) as app:
        exporter = span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{app.grpc_port}")

        def first() -> Any:
            with tracer(exporter, service="late") as t:
                with t.start_as_current_span(
                    "invoke_agent helper", attributes={"gen_ai.operation.name": "invoke_agent"}
                ) as root:
                    with t.start_as_current_span("chat gpt-4o-mini", kind=SpanKind.CLIENT, attributes=GENAI):
                        pass
                    return root.get_span_context()

        root = await asyncio.to_thread(first)
        tid = f"{root.trace_id:032x}"
        queries = await settled(app)

        async def assembled() -> list[tuple[Any, ...]]:
            return await fetch(queries, f"SELECT span_count FROM assembled_traces WHERE trace_id = '{tid}'")

        assert await wait_for_async(assembled, 30, what="the first assembly") == [(2,)]

        def late() -> None:
            parent = trace.set_span_in_context(trace.NonRecordingSpan(root))
            exporter = span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{app.grpc_port}")
            with tracer(exporter, service="late") as t:
                with t.start_as_current_span(
                    "chat gpt-4o-mini", context=parent, kind=SpanKind.CLIENT, attributes=GENAI
                ):
                    pass

        await asyncio.to_thread(late)
        await settled(app)

        async def whole() -> bool:
            return await assembled() == [(3,)]

        await wait_for_async(whole, 30, what="the trace assembled again with its late span")
        late_passes = await app_metric(app, "tracescorer_assembly_traces_total", **{"pass": "late"})
        runs = await fetch(queries, f"SELECT count(*) FROM runs WHERE trace_id = '{tid}'")
    assert late_passes == 1
    assert runs == [(1,)]


def _assembled(db_path: str) -> tuple[dict[str, int], int, int, int]:
    """Span count per assembled trace, span rows, runs without a score, and decisions made twice."""
    con = open_read_only(db_path)
    try:
        counts = dict(con.execute("SELECT trace_id, span_count FROM assembled_traces").fetchall())
        rows = con.execute("SELECT count(*) FROM spans").fetchone()[0]
        unscored = con.execute(
            "SELECT count(*) FROM runs r WHERE NOT EXISTS (SELECT 1 FROM scores s WHERE s.run_id = r.run_id)"
        ).fetchone()[0]
        twice = con.execute(
            "SELECT count(*) FROM (SELECT 1 FROM scoring_decisions GROUP BY target_id, scorer_id HAVING count(*) > 1)"
        ).fetchone()[0]
    finally:
        con.close()
    return counts, rows, unscored, twice


@contextlib.contextmanager
def _under_load(daemon: DaemonProcess, *, lives_on: bool = False) -> Iterator[Acked]:
    """Two producers of agent traces, sending to the daemon until the block ends (then what they
    still queue is sent when the daemon ``lives_on``, else dropped)."""
    acked, stop = Acked(1), threading.Event()
    producers = [
        threading.Thread(
            target=produce_agent_traces,
            args=(daemon.grpc_endpoint, acked, stop, i),
            kwargs={"service": "rowless", "keep_queued": lives_on},
        )
        for i in range(2)
    ]
    for p in producers:
        p.start()
    try:
        yield acked
    finally:
        stop.set()
        for p in producers:
            p.join(30)


def _workers(pid: int) -> list[psutil.Process]:
    return [
        p
        for p in psutil.Process(pid).children()
        if p.status() != psutil.STATUS_ZOMBIE and "tracescorer.workers.child" in " ".join(p.cmdline())
    ]


def _config(tmp_path: Any, workers: int = 2, **assembly: float) -> dict[str, Any]:
    """Rowless (the default), ``workers`` worker processes, the scorer bound, ``assembly`` settings."""
    return config_dict(
        tmp_path,
        workers={"count": workers},
        assembly=assembly,
        scorers=SCORERS,
        shutdown={"grace_s": 10},
    )


def _scores_past(daemon: DaemonProcess, n: int) -> None:
    wait_for(
        lambda: int(daemon.query_json("SELECT count(*) AS n FROM scores")[0]["n"]) > n, 60, what="the first scores"
    )


def _intake_goes_on(acked: Acked) -> None:
    after = len(acked.spans[0])
    wait_for(lambda: len(acked.spans[0]) >= after + 1000, 60, interval_s=0.05, what="intake after the restart")


@pytest.mark.parametrize(("how", "after"), [("kill", 2), ("kill", 0), ("term", 2)])
def test_kill_9_under_load_replays_every_trace_not_assembled(tmp_path, how, after):
    """The daemon and its workers killed under load (or stopped by SIGTERM: the traces still in
    assembly's buffer are not assembled then), started again (two workers, or none): the feeds
    replay from the oldest record a trace not assembled yet needed; every acknowledged trace is
    assembled with every span acknowledged, none twice, every run scored once."""
    daemon = DaemonProcess(tmp_path, _config(tmp_path, idle_s=0.5)).start()
    with _under_load(daemon) as acked:
        wait_for(lambda: len(acked.spans[0]) >= 1500, 120, interval_s=0.05, what="spans acknowledged")
        _scores_past(daemon, 0)
        assert daemon.proc is not None
        if how == "kill":
            for worker in _workers(daemon.proc.pid):
                worker.kill()
            assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
        else:
            assert daemon.stop(signal.SIGTERM) == 0, daemon.log()[-3000:]
    want = dict(acked.trace_spans[0])

    daemon = DaemonProcess(tmp_path, _config(tmp_path, after, idle_s=0.5)).start()
    try:
        _every_trace_scored(daemon, len(want))
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()[-3000:]
    _assert_whole_once(daemon.db_path, want)


def _every_trace_scored(daemon: DaemonProcess, traces: int) -> None:
    def count(sql: str) -> int:
        return int(daemon.query_json(sql)[0]["n"])

    wait_for(
        lambda: count("SELECT count(*) AS n FROM assembled_traces") >= traces,
        90,  # below the test's timeout: a failure says what it waited for
        interval_s=0.25,
        what="the acknowledged traces assembled",
    )
    unscored = "SELECT count(*) AS n FROM runs r WHERE NOT EXISTS (SELECT 1 FROM scores s WHERE s.run_id = r.run_id)"
    wait_for(lambda: count(unscored) == 0, 60, interval_s=0.25, what="every run scored")


def _assert_whole_once(db_path: str, want: dict[str, int]) -> None:
    """Every acknowledged trace assembled with all its acknowledged spans, no span row, every run
    scored, no decision made twice."""
    counts, rows, unscored, twice = _assembled(db_path)
    assert rows == 0
    short = {tid: (n, counts.get(tid)) for tid, n in want.items() if counts.get(tid, 0) < n}
    assert not short, (
        f"{len(short)} acknowledged trace(s) assembled without all their spans, e.g. {list(short.items())[:3]}"
    )
    assert unscored == 0 and twice == 0


def test_a_worker_killed_under_load_loses_no_trace(tmp_path):
    """One of two workers killed under load: it is started again and replays from the oldest
    record a trace of its share not assembled yet needed."""
    # traces wait in the buffer for seconds: the log holds them; one whose root was not
    # acknowledged (an export refused while the worker restarts) is assembled after max_wait_s
    daemon = DaemonProcess(tmp_path, _config(tmp_path, idle_s=3, max_wait_s=15)).start()
    try:
        with _under_load(daemon, lives_on=True) as acked:
            _scores_past(daemon, 50)
            assert daemon.proc is not None
            victim = _workers(daemon.proc.pid)[0]
            victim.kill()
            wait_for(
                lambda: len(pids := {w.pid for w in _workers(daemon.proc.pid)}) == 2 and victim.pid not in pids,
                60,
                interval_s=0.1,
                what="the worker started again",
            )
            _intake_goes_on(acked)
        want = dict(acked.trace_spans[0])
        _every_trace_scored(daemon, len(want))
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()[-3000:]
    _assert_whole_once(daemon.db_path, want)


def test_the_store_process_killed_under_load_loses_no_trace(tmp_path):
    """The store process killed under load (the daemon starts a new one): the workers' run writes
    fail and are tried again, the feeds' saved offsets stay behind every trace not stored, and
    every acknowledged trace is assembled whole, once, and scored once."""
    daemon = DaemonProcess(tmp_path, _config(tmp_path, idle_s=1, max_wait_s=15)).start()
    try:
        assert daemon.proc is not None
        with _under_load(daemon, lives_on=True) as acked:
            _scores_past(daemon, 50)
            [old] = store_children(daemon.proc.pid)
            with _query_answers(daemon) as answers:  # the ops API meanwhile
                old.kill()
                wait_for(
                    lambda: [s.pid for s in store_children(daemon.proc.pid)] not in ([], [old.pid]),
                    60,
                    interval_s=0.1,
                    what="a new store process",
                )
            _intake_goes_on(acked)
        want = dict(acked.trace_spans[0])
        _every_trace_scored(daemon, len(want))
    finally:
        code = daemon.stop()
    log = daemon.log()
    assert code == 0, log[-3000:]
    assert "store process restarted" in log, log[-3000:]
    _assert_whole_once(daemon.db_path, want)
    # while the store process was away a query was answered 503 with Retry-After (the CLI waits
    # and asks again), never as if the query were wrong
    assert answers and {status for status, _ in answers} <= {200, 503}, answers
    assert all(retry for status, retry in answers if status == 503), answers


@contextlib.contextmanager
def _query_answers(daemon: DaemonProcess) -> Iterator[list[tuple[int, str | None]]]:
    """(HTTP status, Retry-After) of the ops API's answers to a query, asked every 20 ms until the block ends."""
    info = read_serve_info(daemon.db_path)
    assert info is not None and info.api_url
    body = json.dumps({"sql": "SELECT count(*) FROM runs"}).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {info.api_token}"}
    answers: list[tuple[int, str | None]] = []
    stop = threading.Event()

    def ask() -> None:
        while not stop.wait(0.02):
            req = urllib.request.Request(info.api_url.rstrip("/") + QUERY_PATH, data=body, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    answers.append((resp.status, None))
            except urllib.error.HTTPError as exc:
                answers.append((exc.code, exc.headers.get("Retry-After") or exc.read().decode()[:200]))

    asker = threading.Thread(target=ask)
    asker.start()
    try:
        yield answers
    finally:
        stop.set()
        asker.join(60)
