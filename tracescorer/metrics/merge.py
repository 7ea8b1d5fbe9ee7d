"""One exposition for the whole daemon: the main process's registry merged with the latest
:class:`Snapshot` of each worker process (:meth:`tracescorer.metrics.Metrics.snapshot`).

A snapshot holds the current samples of a registry's ``tracescorer_*`` families (not
``tracescorer_build_info``, not ``process_*``) and the process's own CPU seconds and resident
memory. :class:`MergedView` keeps the latest snapshot per source; its exposition sums, per sample
name and label set, the main process's value, the carried totals of retired sources and every
live source's value. Gauges are summed too (queue depths, buffered traces, lags add up across
processes): a gauge set in more than one process to something that does not add up (a 0/1 state,
a timestamp) reads as their sum.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.samples import Sample

logger = logging.getLogger(__name__)

# A sample is named by its sample name (with _total, _bucket, ...) and its label values, in the
# order of the family's label names (the same code declares the families in every process).
Values = tuple[str, ...]
SampleKey = tuple[str, Values]
Point = tuple[str, Values, float]

# types whose samples only grow while a process lives: a retired source's are carried on
_MONOTONIC = frozenset({"counter", "histogram", "summary"})
# 0/1 indicators: the processes' values are combined by max, not summed
_INDICATOR = frozenset({"info", "stateset"})
_OWN_ONLY = frozenset({"tracescorer_build_info"})


class FamilyValues(NamedTuple):
    """The samples of one family in a snapshot: the label names of each sample name, and the
    samples as ``(sample name, label values, value)``."""

    name: str
    type: str
    label_names: tuple[tuple[str, tuple[str, ...]], ...]
    points: tuple[Point, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """What a worker process sends its parent: picklable, plain tuples and strings."""

    pid: int
    families: tuple[FamilyValues, ...]
    cpu_seconds: float | None  # the process's process_cpu_seconds_total (None: not on /proc)
    resident_bytes: float | None  # its process_resident_memory_bytes


def merged(name: str) -> bool:
    """Whether the family ``name`` is part of snapshots (and so summed across processes)."""
    return name.startswith("tracescorer_") and name not in _OWN_ONLY


def take_snapshot(registry: CollectorRegistry) -> Snapshot:
    """The current samples of ``registry``'s merged families and its process figures (one
    collection, the ``set_function`` gauges' functions called as for a scrape)."""
    families: list[FamilyValues] = []
    cpu: float | None = None
    rss: float | None = None
    intern = sys.intern  # repeated strings (sample names, bucket bounds) pickle once
    for family in registry.collect():
        if family.name == "process_cpu_seconds":
            cpu = _first(family.samples)
        elif family.name == "process_resident_memory_bytes":
            rss = _first(family.samples)
        if not merged(family.name):
            continue
        created = family.name + "_created"  # never summed: a timestamp (disabled in Metrics anyway)
        names: dict[str, tuple[str, ...]] = {}
        points: list[Point] = []
        for s in family.samples:
            if s.name == created:
                continue
            if s.name not in names:
                names[s.name] = tuple(s.labels)
            points.append((intern(s.name), tuple(map(intern, s.labels.values())), float(s.value)))
        if points:
            families.append(FamilyValues(family.name, family.type, tuple(names.items()), tuple(points)))
    return Snapshot(pid=os.getpid(), families=tuple(families), cpu_seconds=cpu, resident_bytes=rss)


def _first(samples: Sequence[Sample]) -> float | None:
    return float(samples[0].value) if samples else None


@dataclass(frozen=True, slots=True)
class _State:
    """Replaced whole on every change, so a reader takes one reference without a lock."""

    sources: Mapping[str, Snapshot]
    carried: Mapping[str, FamilyValues]  # retired sources' counters and histograms, summed


class MergedView:
    """The exposition of ``own`` merged with the latest snapshot of each source.

    :meth:`absorb` and :meth:`retire` are quick and never wait on I/O; :meth:`collect` (the
    exposition, through ``generate_latest``) reads one consistent state without locking, so it may
    run on the event loop or in another thread.
    """

    def __init__(self, own: CollectorRegistry) -> None:
        self._own = own
        self._state = _State(sources={}, carried={})
        self._lock = threading.Lock()  # serialises writers; readers need none

    def absorb(self, source: str, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` as the latest of ``source``. One from another process than the kept
        one (the source restarted without :meth:`retire`) retires the kept one first."""
        with self._lock:
            state = self._state
            carried = state.carried
            previous = state.sources.get(source)
            if previous is not None and previous.pid != snapshot.pid:
                logger.info("metrics source %s is a new process (%d, was %d)", source, snapshot.pid, previous.pid)
                carried = _carry(carried, previous)
            self._state = _State(sources={**state.sources, source: snapshot}, carried=carried)

    def retire(self, source: str, *, pid: int | None = None) -> None:
        """``source``'s process is gone: its counters and histograms are carried on (what is
        exposed never goes backwards), its gauges dropped. With ``pid``, only a snapshot of that
        process is retired (a newer one of the same source is kept)."""
        with self._lock:
            state = self._state
            previous = state.sources.get(source)
            if previous is None or (pid is not None and previous.pid != pid):
                return
            sources = {k: v for k, v in state.sources.items() if k != source}
            self._state = _State(sources=sources, carried=_carry(state.carried, previous))

    def sources(self) -> list[str]:
        """The live sources' names."""
        return list(self._state.sources)

    def collect(self) -> Iterator[Metric]:
        """``own``'s families with every source's samples added, then the families only sources
        have, then the sources' process figures (a ``Collector`` for ``generate_latest``)."""
        state = self._state
        others = _others(state)
        for family in self._own.collect():
            extra = others.pop(family.name, None) if merged(family.name) else None
            if extra is not None:
                family.samples = _combine(family.type, [_values(family), *extra])
            yield family
        for name, parts in others.items():
            typ = parts[0].type
            family = Metric(name, "Reported by worker processes only", typ)
            family.samples = _combine(typ, parts)
            yield family
        yield from _process_families(state.sources)


def _values(family: Metric) -> FamilyValues:
    names: dict[str, tuple[str, ...]] = {}
    points: list[Point] = []
    for s in family.samples:
        if s.name not in names:
            names[s.name] = tuple(s.labels)
        points.append((s.name, tuple(s.labels.values()), float(s.value)))
    return FamilyValues(family.name, family.type, tuple(names.items()), tuple(points))


def _carry(carried: Mapping[str, FamilyValues], snapshot: Snapshot) -> dict[str, FamilyValues]:
    """``carried`` plus ``snapshot``'s monotonic families (a new mapping: readers may hold the old)."""
    out = dict(carried)
    for family in snapshot.families:
        if family.type in _MONOTONIC:
            before = out.get(family.name)
            parts = [family] if before is None else [before, family]
            points = tuple((name, values, value) for (name, values), value in _sum(family.type, parts).items())
            out[family.name] = FamilyValues(family.name, family.type, _label_names(parts), points)
    return out


def _others(state: _State) -> dict[str, list[FamilyValues]]:
    """Per family name: what to add to the main process's samples."""
    others: dict[str, list[FamilyValues]] = {}
    for name, carried in state.carried.items():
        others.setdefault(name, []).append(carried)
    for snapshot in state.sources.values():
        for family in snapshot.families:
            others.setdefault(family.name, []).append(family)
    return others


def _label_names(parts: Sequence[FamilyValues]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    names: dict[str, tuple[str, ...]] = {}
    for part in parts:
        names.update(part.label_names)
    return tuple(names.items())


def _sum(typ: str, parts: Sequence[FamilyValues]) -> dict[SampleKey, float]:
    """The parts' values per sample key, in the order the keys first appear (so a label set's
    histogram samples stay together); summed, or the largest for 0/1 indicators."""
    acc: dict[SampleKey, float] = {}
    if typ in _INDICATOR:
        for part in parts:
            for name, values, value in part.points:
                key = (name, values)
                acc[key] = max(acc.get(key, value), value)
    else:
        for part in parts:
            for name, values, value in part.points:
                key = (name, values)
                acc[key] = acc.get(key, 0.0) + value
    return acc


def _combine(typ: str, parts: Sequence[FamilyValues]) -> list[Sample]:
    names = dict(_label_names(parts))
    return [
        Sample(name, dict(zip(names[name], values, strict=True)), value)
        for (name, values), value in _sum(typ, parts).items()
    ]


def _process_families(sources: Mapping[str, Snapshot]) -> Iterator[Metric]:
    cpu = CounterMetricFamily(
        "tracescorer_worker_cpu_seconds",
        "CPU time (user and system) of each live worker process (starts from 0 when a worker restarts)",
        labels=["worker"],
    )
    rss = GaugeMetricFamily(
        "tracescorer_worker_resident_memory_bytes",
        "Resident memory of each live worker process",
        labels=["worker"],
    )
    for source, snapshot in sources.items():
        if snapshot.cpu_seconds is not None:
            cpu.add_metric([source], snapshot.cpu_seconds)
        if snapshot.resident_bytes is not None:
            rss.add_metric([source], snapshot.resident_bytes)
    yield cpu
    yield rss
