"""The configuration's error, and validation errors of the settings as one message a person reads:
the key, the value, the variable it came from, the key probably meant (``did you mean 'path'?``),
list items named by id (``monitors.0 (support-quality).window``), no pydantic prefixes."""

from __future__ import annotations

import difflib
import types
from collections.abc import Mapping
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError


class ConfigError(ValueError):
    """The configuration is invalid; the message names the offending key."""


def did_you_mean(key: str, valid: Any) -> str:
    """`` (did you mean 'path'?)`` when a valid key is close to ``key``, else empty."""
    close = difflib.get_close_matches(key, sorted(valid), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds: itself, the item of a list, the model of an Optional."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = get_origin(annotation)
    if origin in (list, Union, types.UnionType):
        for arg in get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def _keys_at(root: type[BaseModel], loc: tuple[str, ...]) -> list[str] | None:
    """The valid keys of the section at ``loc`` (list indexes skipped), None if not a section."""
    model: type[BaseModel] | None = root
    for part in loc:
        if part.isdigit():
            continue
        field = model.model_fields.get(part) if model is not None else None
        model = _model_in(field.annotation) if field is not None else None
        if model is None:
            return None
    return list(model.model_fields) if model is not None else None


def _where(loc: tuple[str, ...], data: Any) -> str:
    """``monitors.0 (support-quality).window``: list items with an ``id`` are named by it."""
    out: list[str] = []
    node = data
    for part in loc:
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
            item_id = node.get("id") if isinstance(node, dict) else None
            out.append(f"{part} ({item_id})" if isinstance(item_id, str) and item_id else part)
            continue
        node = node.get(part) if isinstance(node, dict) else None
        out.append(part)
    return ".".join(out)


def describe(
    exc: ValidationError, root: type[BaseModel], sources: Mapping[tuple[str, ...], str], data: Any = None
) -> str:
    """One message for every error of ``exc``: each names its key (``sources``: the environment
    variable that set it), a misspelt key the key meant, and list items by their ``id``."""
    lines = []
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            valid = _keys_at(root, loc[:-1]) or []
            hint = did_you_mean(loc[-1], valid)
            msg = f"unknown key{hint}" if hint or not valid else f"unknown key (valid keys: {', '.join(valid)})"
        elif isinstance(err.get("input"), (str, int, float, bool)) and repr(err["input"]) not in msg:
            msg = f"{msg} (got {err['input']!r})"
        origin = next(
            (var for path, var in sources.items() if loc[: len(path)] == path or path[: len(loc)] == loc), None
        )
        if origin is not None:
            msg += f" (from {origin})"
        # a model-level check names its own key (``monitors.0 (id): ...``): no "(root)" before it
        lines.append(f"{_where(loc, data)}: {msg}" if loc else msg)
    return "invalid configuration: " + "; ".join(lines)
