"""/metrics of a real daemon as Prometheus reads it (prometheus_client's text parser): the
process metrics and the build info operators expect, no ``*_created`` series, and one counter per
fact (scores: tracescorer_score_results_total; judge spend: tracescorer_score_judge_cost_usd_total)."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from support.daemon import DaemonProcess, config_dict, wait_for
from support.otlp import agent_trace, span_exporter, tracer

import tracescorer


def _samples(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def test_process_and_build_info_no_created_series_one_counter_per_fact(tmp_path: Path) -> None:
    cfg = config_dict(
        tmp_path,
        assembly={"idle_s": 0.2},
        scorers=[{"id": "answered", "prebuilt": "non_empty_response", "threshold": 1}],
    )
    daemon = DaemonProcess(tmp_path, cfg).start()
    try:
        with tracer(span_exporter("http", http_url=daemon.http_url)) as t:
            agent_trace(t)
        wait_for(lambda: daemon.query_json("SELECT id FROM scores"), 60, what="the score")
        samples = wait_for(
            lambda: (s := _samples(daemon.http_url)).get("tracescorer_score_results_total") and s,
            30,
            what="the score counted",
        )
    finally:
        assert daemon.stop() == 0, daemon.log()

    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"):
        assert name in samples and samples[name][0][1] > 0, name
    assert samples["process_start_time_seconds"][0][1] > 1e9
    ((labels, value),) = samples["tracescorer_build_info"]
    assert labels["version"] == tracescorer.__version__ and labels["python"] and value == 1.0

    assert not [name for name in samples if name.endswith("_created")]
    # the overlapping counters are gone; the kept ones count the score
    assert "tracescorer_scores_total" not in samples and "tracescorer_judge_cost_usd_total" not in samples
    ((labels, value),) = samples["tracescorer_score_results_total"]
    assert (labels["scorer"], labels["label"], labels["status"], value) == ("answered", "pass", "ok", 1.0)
