"""The segment log damaged between two runs of the daemon (the drill of issue 49): acknowledged
load, kill -9, 16 bytes flipped in the middle of the newest segment and an older segment cut
short, restart, more acknowledged load. Only the damaged records are lost: counted on /metrics,
logged at ERROR with their offsets and shown in /readyz; the records after them are read, and
every request acknowledged after the restart is stored (no offset handed out twice), whether
the feeds had passed the damage before the kill or replay through it after."""

from __future__ import annotations

import json
import re
import signal
import urllib.request
from pathlib import Path

import psutil
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from prometheus_client.parser import text_string_to_metric_families
from support.daemon import DaemonProcess, config_dict, store_children, wait_for
from support.otlp import agent_trace
from support.routing import Acked, RoutingExporter

from tracescorer.seglog import CorruptRecord, LogGap, Record
from tracescorer.seglog.segments import HEADER, read_range, scan, segments

SEGMENT_BYTES = 1 << 16  # the smallest segment_log.segment_bytes: several segments from a few hundred spans


def _send(daemon: DaemonProcess, acked: Acked, traces: int, tag: str) -> None:
    """``traces`` agent traces (4 spans each) through the SDK's batch processor, 20 spans a request,
    each acknowledged (remembered in ``acked``)."""
    provider = TracerProvider(resource=Resource.create({"service.name": f"damage-{tag}"}))
    exporter = RoutingExporter([daemon.grpc_endpoint], acked, timeout_s=10)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=10, max_export_batch_size=20))
    t = provider.get_tracer("tests.seglog_damage")
    for i in range(traces):
        agent_trace(t, user=f"{tag} question {i}", answer=f"answer {i}")
    provider.shutdown()  # what is queued is sent first
    assert acked.failed == 0


def _records(segment: Path, base: int) -> list[Record]:
    """The whole records of a segment file (the daemon may be writing its end)."""
    found = []
    try:
        found.extend(scan(segment, base, base))
    except CorruptRecord:
        pass
    return found


def _trace_ids(record: Record) -> set[str]:
    request = ExportTraceServiceRequest.FromString(record.payload)
    return {s.trace_id.hex() for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans}


def _read_log(directory: Path) -> list[int]:
    """The offsets of every record in the log, read as a feed reads: past what cannot be read."""
    found = segments(directory)
    end = found[-1][0] + found[-1][1].stat().st_size
    offsets: list[int] = []
    at = 0
    while at < end:
        try:
            got = read_range(directory, at, end, 1 << 20)
        except LogGap as exc:
            at = exc.resume
            continue
        offsets += [r.offset for r in got]
        at = got[-1].end
    return offsets


def _workers(daemon: DaemonProcess) -> list[psutil.Process]:
    assert daemon.proc is not None
    return [
        p
        for p in psutil.Process(daemon.proc.pid).children()
        if p.status() != psutil.STATUS_ZOMBIE and "tracescorer.workers.child" in " ".join(p.cmdline())
    ]


def _damage_metrics(daemon: DaemonProcess) -> dict[tuple[str, str], float]:
    text = urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10).read().decode()
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("tracescorer_log_damaged_"):
                found[(sample.name, sample.labels["where"])] = sample.value
    return found


def _whole(daemon: DaemonProcess, want: dict[str, int]) -> bool:
    """Whether every trace of ``want`` (trace id -> spans acknowledged) was assembled with them all."""
    rows = daemon.query_json("SELECT trace_id, max(span_count) AS n FROM assembled_traces GROUP BY trace_id")
    have = {r["trace_id"]: int(r["n"]) for r in rows}
    return all(have.get(t, 0) >= n for t, n in want.items())


def _saved_past(daemon: DaemonProcess, offset: int) -> bool:
    """Whether every feed saved an offset at or past ``offset`` (where its next start resumes)."""
    rows = daemon.query_json("SELECT value FROM schema_info WHERE key LIKE 'feed_offset%'")
    return bool(rows) and all(int(r["value"]) >= offset for r in rows)


@pytest.mark.parametrize("feeds", ["behind", "past"])
def test_a_flipped_middle_and_a_truncated_older_segment_lose_only_their_records(tmp_path, feeds):
    """``behind``: traces wait 5 s in assembly, so at the kill none is assembled, the feeds' saved
    offsets hold before the damage and the restart replays through it. ``past``: every trace was
    assembled and every feed saved its offset past the damage before the kill."""
    directory = tmp_path / "ts.duckdb.log"
    config = config_dict(
        tmp_path,
        segment_log={"segment_bytes": SEGMENT_BYTES, "retain_bytes": 1 << 30},
        assembly={"idle_s": 5 if feeds == "behind" else 0.3},
        shutdown={"grace_s": 10},
    )
    daemon = DaemonProcess(tmp_path, config).start()
    before = Acked(1)
    try:
        # load until there are three segments and the newest holds a record between two others
        while len(segments(directory)) < 3 or len(_records(*reversed(segments(directory)[-1]))) < 3:
            _send(daemon, before, 10, f"before-{len(before.traces[0])}")
        if feeds == "past":
            wait_for(lambda: _whole(daemon, before.trace_spans[0]), 30, interval_s=0.25, what="every trace assembled")
            base, newest = segments(directory)[-1]
            end = base + newest.stat().st_size
            wait_for(lambda: _saved_past(daemon, end), 30, interval_s=0.25, what="the feeds' offsets saved")
        assert daemon.proc is not None
        [store] = store_children(daemon.proc.pid)
        for worker in _workers(daemon):
            worker.kill()
        assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    except BaseException:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.stop(signal.SIGKILL)
        raise
    wait_for(
        lambda: not store.is_running() or store.status() == psutil.STATUS_ZOMBIE, 30, what="the store process to exit"
    )

    found = segments(directory)
    newest_base, newest = found[-1]
    kill_end = newest_base + newest.stat().st_size
    kept = [r.offset for b, p in found for r in _records(p, b)]  # before the damage
    records = _records(newest, newest_base)
    hit = records[len(records) // 2]
    with open(newest, "r+b") as fh:  # 16 bytes flipped in the middle of a record in the middle
        fh.seek(hit.offset - newest_base + HEADER.size + len(hit.payload) // 2)
        data = fh.read(16)
        fh.seek(-16, 1)
        fh.write(bytes(b ^ 0xFF for b in data))
    older_base, older = found[1]
    older_records = _records(older, older_base)
    assert len(older_records) >= 2
    cut = older_records[1].offset + 100  # the older segment loses its end, from the middle of a record
    next_base = found[2][0]
    older.write_bytes(older.read_bytes()[: cut - older_base])
    lost = [(hit.offset, hit.end), (older_records[1].offset, next_base)]
    lost_records = [hit, *older_records[1:]]
    lost_traces = set().union(*(_trace_ids(r) for r in lost_records))

    daemon.start()
    after = Acked(1)
    try:
        _send(daemon, after, 50, "after")
        # behind, the traces of the lost records lose spans; past, they were assembled already
        want = {t: n for t, n in before.trace_spans[0].items() if feeds == "past" or t not in lost_traces}
        want |= after.trace_spans[0]
        wait_for(
            lambda: _whole(daemon, want), 60, interval_s=0.25, what="every trace outside the damage assembled whole"
        )
        run_traces = {r["trace_id"] for r in daemon.query_json("SELECT DISTINCT trace_id FROM runs")}
        assert not set(after.traces[0]) - run_traces, "requests acknowledged after the restart without their runs"
        metrics = _damage_metrics(daemon)
        ready = json.loads(urllib.request.urlopen(daemon.http_url + "/readyz", timeout=10).read())
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()[-3000:]
    log = daemon.log()

    # found at open: the damaged record, the older segment's lost end; the restart's replay read
    # through the damage and skipped only the damaged bytes (the cut record's head, the flipped one)
    assert metrics[("tracescorer_log_damaged_records_total", "open")] == 2
    assert metrics[("tracescorer_log_damaged_bytes_total", "open")] == (hit.end - hit.offset) + (next_base - cut)
    read = metrics.get(("tracescorer_log_damaged_records_total", "read"), 0)
    assert read >= 1 if feeds == "behind" else read == 0
    assert f"log offsets {hit.offset} to {hit.end} ({hit.end - hit.offset} byte(s)) of {newest.name}" in log
    assert f"log offsets {cut} to {next_base} ({next_base - cut} byte(s)) of {older.name}" in log
    for start, end in re.findall(r"segment log \(read\): .*?log offsets (\d+) to (\d+)", log):
        assert any(a <= int(start) < int(end) <= b for a, b in lost), f"skipped {start}..{end}: not damaged"
    assert "torn" not in log and "no whole record follows" not in log
    assert [(d["segment"], d["from"], d["to"]) for d in ready["detail"]["segment_log_damage"]] == [
        (older.name, cut, next_base),
        (newest.name, hit.offset, hit.end),
    ]

    # on disk: every record outside the damage is still there, the newest segment was not cut, and
    # what came after the restart was appended past the killed daemon's end
    stored = _read_log(directory)
    assert set(kept) - {r.offset for r in lost_records} <= set(stored)
    assert newest.stat().st_size >= kill_end - newest_base
    assert min(o for o in stored if o not in kept) >= kill_end
