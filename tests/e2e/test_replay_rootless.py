"""A trace acknowledged before a crash but never stored, whose root never came (the client's
exporter died with the daemon): replayed from the segment log at the next start, it is assembled
once idle like a recovered trace, not held for ``assembly.max_wait_s``."""

from __future__ import annotations

import signal
import urllib.request

from opentelemetry import trace
from opentelemetry.trace import SpanKind
from support.daemon import DaemonProcess, config_dict, wait_for
from support.otlp import agent_trace, span_exporter, tracer

GENAI = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.provider.name": "openai"}


def _lag(daemon: DaemonProcess) -> float:
    text = urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10).read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("tracescorer_feed_lag_bytes")
    )


def test_a_rootless_trace_replayed_after_a_crash_is_assembled_once_idle(tmp_path):
    # one trace at a time in assembly, held for idle_s: the rootless one waits in the log, acknowledged
    held = config_dict(tmp_path, assembly={"idle_s": 60, "max_traces": 1, "max_wait_s": 600})
    daemon = DaemonProcess(tmp_path, held).start()
    try:
        with tracer(span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint)) as t:
            agent_trace(t)  # complete: fills assembly
            root = t.start_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"})
            with t.start_as_current_span(
                "chat gpt-4o-mini", context=trace.set_span_in_context(root), kind=SpanKind.CLIENT, attributes=GENAI
            ):
                pass  # exported; its root never ends
            rootless = f"{root.get_span_context().trace_id:032x}"
            wait_for(lambda: _lag(daemon) > 0, 30, interval_s=0.05, what="the rootless trace held in the log")
    finally:
        daemon.stop(signal.SIGKILL)

    # the next start: a short idle_s, max_wait_s 600 s
    daemon = DaemonProcess(tmp_path, config_dict(tmp_path, assembly={"idle_s": 0.1, "max_wait_s": 600})).start()
    try:
        assembled = f"SELECT reason, span_count FROM assembled_traces WHERE trace_id = '{rootless}'"
        rows = wait_for(
            lambda: daemon.query_json(assembled), 60, interval_s=0.25, what="the replayed rootless trace assembled"
        )
        assert rows == [{"reason": "recovered", "span_count": 1}]  # once, with its one span (from the log)
    finally:
        assert daemon.stop() == 0
