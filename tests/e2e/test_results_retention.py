"""Results retention through a real daemon fed by the OTel SDK: results older than
``store.results_retention_days`` are deleted, and the DuckDB store's key indexes stay within their
share of ``store.memory_limit`` under traffic (DuckDB holds them in memory; past the limit every
write fails): the oldest results deleted, loudly, the newest kept, nothing failing."""

from __future__ import annotations

import re
import urllib.request

from support.daemon import DaemonProcess, config_dict, wait_for
from support.otlp import agent_trace, span_exporter, tracer

TRACES = 250
BUDGET = 750  # keys: 1 GB x 6e-5 / 80 bytes a key; each trace here needs 7 (2 run, 2 scores, 2 decisions, 1 assembly)


def _deleted(daemon: DaemonProcess, table: str) -> float:
    text = urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10).read().decode()
    found = re.search(r'tracescorer_store_retention_deleted_rows_total\{table="%s"\} (\S+)' % table, text)
    return float(found.group(1)) if found else 0.0


def _one(daemon: DaemonProcess, sql: str) -> int:
    return int(next(iter(daemon.query_json(sql)[0].values())))


def test_results_past_the_index_budget_are_deleted_oldest_first_and_writes_go_on(tmp_path):
    cfg = config_dict(
        tmp_path,
        workers={"count": 0},  # the store's retention, not the workers', is what is tested: fewer processes
        assembly={"idle_s": 0.2},
        store={"index_memory_share": 6e-5, "index_check_interval_s": 0.3},
        scorers=[
            {"id": "non-empty", "prebuilt": "non_empty_response"},
            {"id": "no-tool-errors", "prebuilt": "no_tool_errors"},
        ],
    )
    daemon = DaemonProcess(tmp_path, cfg).start()
    try:
        with tracer(span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint)) as t:
            for i in range(TRACES):
                agent_trace(t, user=f"question {i}")
        wait_for(
            lambda: _one(daemon, "SELECT count(*) FROM assembled_traces") == TRACES,
            60,
            interval_s=0.2,
            what="every trace assembled",
        )
        newest = f"SELECT run_id FROM runs WHERE input_messages LIKE '%\"question {TRACES - 1}\"%'"
        wait_for(
            lambda: _one(daemon, f"SELECT count(*) FROM scores WHERE run_id IN ({newest})") == 2,
            60,
            interval_s=0.2,
            what="the newest run scored",
        )
        keys = (
            "SELECT 2 * (SELECT count(*) FROM runs) + (SELECT count(*) FROM scores) + "
            "(SELECT count(*) FROM scoring_decisions) + (SELECT count(*) FROM assembled_traces)"
        )
        wait_for(lambda: _one(daemon, keys) <= BUDGET, 30, interval_s=0.2, what="the keys within the budget")
        assert _one(daemon, f"SELECT count(*) FROM ({newest})") == 1  # the newest results are kept ...
        assert (
            _one(daemon, "SELECT count(*) FROM runs WHERE input_messages LIKE '%\"question 0\"%'") == 0
        )  # ... the oldest go
        assert _deleted(daemon, "runs") > 0 and _deleted(daemon, "scores") > 0
        # assembly records stay while recovery may look at their traces (the last 5 minutes here)
        assert _one(daemon, "SELECT count(*) FROM assembled_traces") == TRACES
    finally:
        daemon.stop()
    log = daemon.log()
    assert re.search(r"over their budget of 750 .*; in [0-9]+ transactions\)", log)
    assert "write failed" not in log


def test_results_older_than_results_retention_days_are_deleted(tmp_path):
    cfg = config_dict(
        tmp_path,
        workers={"count": 0},  # the store's retention, not the workers', is what is tested: fewer processes
        assembly={"idle_s": 0.2},
        # span rows on: results retention leaves them to their own
        store={"results_retention_days": 1 / 86400, "retention_interval_s": 0.2, "spans": "agent"},
        scorers=[{"id": "non-empty", "prebuilt": "non_empty_response"}],
    )
    daemon = DaemonProcess(tmp_path, cfg).start()
    try:
        with tracer(span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint)) as t:
            agent_trace(t)
        spans = "SELECT count(*) FROM spans"
        wait_for(lambda: _one(daemon, spans) == 4, 60, interval_s=0.2, what="the span rows (written at their own pace)")
        wait_for(
            lambda: _deleted(daemon, "scores") >= 1 and _deleted(daemon, "runs") >= 1,
            60,
            interval_s=0.2,
            what="the run and its score deleted a second after they were written",
        )
        assert _one(daemon, "SELECT count(*) FROM runs") == 0 and _one(daemon, "SELECT count(*) FROM scores") == 0
        assert _one(daemon, spans) == 4  # the span log keeps its own retention
    finally:
        daemon.stop()
