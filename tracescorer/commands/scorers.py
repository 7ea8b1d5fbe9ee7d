"""``tracescorer scorers list``: the scorer bindings of the configuration, and the prebuilt scorers."""

from __future__ import annotations

import inspect
from typing import Any

import click

from tracescorer.commands.common import config_option, load


@click.group()
def scorers() -> None:
    """The scorer bindings of the configuration, and the prebuilt scorers."""


@scorers.command("list")
@config_option
@click.option("--available", is_flag=True, help="List every prebuilt scorer with its options instead of the bindings.")
def list_scorers(config_path: str | None, available: bool) -> None:
    """List bound scorers (scope, sampling, filter, threshold, judge), or with --available every
    prebuilt scorer a binding can name."""
    from tracescorer.output import format_table

    if available:
        click.echo(
            format_table(
                ["prebuilt", "kind", "options", "description"], _prebuilt_rows(), wrap=("options", "description")
            )
        )
        return
    settings = load(config_path)
    from tracescorer.runner.bindings import BindingError, build_bindings

    try:
        bound = {b.binding.id: b for b in build_bindings(settings.scorers, settings.judge)}
    except BindingError as exc:
        raise click.ClickException(str(exc)) from None
    rows = []
    for binding in settings.scorers:
        b = bound.get(binding.id)
        rows.append(
            [
                binding.id,
                binding.prebuilt or binding.python,
                binding.scope,
                binding.sampling.ratio,
                binding.threshold,
                "yes" if b and b.uses_judge else "no",
                "yes" if binding.enabled else "no",
                binding.filter.model_dump(exclude_defaults=True) or "",
            ]
        )
    if not rows:
        click.echo(
            "no scorers are bound in this configuration; `tracescorer scorers list --available` lists the "
            "prebuilt ones (bind them under `scorers:`, see config/scorers.example.yaml)"
        )
        return
    click.echo(
        format_table(
            ["id", "scorer", "scope", "sampling", "threshold", "judge", "enabled", "filter"], rows, wrap=("filter",)
        )
    )


_JUDGE_PARAMS = frozenset({"model", "judge", "api_base", "api_key", "timeout"})


def _prebuilt_rows() -> list[list[Any]]:
    """One row per prebuilt factory of the bindings registry, its options from its signature."""
    from tracescorer.scorers.prebuilt.catalog import PREBUILT

    rows = []
    for name, factory in sorted(PREBUILT.items()):
        params = inspect.signature(factory).parameters
        kind = "llm judge" if "model" in params else "code"
        options = []
        for p in params.values():
            if p.name in _JUDGE_PARAMS or p.name == "id" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            options.append(
                f"{p.name} (required)" if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
            )
        doc = (inspect.getdoc(factory) or "").strip().split("\n\n")[0].replace("\n", " ")
        rows.append([name, kind, ", ".join(options) or "-", doc])
    return rows
