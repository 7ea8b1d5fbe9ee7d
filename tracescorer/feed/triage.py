"""Triage: which items of a request could be part of a run, decided on its bytes.

A Collector forwards everything: most spans are HTTP, database and cache spans that no
convention can turn into a run. Decoding them into Python objects, storing them and assembling
their traces would spend the daemon's capacity on spans it never scores. Triage looks at each
scope group of a request (``ScopeSpans`` / ``ScopeLogs``) as bytes: a group holding one of the
conventions' markers (:attr:`~tracescorer.conventions.base.Convention.markers`: attribute keys,
scope, span and event names as they appear in OTLP protobuf) is kept whole; in any other group an
item is kept only when its trace is known to hold agent content (an item of a kept group had the
same trace id, in this request or in the last ``agent_window_s``). What is left is skipped, never
decoded: its traces are counted, per trace and service, for ``explain``.

A trace's plain items often come before its agent spans (a database call before the model is
asked). Triage remembers, for ``window_s`` and at most ``max_traces`` traces, in which log records
a trace had items skipped; when agent content of that trace arrives, :meth:`Triage.late` names
those records and :func:`pick` cuts the trace's items out of them, so the run has all its spans.
A trace whose agent content comes later than that is assembled without its earlier plain items.
A trace known to hold agent content keeps its later plain items for ``agent_window_s`` (at least
``window_s``): the daemon passes how long assembly waits for a trace's root, so an HTTP root that
ends long after the model calls under it still joins their run.
After a restart the feed shows triage the requests still in the log before where it goes on
(:meth:`Triage.recall`), so what it knew of recent traces is known again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ahocorasick_rs import BytesAhoCorasick

from tracescorer.feed import wire

SERVICE_NAME = b"service.name"
#: which traces (by raw id) a feed takes: a worker's share (:mod:`tracescorer.feed.partition`)
Owns = Callable[[bytes], bool]
HEAD_BYTES = 4096


@dataclass(slots=True)
class Skipped:
    """Items of one trace a request had skipped: how many, and the service that sent them."""

    items: int
    service: str | _Service | None  # a _Service only while the request is being sorted


@dataclass(slots=True)
class Sorted:
    """One request after triage: ``kept`` is the request holding only what may be part of a run
    (the payload itself when that is everything; None when nothing is), ``skipped`` the items
    left out per trace id (raw bytes; empty for items without one)."""

    kept: bytes | None
    whole: bool
    skipped: dict[bytes, Skipped] = field(default_factory=dict)
    kept_items: int = 0
    #: the trace ids of the items kept
    kept_traces: set[bytes] = field(default_factory=set)


@dataclass(slots=True)
class _Scope:
    """A scope group's value in the payload, its items' (start, end, trace id), those kept, and
    its resource group's service."""

    start: int
    end: int
    items: list[tuple[int, int, bytes]]
    service: _Service
    kept: list[tuple[int, int, bytes]] = field(default_factory=list)
    total: int = 0  # items in the payload's group (``items`` may hold only a partition's)


#: a resource group: (value start, value end, its scope groups)
_Group = tuple[int, int, list[_Scope]]


class Triage:
    """Triage of one feed's requests, traces and logs alike (they share what is known of a trace).

    Not thread-safe: one feed calls it, a batch at a time (in a worker thread)."""

    def __init__(
        self,
        markers: Iterable[bytes],
        *,
        window_s: float = 60.0,
        agent_window_s: float = 0.0,
        max_traces: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.markers = tuple(sorted(set(markers)))
        if not self.markers:
            raise ValueError("triage needs at least one marker")
        # one pass over a request for every marker at once (Aho-Corasick, in Rust)
        self._search = BytesAhoCorasick(list(self.markers))
        self._longest = max(map(len, self.markers))
        self.window_s = window_s
        self.agent_window_s = max(window_s, agent_window_s)
        self.max_traces = max_traces
        self._clock = clock
        self._agent: dict[bytes, float] = {}  # trace id -> last seen with agent content
        self._skipped: dict[bytes, tuple[float, list[int]]] = {}  # trace id -> (first skip, record offsets)

    # --- what is known of traces ------------------------------------------------------------------

    def is_agent(self, trace_id: bytes) -> bool:
        return trace_id in self._agent

    def oldest_skipped_offset(self) -> int | None:
        """The oldest log offset a skipped trace may still be read back from (segments from it on
        are kept while it may be)."""
        entries = list(self._skipped.values())  # one C-level copy: safe beside the feed's thread
        return min((offsets[0] for _, offsets in entries), default=None)

    def late(self, trace_ids: Iterable[bytes]) -> dict[int, set[bytes]]:
        """Records (by offset) holding skipped items of ``trace_ids``, now known to hold agent
        content; they are forgotten (read back once)."""
        found: dict[int, set[bytes]] = {}
        for trace_id in trace_ids:
            entry = self._skipped.pop(trace_id, None)
            if entry is not None:
                for offset in entry[1]:
                    found.setdefault(offset, set()).add(trace_id)
        return found

    def _remember_agent(self, trace_ids: Iterable[bytes], now: float) -> None:
        agent = self._agent
        for trace_id in trace_ids:
            agent.pop(trace_id, None)
            agent[trace_id] = now  # insertion order is age order

    def _remember_skipped(self, trace_ids: Iterable[bytes], offset: int, now: float) -> None:
        skipped = self._skipped
        for trace_id in trace_ids:
            entry = skipped.get(trace_id)
            if entry is None:
                skipped[trace_id] = (now, [offset])
            elif entry[1][-1] != offset:
                entry[1].append(offset)

    def expire(self) -> None:
        """Forget traces older than their window, and the oldest beyond ``max_traces``."""
        now = self._clock()
        horizon = now - self.window_s
        agent, skipped = self._agent, self._skipped
        agent_horizon = now - self.agent_window_s
        while agent:  # oldest first (insertion order)
            oldest = next(iter(agent))
            if len(agent) <= self.max_traces and agent[oldest] >= agent_horizon:
                break
            del agent[oldest]
        while skipped:
            oldest = next(iter(skipped))
            if len(skipped) <= self.max_traces and skipped[oldest][0] >= horizon:
                break
            del skipped[oldest]

    def _marked(self, view: memoryview, start: int, end: int) -> bool:
        # a search returns every match: agent content has hundreds, its first span one at least;
        # look at the start of a group first, then at the rest (overlapping by a marker's length)
        head = min(end, start + HEAD_BYTES)
        if self._search.find_matches_as_indexes(view[start:head]):
            return True
        return head < end and bool(self._search.find_matches_as_indexes(view[head - self._longest : end]))

    # --- a request ----------------------------------------------------------------------------------

    def recall(self, payload: bytes, offset: int, *, logs: bool = False, owns: Owns | None = None) -> None:
        """Learn again what a request handled before a restart told of its traces (which hold
        agent content, where others had items skipped), as :meth:`sort` did then; nothing is read
        back: its traces' earlier items were read back then."""
        self.late(self.sort(payload, offset, logs=logs, owns=owns).kept_traces)

    def sort(self, payload: bytes, offset: int, *, logs: bool = False, owns: Owns | None = None) -> Sorted:
        """Triage of the request at ``offset`` of the log (spans, or log records with ``logs``);
        with ``owns``, of the items of the traces it owns only (a worker's share)."""
        now = self._clock()
        self.expire()
        try:
            groups = _groups(payload, wire.LOG_TRACE_ID if logs else wire.SPAN_TRACE_ID, owns)
        except wire.WireError:
            # the decoder says what is wrong with it (once: the worker owning items without a trace)
            whole = owns is None or owns(b"")
            return Sorted(kept=payload if whole else None, whole=whole)
        view = memoryview(payload)
        agent_here: set[bytes] = set()
        plain: list[_Scope] = []
        items = 0
        partial = False
        for _, _, scopes in groups:
            for scope in scopes:
                items += len(scope.items)
                if len(scope.items) < scope.total:
                    partial = True
                if not scope.items:
                    continue
                if self._marked(view, scope.start, scope.end):
                    scope.kept = scope.items
                    agent_here.update(trace_id for _, _, trace_id in scope.items)
                else:
                    plain.append(scope)
        agent_here.discard(b"")
        self._remember_agent(agent_here, now)
        if not plain and not partial:
            return Sorted(kept=payload, whole=True, kept_items=items, kept_traces=agent_here)
        result = Sorted(kept=None, whole=False, kept_traces=agent_here)
        skipped = result.skipped
        known = self._agent
        for scope in plain:
            kept: list[tuple[int, int, bytes]] = []
            for item in scope.items:
                trace_id = item[2]
                if trace_id in known:
                    kept.append(item)
                    agent_here.add(trace_id)
                    continue
                entry = skipped.get(trace_id)
                if entry is None:
                    skipped[trace_id] = entry = Skipped(0, scope.service)
                entry.items += 1
            scope.kept = kept
        self._remember_skipped((t for t in skipped if t), offset, now)
        result.kept, result.kept_items = _cut(payload, groups)
        for entry in skipped.values():  # a service name is looked up once per resource group
            if isinstance(entry.service, _Service):
                entry.service = entry.service.name(payload)
        return result


def pick(payload: bytes, trace_ids: set[bytes], *, logs: bool = False) -> bytes | None:
    """The request with only the items of ``trace_ids`` (None when it has none)."""
    groups = _groups(payload, wire.LOG_TRACE_ID if logs else wire.SPAN_TRACE_ID)
    for _, _, scopes in groups:
        for scope in scopes:
            scope.kept = [item for item in scope.items if item[2] in trace_ids]
    return _cut(payload, groups)[0]


# --- cutting a request ------------------------------------------------------------------------------


class _Service:
    """The ``service.name`` of a resource group, read when first asked."""

    __slots__ = ("_end", "_name", "_start")

    def __init__(self, start: int, end: int) -> None:
        self._start, self._end = start, end
        self._name: str | _Service | None = self

    def name(self, payload: bytes) -> str | None:
        if self._name is self:
            self._name = None
            for number, wire_type, _, r_start, r_end in wire.fields(payload, self._start, self._end):
                if number == wire.RESOURCE and wire_type == 2:
                    self._name = wire.string_attribute(payload, r_start, r_end, SERVICE_NAME)
                    break
        return self._name if not isinstance(self._name, _Service) else None


def cut_owned(payload: bytes, owns: Owns, *, logs: bool = False) -> bytes | None:
    """The request with only the items of the traces ``owns`` owns (None when it has none; the
    payload itself when it has only those)."""
    groups = _groups(payload, wire.LOG_TRACE_ID if logs else wire.SPAN_TRACE_ID, owns)
    if all(len(scope.items) == scope.total for _, _, scopes in groups for scope in scopes):
        return payload
    for _, _, scopes in groups:
        for scope in scopes:
            scope.kept = scope.items
    return _cut(payload, groups)[0]


def _groups(payload: bytes, id_field: int, owns: Owns | None = None) -> list[_Group]:
    """The resource groups of ``payload`` and their scope groups; with ``owns``, a scope's
    ``items`` are only those whose trace it owns (``total`` counts them all)."""
    groups: list[_Group] = []
    for number, wire_type, _, start, end in wire.fields(payload):
        if number != wire.RESOURCE_GROUPS or wire_type != 2:
            continue
        service = _Service(start, end)
        scopes = []
        for s_no, s_type, _, s_start, s_end in wire.fields(payload, start, end):
            if s_no == wire.SCOPE_GROUPS and s_type == 2:
                found = wire.items(payload, s_start, s_end, wire.ITEMS, id_field)
                total = len(found)
                if owns is not None:
                    found = [item for item in found if owns(item[2])]
                scopes.append(_Scope(s_start, s_end, found, service, total=total))
        groups.append((start, end, scopes))
    return groups


def _cut(payload: bytes, groups: Sequence[_Group]) -> tuple[bytes | None, int]:
    """Rebuild the request from each scope group's ``kept`` items; every other field is carried
    over as it was. Returns the request (None: nothing kept) and the number of items it holds."""
    out: list[bytes] = []
    total = 0
    for start, end, scopes in groups:
        by_scope: dict[int, bytes] = {}
        for scope in scopes:
            kept = scope.kept
            if not kept:
                continue
            total += len(kept)
            if len(kept) == scope.total:
                by_scope[scope.start] = payload[scope.start : scope.end]
                continue
            kept_at = {item[0] for item in kept}
            by_scope[scope.start] = b"".join(
                payload[f_start:f_end]
                for no, wt, f_start, v_start, f_end in wire.fields(payload, scope.start, scope.end)
                if not (no == wire.ITEMS and wt == 2) or v_start in kept_at
            )
        if not by_scope:
            continue
        body = b"".join(
            wire.length_delimited(wire.SCOPE_GROUPS, by_scope[v_start])
            if no == wire.SCOPE_GROUPS and wt == 2
            else payload[f_start:f_end]
            for no, wt, f_start, v_start, f_end in wire.fields(payload, start, end)
            if not (no == wire.SCOPE_GROUPS and wt == 2) or v_start in by_scope
        )
        out.append(wire.length_delimited(wire.RESOURCE_GROUPS, body))
    return (b"".join(out) if out else None), total
