"""Scorer versions: a stable hash of what defines a binding, stored on every score.

Two scores are comparable when the same definition made them. :func:`scorer_version` hashes the
binding (prebuilt or python scorer, its options, scope, threshold, the binding's judge keys) and
the scorer it built: each step in order, a prompt step's description, output schema, judge (model
and options) and the code of its prompt, a function step's code. Code is read as its source text
(stable across Python versions; the bytecode when the source is not available), with the values
it closes over, its default arguments, and the module-level values it names (a ``PROMPT``
constant, a helper function), so editing a prompt template gives a new version. Connection
settings (``api_base``, ``api_key``, ``timeout``) and fallback models are left out: moving the
judge to another endpoint or rotating its key does not change what a score means, and a score
names the model that answered it. Object addresses never enter
the hash, so the same configuration gives the same version in every process and after restarts.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import inspect
import json
import re
import textwrap
import types
from collections.abc import Mapping
from typing import Any

from tracescorer.config import ScorerBinding
from tracescorer.scorers.judge_config import CONNECTION_OPTIONS, Judge
from tracescorer.scorers.scorer import PromptStep, Scorer

#: how many hex digits of the hash a version shows
VERSION_DIGITS = 12
#: option keys of a judge that say where and how to connect, not what it judges
CONNECTION_KEYS = CONNECTION_OPTIONS
#: binding judge keys left out too: fallbacks are asked only when the judge's model fails, and each
#: score names the model that answered
_UNVERSIONED = CONNECTION_KEYS | {"fallbacks"}
_MAX_DEPTH = 8
_PLAIN = (str, int, float, bool, type(None))


def scorer_version(binding: ScorerBinding, scorer: Scorer[Any, Any]) -> str:
    """The version of a built binding: ``VERSION_DIGITS`` hex digits of the hash of its definition."""
    text = json.dumps(definition(binding, scorer), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:VERSION_DIGITS]


def definition(binding: ScorerBinding, scorer: Scorer[Any, Any]) -> dict[str, Any]:
    """What the version is a hash of, as plain data (for tests and for finding out why it changed)."""
    canon = _Canon()
    return {
        "binding": {
            "prebuilt": binding.prebuilt,
            "python": binding.python,
            "options": canon.value(dict(binding.options)),
            "scope": binding.scope,
            "threshold": binding.threshold,
            "judge": canon.value({k: v for k, v in binding.judge.items() if k not in _UNVERSIONED}),
        },
        "scorer": {
            "type": scorer.type,
            "judge": canon.value(scorer.judge),
            "prepare_run": canon.value(scorer.prepare_run),
            "steps": [
                {"name": bound.name, "step": canon.value(bound.step)}
                for bound in scorer._steps  # the bound steps: the public view has names only
            ],
        },
    }


class _Canon:
    """Plain, address-free data for any value a scorer definition holds."""

    def __init__(self) -> None:
        self._seen: set[int] = set()

    def value(self, value: Any, depth: int = 0) -> Any:
        if isinstance(value, _PLAIN):
            return value
        if depth > _MAX_DEPTH:
            return _type_name(value)
        if isinstance(value, enum.Enum):
            return f"{_type_name(value)}.{value.name}"
        if isinstance(value, Mapping):
            return {str(k): self.value(v, depth + 1) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
        if isinstance(value, (list, tuple)):
            return [self.value(v, depth + 1) for v in value]
        if isinstance(value, (set, frozenset)):
            return sorted((self.value(v, depth + 1) for v in value), key=repr)
        if isinstance(value, bytes):
            return hashlib.sha256(value).hexdigest()
        if isinstance(value, re.Pattern):
            return {"pattern": value.pattern, "flags": value.flags}
        if id(value) in self._seen:
            return _type_name(value)  # a cycle: the type is enough
        self._seen.add(id(value))
        try:
            return self._object(value, depth)
        finally:
            self._seen.discard(id(value))

    def _object(self, value: Any, depth: int) -> Any:
        if isinstance(value, Judge):
            return self._judge(value, depth)
        if isinstance(value, PromptStep):
            return {
                "prompt_step": value.description,
                "create_prompt": self.value(value.create_prompt, depth + 1),
                "output_schema": self._schema(value.output_schema, depth),
                "judge": self.value(value.judge, depth + 1),
                "calculate_score": self.value(value.calculate_score, depth + 1),
            }
        if isinstance(value, type):
            return self._schema(value, depth) if hasattr(value, "model_json_schema") else _qualname(value)
        if isinstance(value, (types.FunctionType, types.MethodType, types.BuiltinFunctionType)) or callable(value):
            return self._callable(value, depth)
        if dataclasses.is_dataclass(value):
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            return {"type": _type_name(value), "fields": self.value(fields, depth + 1)}
        if hasattr(value, "model_dump"):
            return {"type": _type_name(value), "fields": self.value(value.model_dump(mode="json"), depth + 1)}
        state = getattr(value, "__dict__", None)
        if isinstance(state, dict):
            return {"type": _type_name(value), "fields": self.value(state, depth + 1)}
        return _type_name(value)

    def _judge(self, judge: Judge, depth: int) -> dict[str, Any]:
        return {
            "model": judge.model,
            "instructions": judge.instructions,
            "json_prompt_injection": judge.json_prompt_injection,
            "processors": self.value(
                [*judge.input_processors, *judge.output_processors, *judge.error_processors], depth + 1
            ),
            "max_processor_retries": judge.max_processor_retries,
            "options": self.value({k: v for k, v in judge.options.items() if k not in CONNECTION_KEYS}, depth + 1),
        }

    def _schema(self, schema: Any, depth: int) -> Any:
        if schema is None or isinstance(schema, Mapping):
            return self.value(schema, depth + 1)
        dump = getattr(schema, "model_json_schema", None)
        if callable(dump):
            try:
                return self.value(dump(), depth + 1)
            except Exception:  # noqa: BLE001 - a model pydantic cannot describe: its name stands in
                return _qualname(schema)
        return self.value(schema, depth + 1)

    def _callable(self, fn: Any, depth: int) -> Any:
        if isinstance(fn, functools.partial):
            return {
                "partial": self.value(fn.func, depth + 1),
                "args": self.value(fn.args, depth + 1),
                "keywords": self.value(fn.keywords, depth + 1),
            }
        if isinstance(fn, types.MethodType):
            return {"method": self._callable(fn.__func__, depth + 1), "self": self.value(fn.__self__, depth + 1)}
        code = getattr(fn, "__code__", None)
        if code is None:
            call = inspect.getattr_static(type(fn), "__call__", None)
            if isinstance(call, types.FunctionType) and not isinstance(fn, type):  # an object used as a function
                state = getattr(fn, "__dict__", {})
                return {
                    "type": _type_name(fn),
                    "call": self._callable(call, depth + 1),
                    "fields": self.value(state, depth + 1),
                }
            return _qualname(fn)  # a builtin or a C function: its name says what it does
        closure = [self.value(cell.cell_contents, depth + 1) for cell in (fn.__closure__ or ()) if _filled(cell)]
        named = {}
        module = getattr(fn, "__module__", None)
        for name in sorted(_names(code)):
            found = fn.__globals__.get(name, _MISSING)
            plain = isinstance(found, (*_PLAIN, tuple, frozenset))
            helper = isinstance(found, types.FunctionType) and found.__module__ == module and found is not fn
            if plain or helper:
                named[name] = self.value(found, depth + 1)
        return {
            "function": _qualname(fn),
            "code": _source(fn, code),
            "closure": closure,
            "defaults": self.value(fn.__defaults__, depth + 1),
            "kwdefaults": self.value(fn.__kwdefaults__, depth + 1),
            "globals": named,
        }


_MISSING = object()


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _names(code: types.CodeType) -> set[str]:
    """Global names a code object and the code nested in it (lambdas, comprehensions) use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _source(fn: Any, code: types.CodeType) -> str:
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):  # defined in a REPL or generated: the bytecode stands in
        return _bytecode(code)


def _bytecode(code: types.CodeType) -> str:
    digest = hashlib.sha256(code.co_code)
    for const in code.co_consts:  # nested code by its own bytecode: its repr holds an address
        digest.update((_bytecode(const) if isinstance(const, types.CodeType) else repr(const)).encode())
    return digest.hexdigest()


def _qualname(value: Any) -> str:
    return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', type(value).__qualname__)}"


def _type_name(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"
