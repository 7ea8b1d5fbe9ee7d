"""Loading: the YAML file, ``${VAR}`` expansion (:mod:`tracescorer.config.envexpand`) and
``TRACESCORER_<SECTION>__<KEY>`` overrides, validated into one :class:`Settings`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from tracescorer.config.envexpand import UnsetVariables, expand
from tracescorer.config.errors import ConfigError, describe, did_you_mean
from tracescorer.config.settings import Settings

ENV_PREFIX = "TRACESCORER_"
# TRACESCORER_* variables the CLI reads itself (never configuration overrides)
_NOT_OVERRIDES = frozenset({"TRACESCORER_CONFIG"})
# the key ``log_level`` of earlier releases (and TRACESCORER_LOG_LEVEL) sets ``log.level``
_ALIASES: dict[tuple[str, ...], tuple[str, ...]] = {("log_level",): ("log", "level")}


def _apply_env(data: dict[str, Any], env: Mapping[str, str]) -> dict[tuple[str, ...], str]:
    """Apply ``TRACESCORER_<SECTION>__<KEY>`` overrides; returns {key path: variable name}.

    A variable with ``__`` is an override and its first part must be a section; a single-part
    name is an expansion variable (``TRACESCORER_AUTH_TOKEN``) unless it names a top-level key.
    """
    sections = set(Settings.model_fields)
    sources: dict[tuple[str, ...], str] = {}
    for name, raw in sorted(env.items()):
        if not name.startswith(ENV_PREFIX) or name in _NOT_OVERRIDES:
            continue
        path = name[len(ENV_PREFIX) :].lower().split("__")
        alias = _ALIASES.get(tuple(path))
        if alias is not None:
            for old in _ALIASES:  # the variable wins over the file's old spelling of the key
                data.pop(old[0], None)
            path = list(alias)
        if len(path) == 1:
            if path[0] not in sections:
                continue  # an expansion variable such as TRACESCORER_AUTH_TOKEN, not an override
            raise ConfigError(
                f"invalid configuration: {name}: {path[0]!r} is a section; set one key with "
                f"{ENV_PREFIX}{path[0].upper()}__<KEY>"
            )
        if path[0] not in sections:
            raise ConfigError(
                f"invalid configuration: {name}: unknown section {path[0]!r}"
                f"{did_you_mean(path[0], sections)} (sections: {', '.join(sorted(sections))})"
            )
        if any(not part for part in path):
            raise ConfigError(f"invalid configuration: {name}: empty key part (use one '__' between keys)")
        node = data
        for depth, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None:
                child = {}
                node[part] = child
            elif not isinstance(child, dict):
                where = ".".join(path[: depth + 1])
                raise ConfigError(
                    f"invalid configuration: {name}: {where} is not a section, it cannot have key {path[depth + 1]!r}"
                )
            node = child
        try:
            parsed = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            parsed = raw  # not YAML: plain text (validation says if the key wants something else)
        # keep secrets and free text verbatim; YAML-typed only for numbers, booleans, lists
        node[path[-1]] = parsed if isinstance(parsed, (int, float, bool, list, dict)) else raw
        sources[tuple(path)] = name
    return sources


def load_settings(
    path: str | Path | None = None, env: Mapping[str, str] | None = None, *, reading: bool = False
) -> Settings:
    """Load and validate settings from ``path`` (optional) and the environment.

    ``reading``: for the read commands, which neither call the judge nor export nor notify:
    variables only those keys use may be unset (:mod:`tracescorer.config.envexpand`); the keys are left
    out and :meth:`Settings.require_environment` reports them if something needs them after all.
    """
    env = os.environ if env is None else env
    data: Any = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path}: the top level must be a mapping")
    try:
        data, deferred = expand(data, env, reading=reading)
    except UnsetVariables as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
    sources = _apply_env(data, env)
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe(exc, Settings, sources, data)) from None
    settings._deferred = deferred
    return settings
