"""Trace assembly in the running daemon: split and out-of-order delivery, late spans upserting,
backpressure when the backlog is full, restart recovery, unmatched traces."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from support.daemon import DaemonProcess, plain_config, wait_for
from support.payloads import trace_request

TRACE = "7a1c0ffee0000000000000000000beef"
PLAIN = "0dd0ffee0000000000000000000beef0"  # the unmatched trace, beside TRACE in the shared daemon
ROOT, CHAT1, TOOL, CHAT2 = "a000000000000001", "a000000000000002", "a000000000000003", "a000000000000004"
T0 = 1_800_000_000_000_000_000


def agent_spans(trace: str = TRACE, question: str = "Weather in Paris?", answer: str = "Sunny, 22C") -> list[dict]:
    msgs_in = json.dumps([{"role": "user", "parts": [{"type": "text", "content": question}]}])
    msgs_out = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": answer}]}])
    return [
        {
            "trace_id": trace,
            "span_id": ROOT,
            "name": "invoke_agent weather",
            "start": T0,
            "end": T0 + 9_000,
            "attributes": {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "weather",
                "gen_ai.conversation.id": "conv-" + trace[:6],
                "gen_ai.input.messages": msgs_in,
                "gen_ai.output.messages": msgs_out,
            },
        },
        {
            "trace_id": trace,
            "span_id": CHAT1,
            "parent_span_id": ROOT,
            "name": "chat m",
            "start": T0 + 1_000,
            "end": T0 + 2_000,
            "attributes": {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
        },
        {
            "trace_id": trace,
            "span_id": TOOL,
            "parent_span_id": ROOT,
            "name": "execute_tool get_weather",
            "start": T0 + 3_000,
            "end": T0 + 4_000,
            "attributes": {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.call.arguments": '{"city": "Paris"}',
                "gen_ai.tool.call.result": "Sunny, 22C",
            },
        },
        {
            "trace_id": trace,
            "span_id": CHAT2,
            "parent_span_id": ROOT,
            "name": "chat m",
            "start": T0 + 5_000,
            "end": T0 + 6_000,
            "attributes": {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
        },
    ]


def post(daemon: DaemonProcess, spans: list[dict]) -> None:
    req = urllib.request.Request(
        daemon.http_url + "/v1/traces",
        data=trace_request(spans).SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200


def runs(daemon: DaemonProcess, *args: str) -> list[dict]:
    """``tracescorer runs --format jsonl ARGS`` through the real CLI."""
    out = daemon.cli("runs", "--format", "jsonl", *args).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One daemon for the tests that only send and read (each its own trace ids)."""
    tmp = tmp_path_factory.mktemp("assembly")
    daemon = DaemonProcess(tmp, plain_config(tmp, assembly={"idle_s": 0.5})).start()
    yield daemon
    assert daemon.stop() == 0, daemon.log()


def wait_runs(daemon: DaemonProcess, count: int, check=lambda rs: True, trace_id: str | None = None) -> list[dict]:
    """Poll (in-process) until the daemon lists ``count`` runs (of ``trace_id``) passing ``check``."""
    return wait_for(
        lambda: (lambda rs: rs if len(rs) == count and check(rs) else None)(daemon.runs(trace_id=trace_id)),
        60,  # returns as soon as they are there; 20 s ran out once on an oversubscribed machine
        interval_s=0.1,
        what=f"{count} run(s)",
    )


def test_split_out_of_order_delivery_and_late_span_upsert(shared):
    daemon = shared
    spans = agent_spans()
    # children before their parent, one span per request, the tool span held back
    for span in [spans[3], spans[1], spans[0]]:
        post(daemon, [span])
    first = wait_runs(daemon, 1, trace_id=TRACE)[0]
    assert first["agent_name"] == "weather" and first["tool_calls"] == []
    assert [m["content"] for m in first["input_messages"]] == ["Weather in Paris?"]
    post(daemon, [spans[2]])  # the late tool span
    second = wait_runs(daemon, 1, check=lambda rs: rs[0]["tool_calls"] != [], trace_id=TRACE)[0]
    assert second["run_id"] == first["run_id"]
    assert second["tool_calls"] == [
        {
            "id": "call_1",
            "name": "get_weather",
            "arguments": {"city": "Paris"},
            "result": "Sunny, 22C",
            "error": None,
        }
    ]
    assert len(runs(daemon, "--conversation", first["conversation_id"])) == 1
    metrics = urllib.request.urlopen(daemon.http_url + "/metrics").read().decode()
    # the shared daemon's only late trace (the unmatched test's is not late)
    assert 'tracescorer_assembly_traces_total{pass="late",reason="complete"} 1.0' in metrics


def test_full_assembly_backlog_pushes_back_and_loses_nothing(tmp_path):
    """A full assembly buffer holds the segment log's feed back: what comes meanwhile is
    acknowledged and waits in the log (on disk), and once the log is segment_log.max_lag_bytes
    ahead new requests are refused as retryable; nothing is dropped."""
    # max_wait_s: the steps up to the refusal must happen before the first two traces are handed
    # out (3 s was not always enough on a loaded machine)
    cfg = plain_config(
        tmp_path, assembly={"idle_s": 0.5, "max_wait_s": 8, "max_traces": 2}, segment_log={"max_lag_bytes": 1}
    )
    daemon = DaemonProcess(tmp_path, cfg).start()
    try:
        traces = [f"{i:032x}" for i in range(1, 5)]
        # the first two: only the model calls (their roots never come: they wait max_wait_s); the
        # third and fourth whole (assembled idle_s after they come out of the log)
        whole = {
            t: agent_spans(t) if t in traces[2:] else [s for s in agent_spans(t) if s["span_id"] != ROOT]
            for t in traces
        }
        for t in traces[:3]:
            spans = whole[t]
            wait_for(lambda spans=spans: _posted(daemon, spans), 20, interval_s=0.1, what=f"trace {t} taken")
            if t == traces[1]:
                wait_for(lambda: _feed_held(daemon), 20, what="the feed held back by the full assembly buffer")
        # the third was taken (it waits in the log); past the log's bound the fourth is refused, retryable
        with pytest.raises(urllib.error.HTTPError) as refused:
            post(daemon, whole[traces[3]])
        assert refused.value.code == 429 and refused.value.headers["Retry-After"] == "1"
        with pytest.raises(urllib.error.HTTPError) as not_ready:
            urllib.request.urlopen(daemon.http_url + "/readyz", timeout=10)
        assert not_ready.value.code == 503 and "segment log's feed" in not_ready.value.read().decode()
        # max_wait hands the two out, incomplete (no root): each orphan model call is a run (the
        # third, out of the log then, follows idle_s later)
        got = wait_for(
            lambda: (lambda rs: rs if len(rs) == 4 else None)(
                [r for r in daemon.runs() if r["trace_id"] in traces[:2]]
            ),
            60,
            interval_s=0.1,
            what="the first two traces' runs",
        )
        assert all(r["attributes"]["tracescorer.incomplete"] is True for r in got)
        wait_for(
            lambda: _posted(daemon, whole[traces[3]]),
            20,
            interval_s=0.2,
            what="the fourth trace to be taken",
        )
        got = wait_runs(daemon, 6)  # the third and fourth come out of the log and are assembled, one run each
        assert {r["trace_id"] for r in got} == set(traces)
        later = [r for r in got if r["trace_id"] in traces[2:]]
        assert len(later) == 2 and all("tracescorer.incomplete" not in r["attributes"] for r in later), later
    finally:
        assert daemon.stop() == 0, daemon.log()


def _feed_held(daemon: DaemonProcess) -> bool:
    with urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return "tracescorer_assembly_buffered_traces 2.0" in text


def _posted(daemon: DaemonProcess, spans: list[dict]) -> bool:
    try:
        post(daemon, spans)
    except urllib.error.HTTPError as exc:
        assert exc.code == 429
        return False
    return True


def test_restart_recovers_traces_never_assembled(tmp_path):
    slow = plain_config(tmp_path, assembly={"idle_s": 3600})
    daemon = DaemonProcess(tmp_path, slow).start()
    post(daemon, agent_spans())
    assert daemon.stop() == 0
    assert runs(daemon) == []  # nothing assembled before the stop
    fast = plain_config(tmp_path, assembly={"idle_s": 0.5})
    daemon = DaemonProcess(tmp_path, fast).start()
    try:
        got = wait_runs(daemon, 1)  # replayed from the segment log at start, no new traffic
        assert got[0]["agent_name"] == "weather" and len(got[0]["tool_calls"]) == 1
        assert daemon.query_json("SELECT reason FROM assembled_traces") == [{"reason": "recovered"}]
    finally:
        assert daemon.stop() == 0, daemon.log()


def test_trace_without_agent_conventions_is_listed_as_unmatched(shared):
    """A trace triage keeps (a GenAI attribute) that no convention reads a run from is listed with
    the reason; a plain trace (no marker at all) is skipped by triage, counted and named apart."""
    daemon = shared
    attributes = {"http.method": "GET", "gen_ai.unrelated": "x"}
    post(daemon, [{"trace_id": PLAIN, "span_id": ROOT, "name": "GET /health", "attributes": attributes}])
    rows = wait_for(lambda: daemon.runs(trace_id=PLAIN, unmatched=True), 20, interval_s=0.1, what="unmatched trace")
    assert runs(daemon, "--unmatched", "--trace", PLAIN) == rows
    assert len(rows) == 1 and rows[0]["trace_id"] == PLAIN and rows[0]["root_name"] == "GET /health"
    assert rows[0]["unmatched_reason"] == "genai: no agent span or model call"
    assert runs(daemon, "--trace", PLAIN) == []
    table = daemon.cli("runs", "--unmatched").stdout
    assert PLAIN in table
    skipped = f"{0xFEED:032x}"
    post(daemon, [{"trace_id": skipped, "span_id": ROOT, "name": "GET /health", "attributes": {"http.method": "GET"}}])
    wait_for(
        lambda: daemon.query_json(f"SELECT trace_id FROM skipped_traces WHERE trace_id = '{skipped}'") or None,
        20,
        interval_s=0.1,
        what="the plain trace skipped",
    )
    listed = daemon.cli("runs", "--unmatched")
    assert skipped not in listed.stdout and "skipped by triage" in listed.stderr


def test_a_late_span_after_a_restart_replaces_what_the_daemon_forgot_it_had_stored(tmp_path):
    """After a restart the daemon no longer knows it assembled a trace: a late span arrives alone,
    without its root. Once handed out (``max_wait_s``) the store says the trace was assembled
    before: it is read back whole and assembled again as a late trace, its rows replaced (not
    taken for new, not rebuilt from the late span alone)."""
    cfg = plain_config(
        tmp_path,
        assembly={"idle_s": 0.5, "max_wait_s": 1.5},
        scorers=[{"id": "non-empty", "prebuilt": "non_empty_response"}],
    )
    daemon = DaemonProcess(tmp_path, cfg).start()
    spans = agent_spans()
    try:
        post(daemon, [s for s in spans if s["span_id"] != TOOL])
        first = wait_runs(daemon, 1)[0]
        wait_for(
            lambda: daemon.query_json("SELECT count(*) AS n FROM scores")[0]["n"] == 1,
            20,
            interval_s=0.1,
            what="the first score",
        )
        before = daemon.query_json(
            "SELECT id, epoch_us(created_at) AS created, epoch_us(updated_at) AS updated FROM scores"
        )[0]
    finally:
        assert daemon.stop() == 0, daemon.log()
    daemon.start()
    try:
        post(daemon, [s for s in spans if s["span_id"] == TOOL])  # the late tool span, after the restart
        second = wait_runs(daemon, 1, check=lambda rs: rs[0]["tool_calls"] != [])[0]
        assert second["run_id"] == first["run_id"]
        assert daemon.query_json("SELECT span_count FROM assembled_traces") == [{"span_count": 4}]
        wait_for(lambda: daemon.metric("tracescorer_score_results_total") >= 1, 20, interval_s=0.1, what="the re-score")
        after = daemon.query_json(
            "SELECT id, epoch_us(created_at) AS created, epoch_us(updated_at) AS updated FROM scores"
        )
        # the same row (replaced, not a second one); its stamps move only if the re-score differs
        assert len(after) == 1 and after[0]["id"] == before["id"] and after[0]["created"] == before["created"]
        decisions = daemon.query_json("SELECT decision, count(*) AS n FROM scoring_decisions GROUP BY ALL")
        assert decisions == [{"decision": "scored", "n": 1}]
    finally:
        assert daemon.stop() == 0, daemon.log()
