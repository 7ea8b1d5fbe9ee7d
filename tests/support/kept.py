"""What a daemon kept: span rows (``store.spans``; its span-rows feeds write them after the
pipeline, at their own pace) and runs, of what its OTLP clients saw acknowledged
(:class:`support.routing.Acked`)."""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any

from support.daemon import DaemonProcess, wait_for
from support.payloads import trace_request
from support.routing import Acked
from tracescorer.control import RemoteQueryError

AGENT_TRACE_SPANS = 4  # support.otlp.agent_trace: the agent span, two model calls, a tool call
PAGE = 5000  # below the query path's row cap


def rows(daemon: DaemonProcess, sql: str) -> list[dict[str, Any]] | None:
    """The rows, or None while the store process is being replaced (intake goes on meanwhile:
    acknowledgements wait for the segment log only)."""
    try:
        return daemon.query_json(sql)
    except RemoteQueryError:
        return None


def ids(daemon: DaemonProcess, column: str, table: str) -> list[str] | None:
    """Every ``column`` of ``table``, a page at a time (each after the last value seen: rows
    stored meanwhile never shift one into two pages); None while the store process is replaced."""
    found: list[str] = []
    while True:
        after = f"WHERE {column} > '{found[-1]}' " if found else ""
        page = rows(daemon, f"SELECT {column} AS id FROM {table} {after}ORDER BY {column} LIMIT {PAGE}")
        if page is None:
            return None
        found.extend(r["id"] for r in page)
        if len(page) < PAGE:
            return found


def wait_span_rows(daemon: DaemonProcess, acked: Acked, index: int = 0, timeout_s: float = 120) -> None:
    """Wait until every span daemon ``index`` acknowledged has its row, once (the span-rows feed
    writes them after the pipeline, at its own pace)."""
    want = acked.spans[index]
    missing = want

    def stored() -> bool:
        nonlocal missing
        found = ids(daemon, "span_id", "spans")
        if found is not None:
            missing = want - set(found)
        return not missing

    try:
        wait_for(stored, timeout_s, interval_s=0.25, what="a row for every acknowledged span")
    except TimeoutError:
        raise AssertionError(f"{len(missing)} acknowledged spans lost") from None
    twice = _twice(daemon, "span_id", "spans")
    assert not twice, f"{len(twice)} span rows stored twice, e.g. {twice[:3]}"


def _twice(daemon: DaemonProcess, column: str, table: str) -> list[dict[str, Any]]:
    """The values of ``column`` in more than one row of ``table`` (one query: one snapshot)."""
    sql = f"SELECT {column} AS id, count(*) AS n FROM {table} GROUP BY 1 HAVING count(*) > 1 ORDER BY 1 LIMIT 20"
    found: list[dict[str, Any]] = []

    def answered() -> bool:  # not while the store process is replaced
        nonlocal found
        page = rows(daemon, sql)
        found = page or []
        return page is not None

    wait_for(answered, 60, interval_s=0.25, what=f"the {table} stored twice")
    return found


def span_rows_caught_up(daemon: DaemonProcess, timeout_s: float = 60) -> None:
    """Wait until every span-rows feed (``store.spans: all``) passed every request acknowledged
    before: one request holding a plain span in each worker's share of the traces has all its rows
    (a feed writes the rows of a request after those of the requests before it)."""
    with urllib.request.urlopen(daemon.http_url + "/readyz", timeout=10) as resp:
        workers = len(json.loads(resp.read()).get("detail", {}).get("workers") or ()) or 1
    name = f"witness {os.urandom(4).hex()}"
    # a trace id's last four bytes modulo the worker count pick its worker (tracescorer.feed.partition)
    spans = [{"trace_id": f"{'5eed' * 6}{i:08x}", "span_id": os.urandom(8), "name": name} for i in range(workers)]
    req = urllib.request.Request(
        daemon.http_url + "/v1/traces",
        data=trace_request(spans).SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200
    sql = f"SELECT count(*) AS n FROM spans WHERE name = '{name}'"
    wait_for(lambda: daemon.query_json(sql) == [{"n": workers}], timeout_s, interval_s=0.1, what="the witness rows")
    # and the daemon's /metrics says so too (the workers tell theirs every few seconds)
    lag = "tracescorer_span_rows_lag_bytes "
    wait_for(lambda: daemon.metric(lag, missing=-1.0) == 0.0, timeout_s, interval_s=0.2, what="span rows lag 0")


def wait_runs_once(daemon: DaemonProcess, acked: Acked, index: int = 0, timeout_s: float = 90) -> None:
    """Wait until each agent trace whose every span daemon ``index`` acknowledged has its run
    (one cut at a kill may lack its agent span), then check that no trace has two."""
    whole = {t for t, n in acked.trace_spans[index].items() if n == AGENT_TRACE_SPANS}
    assert whole, "no trace had every span acknowledged"
    missing = whole

    def every_run() -> bool:
        nonlocal missing
        found = ids(daemon, "trace_id", "runs")
        if found is not None:
            missing = whole - set(found)
        return not missing

    try:
        wait_for(every_run, timeout_s, interval_s=0.25, what="the run of every whole acknowledged trace")
    except TimeoutError:
        raise AssertionError(f"{len(missing)} whole acknowledged trace(s) without their run") from None
    twice = _twice(daemon, "trace_id", "runs")
    if twice:
        some = ", ".join(f"'{t['id']}'" for t in twice[:3])
        detail = rows(
            daemon,
            "SELECT trace_id, run_id, span_id, parent_span_id, convention, agent_name, incomplete, created_at "
            f"FROM runs WHERE trace_id IN ({some}) ORDER BY trace_id, created_at",
        )
        raise AssertionError(f"{len(twice)} trace(s) with more than one run: {detail}")
