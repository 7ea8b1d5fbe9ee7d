"""The README and the operator docs stay true to the code: the README fits on a page and links
only to doc sections that exist; every ``tracescorer`` command they show exists with the options
shown, and the README's command lines parse as the CLI would; every YAML block of the README
validates (its scorer bindings built as ``check-config`` builds them), and so do the configuration
keys and ``TRACESCORER_*`` overrides it names; docs/configuration.md names every key of the
``Settings`` model and none it lacks. The quick start itself runs in
tests/e2e/test_readme_quickstart.py."""

from __future__ import annotations

import re
import shlex
import typing
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from pydantic import BaseModel

from tracescorer.cli import main
from tracescorer.config import load_settings
from tracescorer.config.settings import Settings
from tracescorer.runner.bindings import build_bindings

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
# the pages that show commands and keys to operators (the others belong to their own topics)
OPERATOR_DOCS = [
    README,
    *(REPO / "docs" / name for name in ("cli.md", "configuration.md", "runbook.md", "performance.md")),
]
TOC = ("architecture", "configuration", "conventions", "scorers", "monitors", "calibrate", "runbook", "performance")

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_INLINE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_OPTION = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")


def _blocks(text: str, *langs: str) -> list[str]:
    return [m[2] for m in _FENCE.finditer(text) if m[1] in langs]


def _prose(text: str) -> str:
    return _FENCE.sub("", text)


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, spaces to dashes, punctuation dropped."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*$", _prose(markdown), re.M)
    return {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}


def _command(words: list[str]) -> tuple[click.Command, list[str], str]:
    """The CLI command the leading ``words`` name (a group's subcommand too), the words after it,
    and its name."""
    command: click.Command = main
    names = ["tracescorer"]
    while isinstance(command, click.Group) and words and not words[0].startswith(("-", "[")):
        found = command.get_command(click.Context(command), words[0])
        assert found is not None, f"{' '.join(names)} has no command {words[0]!r}"
        command, names, words = found, [*names, words[0]], words[1:]
    return command, words, " ".join(names)


def _options(command: click.Command) -> set[str]:
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)} | {"--help", "-h"}


def _shown_commands(path: Path) -> Iterator[tuple[str, str]]:
    """(the text, where) of every ``tracescorer ...`` command line shown in ``path``: in code
    blocks and in inline code."""
    text = path.read_text()
    for block in _blocks(text, "sh", "bash", ""):
        for line in block.splitlines():
            if line.startswith("tracescorer "):
                yield line, f"{path.name}: {line}"
    for span in _INLINE.findall(_prose(text)):
        if span.startswith("tracescorer "):
            yield span, f"{path.name}: `{span}`"


def test_readme_fits_on_a_page() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move detail into docs/"


def test_readme_has_a_table_of_contents_into_docs() -> None:
    linked = {target.split("#")[0] for target in _LINK.findall(README.read_text())}
    missing = [name for name in TOC if f"docs/{name}.md" not in linked]
    assert not missing, f"README.md does not link docs/ pages {missing}"


@pytest.mark.parametrize("page", [README, *sorted((REPO / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_every_relative_link_and_anchor_exists(page: Path) -> None:
    broken = []
    for target in _LINK.findall(_prose(page.read_text())):
        if "://" in target or target.startswith("mailto:"):
            continue
        file, _, anchor = target.partition("#")
        resolved = (page.parent / file).resolve() if file else page
        if not resolved.exists():
            broken.append(f"{target}: no file {resolved.relative_to(REPO)}")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved.read_text()):
            broken.append(f"{target}: no section #{anchor} in {resolved.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


@pytest.mark.parametrize("page", OPERATOR_DOCS, ids=lambda p: p.name)
def test_every_command_shown_exists_with_its_options(page: Path) -> None:
    for text, where in _shown_commands(page):
        command, rest, name = _command(text.replace("\\|", "|").split()[1:])
        unknown = sorted(set(_OPTION.findall(" ".join(rest))) - _options(command))
        assert not unknown, f"{where}: {name} has no option {unknown}"


def test_readme_command_lines_parse_as_the_cli_would() -> None:
    lines = [line for block in _blocks(README.read_text(), "sh") for line in block.splitlines()]
    parsed = 0
    for line in lines:
        words = shlex.split(line, comments=True)
        if words[:1] != ["tracescorer"]:
            continue
        words = [w for w in words if w != "&"]
        command, rest, name = _command(words[1:])
        command.make_context(name, list(rest))  # raises on an unknown option, a bad value, a missing one
        parsed += 1
    assert parsed >= 4  # the quick start's serve, ready, runs, scores at least


def test_readme_yaml_blocks_validate(tmp_path: Path) -> None:
    blocks = _blocks(README.read_text(), "yaml")
    assert blocks
    for i, block in enumerate(blocks):
        variables = set(re.findall(r"\$\{(?:env:)?(\w+)", block))
        path = tmp_path / f"block{i}.yaml"
        path.write_text(block)
        settings = load_settings(path, env=dict.fromkeys(variables, "postgresql://u@db/ts"))  # raises ConfigError
        build_bindings(settings.scorers, settings.judge)  # as check-config: prebuilt names and options


def _keys(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, bool]]:
    """Every key of a settings model as the docs write it (``store.postgres.dsn``, ``scorers[].id``)
    and whether it holds a value rather than keys of its own (the conditions of
    ``filter.attributes``, a mapping, are told in its own row)."""
    for name, field in model.model_fields.items():
        key = prefix + (field.alias or name)
        annotation = field.annotation
        nested = [annotation, *typing.get_args(annotation)]
        nested += [inner for outer in nested for inner in typing.get_args(outer)]
        models = [m for m in nested if isinstance(m, type) and issubclass(m, BaseModel)]
        if not models or typing.get_origin(annotation) is dict:
            yield key, True
            continue
        yield key, False
        yield from _keys(models[0], key + ("[]." if typing.get_origin(annotation) is list else "."))


KEYS = {key for key, _ in _keys(Settings)}
VALUES = {key for key, leaf in _keys(Settings) if leaf}


def test_readme_config_keys_and_overrides_exist() -> None:
    text = README.read_text()
    sections = set(Settings.model_fields)
    dotted = {m.split(":")[0] for m in _INLINE.findall(text) if re.fullmatch(r"[a-z_]+(\.[a-z_]+)+(:.*)?", m)}
    keys = {k for k in dotted if k.split(".")[0] in sections}
    assert len(keys) >= 5
    assert not sorted(keys - KEYS), f"README.md names keys the Settings model lacks: {sorted(keys - KEYS)}"
    overrides = dict(re.findall(r"\b(TRACESCORER_[A-Z_]+__[A-Z_]+)=([^\s`]+)", text))
    assert overrides
    load_settings(None, env=overrides)  # raises ConfigError on an unknown section or key, or a bad value


def test_configuration_reference_names_every_key_and_no_other() -> None:
    text = (REPO / "docs" / "configuration.md").read_text()
    # the first cells of the key tables: every key there is dotted (section.key)
    named = {cell for cell in re.findall(r"^\| `([^`]+)` \|", text, re.M) if "." in cell}
    missing = sorted(k for k in VALUES if f"`{k}`" not in text)
    assert not missing, f"docs/configuration.md does not describe {missing}"
    invented = sorted(named - KEYS)
    assert not invented, f"docs/configuration.md describes keys the Settings model lacks: {invented}"
