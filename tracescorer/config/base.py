"""The base of every settings section: unknown keys are errors, defaults are validated too."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A configuration section (a mapping in the YAML file); a misspelt key fails the load."""

    model_config = ConfigDict(extra="forbid", validate_default=True)
