"""Reloading the configuration while the daemon serves (SIGHUP, ``tracescorer reload``, the ops
API's ``POST /api/v1/reload``).

One rule: a reload applies the scorer bindings (``scorers``), the monitors (``monitors``), the
export sinks (``export``) and the log level (``log.level``), or nothing. The file is read again
(with the environment, as at start) and checked whole first: invalid YAML or values, a binding
that cannot be built, a sink that cannot be, or any other key changed from the running
configuration (listeners, store, workers, segment log, judge, scoring, ...: those need a restart,
and the refusal names each) refuse the reload, and the running configuration stays. Applied:
new decisions use the new bindings (targets queued or being scored finish with the binding they
were decided with; conversation claims stand), in the main process and every worker
(:meth:`WorkerPool.reload`); changed monitors are rebuilt from the store, unchanged ones keep
their state; new sinks start and removed ones stop after their delivery in flight. Intake never
stops. ``tracescorer_config_reloads_total{result}`` counts reloads, ``tracescorer_config_info{hash}``
names the configuration running.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracescorer import logs
from tracescorer.config import ConfigError, Settings, load_settings
from tracescorer.export import EvaluationExporter
from tracescorer.metrics import Metrics
from tracescorer.monitors.build import Monitors
from tracescorer.runner.bindings import BindingError, build_bindings
from tracescorer.runner.stage import ScoringRunner
from tracescorer.workers.pool import WorkerPool

log = logging.getLogger(__name__)

#: the keys a reload applies (every other one needs a restart)
RELOADABLE = ("scorers", "monitors", "export", "log.level")


class ReloadRefused(Exception):
    """The new configuration is not applied (the message says why); ``restart``: the keys whose
    change needs a restart, if that is why."""

    def __init__(self, message: str, restart: list[str] | None = None) -> None:
        super().__init__(message)
        self.restart = restart or []


@dataclass(frozen=True, slots=True)
class Reloaded:
    """An applied reload: the new configuration's hash and which reloadable keys changed."""

    hash: str
    changed: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"result": "applied", "hash": self.hash, "changed": self.changed}


def config_hash(settings: Settings) -> str:
    """A short hash of the effective configuration, secrets masked (``/metrics`` may be open to
    anyone who can reach the port: no hash of a token is shown there)."""
    canonical = json.dumps(settings.masked(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _differences(old: Any, new: Any, where: str) -> list[str]:
    """The dotted keys whose values differ between two dumps."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            out += _differences(old.get(key), new.get(key), f"{where}.{key}" if where else key)
        return out
    return [] if old == new else [where]


def changed_keys(old: Settings, new: Settings) -> tuple[list[str], list[str]]:
    """(reloadable keys that changed, other keys that changed: those need a restart)."""
    before, after = old.model_dump(mode="json"), new.model_dump(mode="json")
    reloadable = [k for k in ("scorers", "monitors", "export") if before.pop(k) != after.pop(k)]
    if before["log"].pop("level") != after["log"].pop("level"):
        reloadable.append("log.level")
    return reloadable, _differences(before, after, "")


class Reloader:
    """Checks and applies a new configuration (see the module docstring); one reload at a time."""

    def __init__(
        self,
        settings: Settings,
        *,
        config_path: str | Path | None,
        metrics: Metrics,
        runner: ScoringRunner,
        pool: WorkerPool,
        monitors: Monitors,
        exporter: EvaluationExporter,
    ) -> None:
        self.settings = settings
        self._path = config_path
        self._metrics = metrics
        self._runner = runner
        self._pool = pool
        self._monitors = monitors
        self._exporter = exporter
        self._lock = asyncio.Lock()
        # conversation idling runs when a binding needed it at start (workers/pipeline.py)
        self._idling = any(b.scope == "conversation" and b.enabled for b in settings.scorers)
        #: told of each applied configuration (the label route's scorer scopes)
        self.on_applied: list[Callable[[Settings], None]] = []
        metrics.loaded_config(config_hash(settings))

    async def reload(self, settings: Settings | None = None) -> Reloaded:
        """Read the configuration file again (or take ``settings``), check it and apply it;
        raises :class:`ReloadRefused` (the running configuration unchanged)."""
        async with self._lock:
            try:
                done = await self._reload(settings)
            except ReloadRefused as exc:
                self._metrics.config_reloads.labels("refused").inc()
                log.error("configuration reload refused, the running configuration stays: %s", exc)
                raise
            self._metrics.config_reloads.labels("applied").inc()
            return done

    async def _reload(self, new: Settings | None) -> Reloaded:
        if new is None:
            if self._path is None:
                raise ReloadRefused("the daemon was started without a configuration file (--config): nothing to read")
            try:
                new = await asyncio.to_thread(load_settings, self._path)
            except ConfigError as exc:
                raise ReloadRefused(str(exc)) from None
        old = self.settings
        changed, restart = changed_keys(old, new)
        if restart:
            raise ReloadRefused(
                f"{', '.join(restart)}: changed, and only a restart applies "
                f"{'it' if len(restart) == 1 else 'them'} (a reload applies {', '.join(RELOADABLE)})",
                restart,
            )
        if not self._idling and any(b.scope == "conversation" and b.enabled for b in new.scorers):
            raise ReloadRefused(
                "scorers: the first conversation-scope binding needs a restart (conversation idling "
                "starts with the daemon when a binding needs it)",
                ["scorers"],
            )
        try:
            bound = await asyncio.to_thread(build_bindings, new.scorers, new.judge) if "scorers" in changed else None
            sinks = self._exporter.plan(new.export) if "export" in changed else None
        except (BindingError, ConfigError) as exc:
            raise ReloadRefused(str(exc)) from None
        # checked: from here on it is applied
        if "log.level" in changed:
            logs.set_level(new.log.level)
        if bound is not None:
            self._runner.rebind(bound)
        problems = await self._pool.reload(new) if changed else []
        await self._monitors.reload(new.monitors, [b.id for b in new.scorers])
        if sinks is not None:
            await self._exporter.apply(sinks)
        self.settings = new
        for callback in self.on_applied:
            callback(new)
        digest = config_hash(new)
        self._metrics.loaded_config(digest)
        for problem in problems:
            log.error("configuration reload: %s", problem)
        log.info(
            "configuration reloaded (hash %s): %s",
            digest,
            ", ".join(changed) if changed else "nothing changed",
        )
        return Reloaded(digest, changed)
