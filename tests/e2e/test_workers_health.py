"""What the daemon tells of the work its worker processes do: with ``workers.count`` the feed,
assembly and scoring run in the workers and write through their own channels of the store
process, so failing writes are theirs and so are other tools' evaluations; ``/readyz`` and
``/metrics`` (the agreement gauges) still follow them."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import grpc
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context
from support.daemon import DaemonProcess, config_dict, plain_settings, running_app, wait_for, wait_for_async
from support.disk import fill, small_disk
from support.gate import WriterGate
from support.otlp import agent_trace, log_exporter, span_exporter, tracer
from support.payloads import trace_request

from tracescorer.demo import emit_conversations

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _readyz(daemon: DaemonProcess) -> dict:
    try:
        with urllib.request.urlopen(daemon.http_url + "/readyz", timeout=10) as resp:
            return dict(json.loads(resp.read()))
    except urllib.error.HTTPError as exc:
        return dict(json.loads(exc.read()))


def _send(daemon: DaemonProcess, n: int, start: int = 0) -> None:
    exporter = span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint)
    with tracer(exporter, service="health") as t:
        for i in range(start, start + n):
            agent_trace(t, user=f"question {i}", answer=f"answer {i}")


def test_store_writes_failing_in_the_workers_make_the_daemon_not_ready_until_they_work_again(tmp_path):
    with small_disk(tmp_path, "48m") as disk:
        cfg = config_dict(
            tmp_path,
            workers={"count": 2},
            # the segment log on another disk, and no disk reserve: only the store's writes fail (with
            # one, they wait for space: test_disk_reserve.py)
            store={"path": str(disk / "ts.duckdb"), "checkpoint_threshold": "2MB"},
            segment_log={"path": str(tmp_path / "log"), "min_free_bytes": 0},
            assembly={"idle_s": 0.3},
            scorers=[{"id": "non-empty", "prebuilt": "non_empty_response"}],
        )
        daemon = DaemonProcess(tmp_path, cfg).start()
        try:
            _send(daemon, 5)
            daemon.settled()
            assert _readyz(daemon)["ready"]
            filler = disk / "filler"
            fill(filler)
            sent = 5
            for _ in range(60):  # traffic until some worker's write fails (a small one may still fit)
                _send(daemon, 5, sent)
                sent += 5
                reason = _readyz(daemon).get("reason") or ""
                if "store writes are failing" in reason:
                    break
            wait_for(
                lambda: "store writes are failing" in (_readyz(daemon).get("reason") or ""),
                30,
                interval_s=0.2,
                what="/readyz to say the store's writes fail",
            )
            filler.unlink()
            wait_for(lambda: _readyz(daemon)["ready"], 60, interval_s=0.2, what="ready again once writes work")
            daemon.settled()
        finally:
            code = daemon.stop()
        assert code == 0, daemon.log()[-3000:]


def _pairs(daemon: DaemonProcess, judge: str) -> float | None:
    """``tracescorer_agreement_pairs`` of ``judge`` against the labels (whatever its version)."""
    text = urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10).read().decode()
    found = [
        line
        for line in text.splitlines()
        if line.startswith("tracescorer_agreement_pairs{")
        and f'scorer="{judge}"' in line
        and 'reference="labels"' in line
    ]
    return float(found[0].rsplit(" ", 1)[1]) if found else None


def test_the_agreement_gauges_follow_evaluations_the_workers_store(tmp_path):
    cfg = config_dict(
        tmp_path,
        workers={"count": 2},
        assembly={"idle_s": 0.3},
        scorers=[{"id": "non-empty", "prebuilt": "non_empty_response", "scope": "run"}],
    )
    conversations = [
        {"id": f"conv-{i}", "agent": "helper", "turns": [(f"Question {i}?", None, None, None, f"Answer {i}.")]}
        for i in (1, 2)
    ]
    daemon = DaemonProcess(tmp_path, cfg).start()
    try:
        emit_conversations(daemon.grpc_endpoint, conversations, service_name="helper-svc")
        wait_for(lambda: len(daemon.query_json("SELECT run_id FROM runs")) == 2, 30, interval_s=0.2, what="2 runs")
        runs = {r["conversation_id"]: r for r in daemon.query_json("SELECT * FROM runs")}
        provider = LoggerProvider(resource=Resource.create({"service.name": "evals"}))
        provider.add_log_record_processor(
            SimpleLogRecordProcessor(log_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint))
        )  # type: ignore[arg-type]
        logger = provider.get_logger("evaluations")

        def evaluate(conv: str, score: float) -> None:
            run = runs[conv]
            ctx = SpanContext(
                int(run["trace_id"], 16), int(run["span_id"], 16), is_remote=True, trace_flags=TraceFlags(1)
            )
            logger.emit(
                context=set_span_in_context(NonRecordingSpan(ctx)),
                event_name="gen_ai.evaluation.result",
                attributes={"gen_ai.evaluation.name": "Helpfulness", "gen_ai.evaluation.score.value": score},
            )

        evaluate("conv-1", 0.9)
        wait_for(lambda: daemon.query_json("SELECT id FROM evaluations"), 30, interval_s=0.2, what="the evaluation")
        for conv in ("conv-1", "conv-2"):
            daemon.cli(
                "label", f"run:{runs[conv]['run_id']}", "--scorer", "Helpfulness", "--value", "0.8", "--by", "ann"
            )
        wait_for(
            lambda: _pairs(daemon, "external:Helpfulness") == 1.0,
            30,
            interval_s=0.2,
            what="the gauges after the labels",
        )
        # the next evaluation, stored by a worker, is counted within seconds (not at the next
        # pass a minute later)
        evaluate("conv-2", 0.7)
        provider.shutdown()
        wait_for(
            lambda: _pairs(daemon, "external:Helpfulness") == 2.0,
            30,
            interval_s=0.2,
            what="the gauges after the evaluation",
        )
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()[-3000:]


def _gauge(exposition: bytes, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in exposition.decode().splitlines() if line.startswith(name + " ")
    )


async def test_a_full_write_queue_of_a_worker_shows_in_readiness_and_metrics(tmp_path):
    settings = plain_settings(tmp_path, workers={"count": 2}, receiver={"max_queue_items": 10})
    async with running_app(settings) as app:
        assert app.pool is not None
        await wait_for_async(lambda: app.not_ready_reason() is None, 20, what="ready")
        async with WriterGate(app.stores.intake, tmp_path) as gate:  # the store process's writer held
            # ten spans of one trace: one worker appends them all, and its queue is full
            body = trace_request([{"trace_id": f"{7:032x}", "span_id": f"{i + 1:016x}"} for i in range(10)])
            async with grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}") as channel:
                await channel.unary_unary(EXPORT)(body.SerializeToString(), timeout=30)  # in the log: acknowledged
            await wait_for_async(
                lambda: "write queue full" in (app.not_ready_reason() or ""), 20, what="not ready: write queue full"
            )
            await app.pool.refresh_metrics()
            assert _gauge(app.metrics.render(), "tracescorer_store_queue_items") == 10
            gate.open()
        await wait_for_async(lambda: app.not_ready_reason() is None, 30, what="ready again")
