"""The families of assembly: buffered traces, traces assembled / unmatched / refused / recovered,
runs rebuilt per convention, extraction time."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from tracescorer.metrics.families import Families


class AssemblyFamilies(Families):
    """Assembly's metrics."""

    buffered_traces: Gauge
    traces_assembled: Counter
    traces_unmatched: Counter
    traces_refused: Counter
    traces_recovered: Counter
    traces_unreadable: Counter
    runs_extracted: Counter
    assembly_seconds: Histogram

    def _declare_assembly(self, r: CollectorRegistry) -> None:
        self.buffered_traces = Gauge("tracescorer_assembly_buffered_traces", "Traces waiting to complete", registry=r)
        self.traces_assembled = Counter(
            "tracescorer_assembly_traces",
            "Traces assembled, by reason (complete, max_wait, overflow, recovered) and pass (first, late)",
            ["reason", "pass"],
            registry=r,
        )
        self.traces_unmatched = Counter(
            "tracescorer_assembly_traces_unmatched",
            "Traces no convention adapter could rebuild a run from",
            registry=r,
        )
        self.traces_refused = Counter(
            "tracescorer_assembly_traces_refused",
            "Traces whose runs the store refused as data: recorded as assembled without runs, the reason "
            "in assembled_traces.unmatched_reason",
            registry=r,
        )
        self.traces_recovered = Counter(
            "tracescorer_assembly_traces_recovered",
            "Traces assembled at start from the span log",
            registry=r,
        )
        self.traces_unreadable = Counter(
            "tracescorer_assembly_traces_unreadable",
            "Traces read back from the segment log (store.spans: none) with a record of their items gone: "
            "by what was done (partial: assembled from what was left; kept: late items dropped, the runs "
            "assembled before kept)",
            ["outcome"],
            registry=r,
        )
        self.runs_extracted = Counter(
            "tracescorer_assembly_runs", "Agent runs rebuilt, by convention", ["convention"], registry=r
        )
        self.assembly_seconds = Histogram(
            "tracescorer_assembly_extract_seconds",
            "Time to extract the runs of one trace",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5),
            registry=r,
        )
