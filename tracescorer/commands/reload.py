"""``tracescorer reload``: the running daemon reads its configuration file again and applies what
a reload can (scorer bindings, monitors, export sinks, log level), or refuses the whole file,
saying why (:mod:`tracescorer.daemon.reload`); the same as ``kill -HUP <pid>``, with an answer."""

from __future__ import annotations

import click

from tracescorer.commands.common import config_option


@click.command()
@config_option
def reload(config_path: str | None) -> None:
    """Make the running daemon reload its configuration file (scorers, monitors, export, log.level).

    Exit 0 once applied; exit 1 with the reason when the file is invalid or changes a key only a
    restart applies (the daemon keeps running on its configuration).
    """
    from tracescorer import control
    from tracescorer.config import ConfigError, load_settings

    try:
        settings = load_settings(config_path, reading=True)  # where the daemon is: store.path
    except ConfigError as exc:
        raise click.ClickException(f"reload refused: {exc} (the daemon keeps its configuration)") from None
    info = control.read_serve_info(settings.store.path)
    if info is None:
        raise click.ClickException(
            f"no daemon is running for {settings.store.path} (no state file {control.serve_info_path(settings.store.path)})"
        )
    try:
        answer = control.call_daemon(info, "POST", control.RELOAD_PATH, {}, timeout_s=120.0)
    except control.RemoteQueryError as exc:  # refused (with the reason), or the daemon does not answer
        raise click.ClickException(str(exc)) from None
    changed = ", ".join(answer.get("changed", [])) or "nothing changed"
    click.echo(f"configuration reloaded (hash {answer.get('hash')}): {changed}")
