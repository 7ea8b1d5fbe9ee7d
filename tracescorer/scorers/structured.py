"""Structured judge output: JSON schemas from pydantic models or dicts, parsing and validation."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ValidationError

from tracescorer.scorers.errors import JudgeOutputError, ScorerConfigError
from tracescorer.text import fix_surrogates

OutputSchema = type[BaseModel] | Mapping[str, Any]
"""A pydantic model class or a JSON schema dict (``{"type": "object", ...}``)."""

SCORE_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": "number"}},
    "required": ["score"],
    "additionalProperties": False,
}

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


@dataclass(frozen=True, kw_only=True)
class CompiledSchema:
    """A schema prepared once per step: its JSON schema, ``response_format`` and validator."""

    source: OutputSchema
    json_schema: Mapping[str, Any]
    name: str
    response_format: Mapping[str, Any]
    prompt_instructions: str

    def validate(self, value: Any) -> Any:
        """Validate parsed JSON; returns the model instance (pydantic) or the value (dict)."""
        if isinstance(self.source, type):
            try:
                return self.source.model_validate(value)
            except ValidationError as exc:
                raise JudgeOutputError(f"judge output does not match schema {self.name!r}: {exc}") from exc
        if self.source is SCORE_SCHEMA:  # noqa: SIM102 - the default score step: checked by hand, 30x faster
            if (
                isinstance(value, dict)
                and value.keys() == {"score"}
                and isinstance(value["score"], (int, float))
                and not isinstance(value["score"], bool)
            ):
                return value
        import jsonschema

        try:
            self._validator.validate(value)
        except jsonschema.ValidationError as exc:
            raise JudgeOutputError(f"judge output does not match schema {self.name!r}: {exc.message}") from exc
        return value

    @cached_property
    def _validator(self) -> Any:
        # Checking the schema and building the validator costs ~1 ms: done once per schema.
        # jsonschema ships with litellm (a dict schema implies an LLM judge); imported lazily to
        # keep it off the daemon's start-up path.
        import jsonschema

        cls = jsonschema.validators.validator_for(self.json_schema)
        try:
            cls.check_schema(self.json_schema)
        except jsonschema.SchemaError as exc:
            raise ScorerConfigError(f"output_schema {self.name!r} is not a valid JSON schema: {exc.message}") from exc
        return cls(self.json_schema)


def compile_schema(schema: OutputSchema) -> CompiledSchema:
    """Prepare ``schema`` for judge calls (raises ScorerConfigError when it is not a schema)."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        json_schema: Mapping[str, Any] = schema.model_json_schema()
        name = schema.__name__
    elif isinstance(schema, Mapping):
        json_schema = dict(schema)
        name = str(schema.get("title") or "output")
    else:
        raise ScorerConfigError(f"output_schema must be a pydantic model class or a JSON schema dict, got {schema!r}")
    name = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "output"
    text = json.dumps(json_schema, separators=(",", ":"))
    return CompiledSchema(
        source=schema,
        json_schema=json_schema,
        name=name,
        response_format={"type": "json_schema", "json_schema": {"name": name, "schema": json_schema}},
        prompt_instructions=(f"Respond with only a JSON object (no prose) that conforms to this JSON schema:\n{text}"),
    )


def parse_json_text(text: str | None) -> Any:
    """Parse the judge's reply as JSON, tolerating a Markdown code fence or text around an object.

    Raises :class:`JudgeOutputError` with the start of the reply when it holds no valid JSON.
    """
    if text is None or not text.strip():
        raise JudgeOutputError("judge returned an empty reply where JSON was expected", raw_output=text)
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return fix_surrogates(json.loads(candidate))  # a "\ud83d" escape: a lone surrogate
        except ValueError:
            continue
    raise JudgeOutputError(f"judge reply is not valid JSON: {text[:200]!r}", raw_output=text)
