"""``${VAR}`` expansion of a parsed YAML configuration tree, strict or for reading.

Three forms are expanded in every string: ``${VAR}``, ``${VAR:-default}`` and the OpenTelemetry
Collector's ``${env:VAR}`` / ``${env:VAR:-default}``. ``${VAR}`` with VAR unset is an error
(an empty string would silently become, say, a database path at the root of the disk);
``${VAR:-}`` asks for an empty default explicitly. Every unset variable is reported at once.

Read commands (``runs``, ``scores``, ``query``...) never call a judge, export a score or notify
anyone, so the variables only those keys use (API keys, judge URLs, Slack webhooks) need not be
set in the reader's shell: :func:`expand` with ``reading=True`` leaves such keys out (the
smallest unit holding the reference: one judge option, one sink list, one notify target) and
returns them as *deferred*; ``serve`` and ``check-config`` expand strictly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_EXPAND = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")

Path = tuple[str | int, ...]

# Key paths only the daemon's outbound work reads (judge calls, export, notifications, the
# /metrics token); ``None`` matches any key or index. A variable unset below one of them leaves
# out the key at the pattern's depth.
_DEFERRABLE: tuple[tuple[str | None, ...], ...] = (
    ("judge", None),
    ("scorers", None, "judge", None),
    ("scorers", None, "options", None),
    ("export",),
    ("monitors", None, "notify", None),
    ("metrics", "auth_token"),
)


@dataclass(frozen=True, slots=True)
class Unset:
    """A ``${VAR}`` whose variable is not set, and the key it is in."""

    where: str
    name: str

    def __str__(self) -> str:
        return f"{self.where or '(root)'}: ${{{self.name}}} is not set in the environment"


class UnsetVariables(ValueError):
    """Variables the configuration refers to are not set; the message lists every one."""

    def __init__(self, unset: tuple[Unset, ...]) -> None:
        self.unset = unset
        hint = "set it" if len(unset) == 1 else "set them"
        super().__init__(f"{'; '.join(map(str, unset))} ({hint}, or write ${{VAR:-default}} for a default)")


def describe(path: Path) -> str:
    """``scorers.0.judge.api_key`` for a key path."""
    return ".".join(str(p) for p in path)


def _deferrable_unit(path: Path) -> Path | None:
    for pattern in _DEFERRABLE:
        if len(path) >= len(pattern) and all(p is None or p == part for p, part in zip(pattern, path, strict=False)):
            return path[: len(pattern)]
    return None


def _walk(value: Any, env: Mapping[str, str], path: Path, unset: list[tuple[Path, str]]) -> Any:
    if isinstance(value, str):

        def one(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if default is not None:
                return env.get(name) or default
            if name not in env:
                unset.append((path, name))
                return m.group(0)
            return env[name]

        return _EXPAND.sub(one, value)
    if isinstance(value, dict):
        return {k: _walk(v, env, (*path, str(k)), unset) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, env, (*path, i), unset) for i, v in enumerate(value)]
    return value


def _drop(data: Any, unit: Path) -> None:
    node = data
    for part in unit[:-1]:
        node = node[part]
    del node[unit[-1]]


def expand(data: Any, env: Mapping[str, str], *, reading: bool = False) -> tuple[Any, tuple[Unset, ...]]:
    """``data`` with every ``${...}`` replaced; returns it and the deferred unset variables.

    Strict (``reading=False``): any unset variable raises :class:`UnsetVariables` listing all of
    them. Reading: unset variables under the keys only the daemon's outbound work uses are left
    out with their key and returned; any other raises, listing those.
    """
    unset: list[tuple[Path, str]] = []
    out = _walk(data, env, (), unset)
    if not unset:
        return out, ()
    units = {path: _deferrable_unit(path) if reading else None for path, _ in unset}
    fatal = tuple(Unset(describe(path), name) for path, name in unset if units[path] is None)
    if fatal:
        raise UnsetVariables(fatal)
    # deepest and last first, so list indexes still point at the right item
    for unit in sorted({u for u in units.values() if u is not None}, key=lambda u: (len(u), u), reverse=True):
        _drop(out, unit)
    return out, tuple(Unset(describe(path), name) for path, name in unset)
