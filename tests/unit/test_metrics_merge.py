"""Metrics.snapshot / absorb / retire / render: the main process's /metrics shows the whole
daemon (its own samples plus every worker's, carried on across worker restarts). Two real
registries stand for main and a worker; snapshots go through pickle as they would over a pipe."""

from __future__ import annotations

import dataclasses
import os
import pickle
from collections import Counter

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tracescorer.metrics import Metrics
from tracescorer.metrics.merge import Snapshot

Exposed = dict[tuple[str, frozenset[tuple[str, str]]], float]


def sent(worker: Metrics) -> Snapshot:
    """``worker``'s snapshot as its parent receives it."""
    snapshot = pickle.loads(pickle.dumps(worker.snapshot()))
    assert isinstance(snapshot, Snapshot)
    return snapshot


def exposed(metrics: Metrics) -> Exposed:
    """Every sample of ``metrics.render()``, parsed as Prometheus would."""
    out: Exposed = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in out, f"{key} exposed twice"
            out[key] = s.value
    return out


def value(samples: Exposed, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def test_counters_of_main_and_worker_are_summed() -> None:
    main, worker = Metrics(), Metrics()
    main.requests.labels("grpc", "traces", "ok").inc(2)
    worker.requests.labels("grpc", "traces", "ok").inc(3)
    worker.commits.inc(4)
    main.absorb("feed", sent(worker))
    samples = exposed(main)
    assert value(samples, "tracescorer_receiver_requests_total", transport="grpc", signal="traces", outcome="ok") == 5
    assert value(samples, "tracescorer_store_commits_total") == 4


def test_histogram_buckets_sum_and_count_are_summed() -> None:
    main, worker = Metrics(), Metrics()
    main.loop_lag.observe(0.003)
    worker.loop_lag.observe(0.003)
    worker.loop_lag.observe(3.0)
    worker.judge_seconds.observe(0.2)  # a histogram main never observed
    main.absorb("scoring", sent(worker))
    samples = exposed(main)
    lag = "tracescorer_event_loop_lag_seconds"
    assert value(samples, lag + "_bucket", le="0.001") == 0
    assert value(samples, lag + "_bucket", le="0.005") == 2
    assert value(samples, lag + "_bucket", le="2.5") == 2
    assert value(samples, lag + "_bucket", le="5.0") == 3
    assert value(samples, lag + "_bucket", le="+Inf") == 3
    assert value(samples, lag + "_count") == 3
    assert value(samples, lag + "_sum") == pytest.approx(3.006)
    assert value(samples, "tracescorer_judge_call_seconds_bucket", le="0.25") == 1
    assert value(samples, "tracescorer_judge_call_seconds_count") == 1


def test_gauges_are_summed_set_function_ones_included() -> None:
    main, worker = Metrics(), Metrics()
    main.buffered_traces.set(2)
    worker.buffered_traces.set_function(lambda: 5)
    worker.scoring_queue.labels("judge").set_function(lambda: 7)
    main.scoring_queue.labels("judge").set(1)
    main.absorb("assembly", sent(worker))
    samples = exposed(main)
    assert value(samples, "tracescorer_assembly_buffered_traces") == 7
    assert value(samples, "tracescorer_scoring_queue_depth", pool="judge") == 8


def test_retire_keeps_counters_and_histograms_monotonic_across_a_restart_and_drops_gauges() -> None:
    main, first = Metrics(), Metrics()
    first.decisions.labels("b1", "scored").inc(5)
    first.loop_lag.observe(0.02)
    first.buffered_traces.set(9)
    main.absorb("scoring", sent(first))
    before = exposed(main)
    assert value(before, "tracescorer_scoring_decisions_total", scorer="b1", decision="scored") == 5
    assert value(before, "tracescorer_assembly_buffered_traces") == 9

    main.retire("scoring")
    gone = exposed(main)
    assert value(gone, "tracescorer_scoring_decisions_total", scorer="b1", decision="scored") == 5
    assert value(gone, "tracescorer_event_loop_lag_seconds_count") == 1
    assert value(gone, "tracescorer_assembly_buffered_traces") == 0  # main's own; the worker's went
    assert main.sources() == []

    second = Metrics()  # the restarted worker, same name, from zero
    second.decisions.labels("b1", "scored").inc(1)
    second.loop_lag.observe(0.02)
    second.buffered_traces.set(3)
    main.absorb("scoring", sent(second))
    after = exposed(main)
    assert value(after, "tracescorer_scoring_decisions_total", scorer="b1", decision="scored") == 6
    assert value(after, "tracescorer_event_loop_lag_seconds_bucket", le="0.025") == 2
    assert value(after, "tracescorer_event_loop_lag_seconds_count") == 2
    assert value(after, "tracescorer_assembly_buffered_traces") == 3

    main.retire("scoring")
    main.retire("scoring")  # a second retire of a gone source changes nothing
    assert value(exposed(main), "tracescorer_scoring_decisions_total", scorer="b1", decision="scored") == 6


def test_a_new_process_under_a_kept_name_carries_the_old_one_on() -> None:
    main, first, second = Metrics(), Metrics(), Metrics()
    first.commits.inc(4)
    first.buffered_traces.set(9)
    main.absorb("feed", sent(first))
    second.commits.inc(1)
    # the restarted worker reports before its exit was seen: another pid, no retire
    main.absorb("feed", dataclasses.replace(sent(second), pid=os.getpid() + 1))
    samples = exposed(main)
    assert value(samples, "tracescorer_store_commits_total") == 5
    assert value(samples, "tracescorer_assembly_buffered_traces") == 0
    # the late retire of the old process leaves the new one's snapshot alone
    main.retire("feed", pid=os.getpid())
    assert main.sources() == ["feed"]
    assert value(exposed(main), "tracescorer_store_commits_total") == 5


def test_label_sets_only_a_worker_has_appear_and_each_family_is_described_once() -> None:
    main, worker, other = Metrics(), Metrics(), Metrics()
    main.decisions.labels("b1", "scored").inc()
    worker.decisions.labels("b2", "failed").inc(2)
    other.decisions.labels("b2", "failed").inc(3)
    other.judge_tokens.labels("input").inc(100)  # a family main declared and never set
    main.absorb("w1", sent(worker))
    main.absorb("w2", sent(other))
    samples = exposed(main)
    assert value(samples, "tracescorer_scoring_decisions_total", scorer="b1", decision="scored") == 1
    assert value(samples, "tracescorer_scoring_decisions_total", scorer="b2", decision="failed") == 5
    assert value(samples, "tracescorer_judge_tokens_total", direction="input") == 100
    text = main.render().decode()
    described = Counter(tuple(line.split(" ")[:3]) for line in text.splitlines() if line.startswith("#"))
    assert described and max(described.values()) == 1
    assert ("#", "TYPE", "tracescorer_judge_tokens_total") in described
    assert sum(f.name == "tracescorer_scoring_decisions" for f in text_string_to_metric_families(text)) == 1


def test_build_info_and_process_families_stay_the_main_process_own() -> None:
    main, worker = Metrics(), Metrics()
    snapshot = sent(worker)
    names = {f.name for f in snapshot.families}
    assert "tracescorer_build_info" not in names
    assert not any(n.startswith(("process_", "python_")) for n in names)
    main.absorb("w1", snapshot)
    samples = exposed(main)
    assert [v for (n, _), v in samples.items() if n == "tracescorer_build_info"] == [1.0]
    assert [n for n, _ in samples if n == "process_cpu_seconds_total"] == ["process_cpu_seconds_total"]


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="ProcessCollector reads /proc")
def test_each_live_worker_has_its_process_figures() -> None:
    main = Metrics()
    main.absorb("feed", sent(Metrics()))
    main.absorb("scoring", sent(Metrics()))
    samples = exposed(main)
    for worker in ("feed", "scoring"):
        cpu = value(samples, "tracescorer_worker_cpu_seconds_total", worker=worker)
        rss = value(samples, "tracescorer_worker_resident_memory_bytes", worker=worker)
        assert cpu is not None and cpu > 0
        assert rss is not None and rss > 1_000_000
    main.retire("feed")
    samples = exposed(main)
    assert value(samples, "tracescorer_worker_cpu_seconds_total", worker="feed") is None
    assert value(samples, "tracescorer_worker_cpu_seconds_total", worker="scoring") is not None


def test_without_workers_the_exposition_is_the_registry_own() -> None:
    main = Metrics()
    main.requests.labels("http", "logs", "ok").inc()
    main.loop_lag.observe(0.5)
    own = generate_latest(main.registry).decode().splitlines()
    rendered = main.render().decode().splitlines()
    # process_* figures move between the two collections; the rest is the same, in order
    strip = [line for line in own if "process_" not in line]
    per_worker = ("tracescorer_worker_cpu_seconds", "tracescorer_worker_resident_memory")
    assert [line for line in rendered if "process_" not in line and not any(f in line for f in per_worker)] == strip
    assert [line for line in rendered if any(f in line for f in per_worker) and not line.startswith("#")] == []
