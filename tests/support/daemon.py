"""Running the daemon for tests: in-process (an App on the test's loop) or as a real process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from tracescorer.app import App
from tracescorer.clock import SYSTEM_CLOCK, Clock
from tracescorer.config import Settings
from tracescorer.control import ServeInfo, read_serve_info, remote_query, serve_info_path
from tracescorer.output import jsonable
from tracescorer.store.api import QueryStore
from tracescorer.store.duckdb import readonly

REPO = Path(__file__).resolve().parents[2]


def wait_for(predicate: Any, timeout_s: float = 10.0, interval_s: float = 0.02, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


async def wait_for_async(
    predicate: Any, timeout_s: float = 10.0, interval_s: float = 0.02, what: str = "condition"
) -> Any:
    """:func:`wait_for` for tests on the event loop; ``predicate`` may be a coroutine function."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(interval_s)


def config_dict(tmp_path: Path, **sections: dict[str, Any]) -> dict[str, Any]:
    """A config with both receivers and the ops API on free ports (port 0) and the store in ``tmp_path``."""
    cfg: dict[str, Any] = {
        "receiver": {"grpc": {"host": "127.0.0.1", "port": 0}, "http": {"host": "127.0.0.1", "port": 0}},
        "api": {"port": 0},
        "store": {"path": str(tmp_path / "ts.duckdb")},
    }
    for key, value in sections.items():
        if isinstance(value, dict):
            cfg.setdefault(key, {})
            _merge(cfg[key], value)
        else:
            cfg[key] = value
    return cfg


def _merge(into: dict[str, Any], new: dict[str, Any]) -> None:
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _in_process(cfg: dict[str, Any]) -> dict[str, Any]:
    """An App on the test's loop runs its stages in its own process unless the test asks for
    worker processes: those tests reach into the stages (or hold them back); a daemon started as a
    process (:class:`DaemonProcess`) runs as deployed, with worker processes."""
    cfg.setdefault("workers", {"count": 0})
    return cfg


def settings_for(tmp_path: Path, **sections: dict[str, Any]) -> Settings:
    """Settings for an App on the test's loop (no worker processes unless ``workers`` is given)."""
    return Settings.model_validate(_in_process(config_dict(tmp_path, **sections)))


def plain_config(tmp_path: Path, **sections: dict[str, Any]) -> dict[str, Any]:
    """:func:`config_dict` with ``store.spans: all``: for tests that read the spans they sent back
    as rows, plain ones too (the default ``store.spans: none`` writes no span row)."""
    cfg = config_dict(tmp_path, **sections)
    cfg["store"].setdefault("spans", "all")
    return cfg


def plain_settings(tmp_path: Path, **sections: dict[str, Any]) -> Settings:
    """:func:`settings_for` with ``store.spans: all`` (see :func:`plain_config`)."""
    return Settings.model_validate(_in_process(plain_config(tmp_path, **sections)))


@contextlib.asynccontextmanager
async def running_app(settings: Settings, clock: Clock = SYSTEM_CLOCK) -> AsyncIterator[App]:
    """An App on the test's loop, started and stopped; its periods measured with ``clock``."""
    app = App(settings, clock=clock)
    await app.start()
    try:
        yield app
    finally:
        await app.stop()


async def app_metric(app: App, name: str, **labels: str) -> float:
    """``name`` (with ``labels``) summed as a scrape of the daemon's ``/metrics`` shows it: the
    workers are asked for their figures first, as the scrape does."""
    from prometheus_client.parser import text_string_to_metric_families

    await app.pool.refresh_metrics()
    total = 0.0
    for family in text_string_to_metric_families(app.metrics.render().decode()):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += float(sample.value)
    return total


async def settled(app: App, timeout_s: float = 60.0) -> QueryStore:
    """Wait until every request ``app`` acknowledged so far is handled (the segment log's feed
    caught up) and, with span rows on (``store.spans``) in the daemon's own process, has its span
    rows (the span-rows feed caught up too); its query path, to read them."""
    assert await app.feed.caught_up(timeout_s), f"the segment log's feed is still {app.feed.lag_bytes} bytes behind"
    rows = app.pipeline.rows if app.pipeline is not None else None
    if rows is not None:  # lower priority: it waits for the feed above
        assert await rows.caught_up(timeout_s), f"the span-rows feed is still {rows.lag_bytes} bytes behind"
    return app.stores.queries


class DaemonProcess:
    """``tracescorer serve`` in a child process, configured from a YAML file in ``tmp_path``."""

    def __init__(
        self,
        tmp_path: Path,
        config: dict[str, Any],
        env: dict[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
        *,
        new_session: bool = False,
    ) -> None:
        self.tmp_path = tmp_path
        self.config_path = tmp_path / "tracescorer.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.db_path = config["store"]["path"]
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.info: ServeInfo | None = None
        self.log_path = tmp_path / "daemon.log"
        self.preexec_fn = preexec_fn  # run in the child before it starts (resource limits, say)
        # its own process group (pgid = pid), as a shell job is: os.killpg reaches its children too
        self.new_session = new_session

    def start(self, timeout_s: float = 60.0) -> DaemonProcess:
        serve_info_path(self.db_path).unlink(missing_ok=True)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tracescorer", "serve", "--config", str(self.config_path)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=str(REPO),
            preexec_fn=self.preexec_fn,
            start_new_session=self.new_session,
        )

        def ready() -> ServeInfo | None:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.proc.returncode}: {self.log()}")
            return read_serve_info(self.db_path)

        try:
            self.info = wait_for(ready, timeout_s, what="daemon start")
        except BaseException:
            # a daemon that did not start in time is not left running behind the failed test
            if self.proc.poll() is None:
                self.proc.terminate()  # it stops its store process too
                try:
                    self.proc.wait(30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(30)
            self._log.close()
            raise
        return self

    @property
    def http_url(self) -> str:
        assert self.info is not None
        return self.info.url

    @property
    def grpc_endpoint(self) -> str:
        assert self.info is not None
        return f"127.0.0.1:{self.info.grpc_port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 60.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self._log.close()
        return code

    def cli(
        self, *args: str, check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run another ``tracescorer`` command with this daemon's config (and ``env`` on top of its environment)."""
        result = subprocess.run(
            [sys.executable, "-m", "tracescorer", *args, "--config", str(self.config_path)],
            capture_output=True,
            text=True,
            env={**self.env, **(env or {})},
            cwd=str(REPO),
            timeout=120,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"tracescorer {' '.join(args)} failed ({result.returncode}): {result.stderr}")
        return result

    def settled(self, timeout_s: float = 60.0) -> None:
        """Wait until every request acknowledged so far is handled by the pipeline's feeds (the
        daemon's ``tracescorer_feed_lag_bytes`` at 0, read from its /metrics); span rows may come
        later (:func:`support.kept.span_rows_caught_up`)."""

        wait_for(
            lambda: self.metric("tracescorer_feed_lag_bytes ", missing=-1.0) == 0.0,
            timeout_s,
            interval_s=0.05,
            what="the segment log's feed to catch up",
        )

    def metric(self, prefix: str, *, missing: float = 0.0) -> float:
        """The sum of the samples on /metrics whose line starts with ``prefix`` (``missing`` if none)."""
        with urllib.request.urlopen(self.http_url + "/metrics", timeout=10) as resp:
            lines = [line for line in resp.read().decode().splitlines() if line.startswith(prefix)]
        return sum(float(line.rsplit(" ", 1)[1]) for line in lines) if lines else missing

    def query_json(self, sql: str) -> list[dict[str, Any]]:
        """Rows as JSON-style dicts, in-process: through the running daemon's ops API (state
        file + urllib), else on the file opened read-only. Cheap enough to poll."""
        return query_rows(self.db_path, sql)

    def runs(
        self, *, trace_id: str | None = None, conversation_id: str | None = None, unmatched: bool = False
    ) -> list[dict[str, Any]]:
        """What ``tracescorer runs --format jsonl`` prints (AgentRun dicts, or unmatched traces), in-process."""
        return run_dicts(self.db_path, trace_id=trace_id, conversation_id=conversation_id, unmatched=unmatched)


def _raw(db_path: str, sql: str, max_rows: int, params: Sequence[Any] = ()) -> tuple[list[str], list[Any]]:
    """Columns and rows as the read commands get them: from the daemon's ops API when it runs
    (state file + urllib), else from the file opened read-only."""
    info = read_serve_info(db_path)
    if info is not None:
        result = remote_query(info, sql, max_rows=max_rows, params=params)
        columns, rows, truncated = result["columns"], result["rows"], result["truncated"]
    else:
        con = readonly.connect(db_path)
        try:
            res = readonly.run_guarded(con, sql, max_rows=max_rows, timeout_s=60, params=params)
        finally:
            con.close()
        columns, rows, truncated = res.columns, res.rows, res.truncated
    # the daemon caps rows at store.query_max_rows: a test must not compare against a cut set
    assert not truncated, f"query result cut at {len(rows)} rows (aggregate in SQL instead): {sql}"
    return columns, rows


def query_rows(db_path: str, sql: str, max_rows: int = 100_000, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """What ``tracescorer query --format json`` prints, without spawning a CLI."""
    columns, rows = _raw(db_path, sql, max_rows, params)
    return [dict(zip(columns, (jsonable(v) for v in row), strict=False)) for row in rows]


def run_dicts(
    db_path: str, *, trace_id: str | None = None, conversation_id: str | None = None, unmatched: bool = False
) -> list[dict[str, Any]]:
    """What ``tracescorer runs --format jsonl`` prints, without spawning a CLI."""
    from tracescorer.store import queries
    from tracescorer.store.runs import run_from_row

    if unmatched:
        unmatched_query = queries.unmatched_traces(trace_id=trace_id)
        return query_rows(db_path, unmatched_query.sql, params=unmatched_query.params)
    runs_query = queries.runs(trace_id=trace_id, conversation_id=conversation_id)
    _, rows = _raw(db_path, runs_query.sql, 100_000, runs_query.params)
    return [json.loads(json.dumps(run_from_row(row).to_dict(), default=str)) for row in rows]


def store_children(pid: int) -> list[Any]:
    """The live store processes among ``pid``'s children (beside them: worker processes)."""
    import psutil

    found = []
    for child in psutil.Process(pid).children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and "tracescorer.store.duckdb.server" in " ".join(
                child.cmdline()
            ):
                found.append(child)
        except psutil.Error:
            continue
    return found
