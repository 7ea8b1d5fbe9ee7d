"""Every captured case, replayed through the running daemon over its original transport with
``tracescorer replay``, gives the runs of its expected.json. One parametrized test over
tests/data/captures: new cases need no new code. One daemon takes every case (their trace ids
differ), replayed by two ``replay`` processes (one per transport) before the first test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.captures import CAPTURES, CASES, CONTRACT_KEYS, case_transport, check_parents, check_run, load_case
from support.daemon import DaemonProcess, plain_config, wait_for
from support.otlp import span_exporter, tracer


def _expected(case: Path) -> dict:
    return json.loads((case / "expected.json").read_text())


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("captures")
    d = DaemonProcess(tmp, plain_config(tmp, assembly={"idle_s": 0.3})).start()
    try:
        for transport, endpoint in (("http", d.http_url), ("grpc", f"grpc://{d.grpc_endpoint}")):
            cases = [str(c) for c in CASES if case_transport(c, _expected(c)) == transport]
            if cases:  # each case's files in order, the cases one after the other
                d.cli("replay", *cases, "--endpoint", endpoint)
        yield d
    finally:
        assert d.stop() == 0, d.log()


def _runs_cli(daemon, *args: str) -> list[dict]:
    out = daemon.cli("runs", "--format", "jsonl", *args).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_replayed_capture_gives_expected_runs(daemon, case: Path):
    expected = _expected(case)
    spans, _ = load_case(case)
    trace_ids = sorted({s.trace_id for s in spans})

    def runs_of_case() -> list[dict] | None:
        got = [r for t in trace_ids for r in daemon.runs(trace_id=t)]  # polled in-process
        return got if len(got) >= len(expected["runs"]) else None

    got = wait_for(runs_of_case, 30, interval_s=0.2, what=f"{len(expected['runs'])} runs of {case.name}")
    got.sort(key=lambda r: (r["started_at"], r["run_id"]))
    assert len(got) == len(expected["runs"])
    for run, want in zip(got, expected["runs"], strict=False):
        assert list(run) == CONTRACT_KEYS
        check_run(run, want, expected)
    check_parents(got, expected)
    # Every conversation the runs belong to lists them (a nested agent may have its own); read
    # in-process as `runs --conversation` reads it (the CLI itself: the test below).
    for conv in {want.get("conversation_id", expected.get("conversation_id")) for want in expected["runs"]} - {None}:
        by_conv = daemon.runs(conversation_id=conv)
        mine = {
            run["run_id"]
            for run, want in zip(got, expected["runs"], strict=False)
            if want.get("conversation_id", expected.get("conversation_id")) == conv
        }
        assert mine <= {r["run_id"] for r in by_conv}


def test_explain_says_which_convention_read_a_trace_or_why_none_did(daemon):
    case = CAPTURES / "py-langfuse-v5-observe-agent"  # two traces: one run, then a run with a nested one
    spans, _ = load_case(case)
    for trace_id in sorted({s.trace_id for s in spans}):
        got = wait_for(lambda t=trace_id: daemon.runs(trace_id=t), 30, interval_s=0.2, what="the Langfuse runs")
        out = daemon.cli("explain", trace_id).stdout
        assert f"{len(got)} agent run(s) rebuilt, read by convention langfuse" in out, out
    # the real CLI lists a conversation's runs (shared by two cases' runs) as read in-process
    conv = _expected(case)["conversation_id"]
    assert _runs_cli(daemon, "--conversation", conv) == daemon.runs(conversation_id=conv) != []

    with tracer(span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint), service="health-check") as t:
        with t.start_as_current_span("GET /health", attributes={"http.request.method": "GET"}) as span:
            unknown = f"{span.get_span_context().trace_id:032x}"
    wait_for(
        lambda: daemon.query_json(f"SELECT trace_id FROM skipped_traces WHERE trace_id = '{unknown}'") or None,
        20,
        what="the plain trace skipped by triage",
    )
    out = daemon.cli("explain", unknown).stdout
    assert "skipped by triage: 1 span(s) and 0 log record(s) in 1 request(s) from health-check" in out, out
