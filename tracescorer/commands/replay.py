"""``tracescorer replay``: send captured OTLP request files to a daemon, in order."""

from __future__ import annotations

import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import click

from tracescorer import control
from tracescorer.commands.common import config_option, load

_TRACE_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
_LOGS_METHOD = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
_MAX_ATTEMPTS = 8


def _expand(paths: tuple[str, ...]) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            # a capture folder (requests/ and logs/ beside expected.json...): only those, traces
            # first; any other folder: every .pb/.json file below it
            roots = [d for d in (p / "requests", p / "logs") if d.is_dir()] or [p]
            found = sorted(f for root in roots for f in root.rglob("*") if f.is_file() and f.suffix in (".pb", ".json"))
            out.extend(sorted(found, key=lambda f: (_signal(f, "auto") == "logs", str(f))))
        elif p.is_file():
            out.append(p)
        else:
            raise click.BadParameter(f"{raw}: no such file or directory")
    return out


def _signal(path: Path, forced: str) -> str:
    if forced != "auto":
        return forced
    parts = [part.lower() for part in path.parts[:-1]] + [path.stem.lower()]
    return "logs" if any(part in ("logs", "log") or part.startswith("logs") for part in parts) else "traces"


class _Sender:
    def __init__(
        self, endpoint: str, protocol: str, token: str | None, insecure: bool, headers: dict[str, str] | None = None
    ) -> None:
        self.protocol = protocol
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.headers.update(headers or {})
        if protocol == "grpc":
            import grpc

            target = urlparse(endpoint).netloc if "://" in endpoint else endpoint
            secure = endpoint.startswith(("https://", "grpcs://")) and not insecure
            self._channel = (
                grpc.secure_channel(target, grpc.ssl_channel_credentials()) if secure else grpc.insecure_channel(target)
            )
            self._grpc = grpc
        else:
            self.base = endpoint.rstrip("/")

    def send(self, body: bytes, signal: str, json_body: bool) -> None:
        for attempt in range(1, _MAX_ATTEMPTS + 1):
            retry_after = self._send_once(body, signal, json_body)
            if retry_after is None:
                return
            if attempt == _MAX_ATTEMPTS:
                raise click.ClickException(f"gave up after {attempt} attempts (server kept pushing back)")
            time.sleep(min(retry_after, 30.0))

    def _send_once(self, body: bytes, signal: str, json_body: bool) -> float | None:
        if self.protocol == "grpc":
            if json_body:
                raise click.ClickException("OTLP/JSON files can only be replayed over HTTP (use an http:// endpoint)")
            call = self._channel.unary_unary(_TRACE_METHOD if signal == "traces" else _LOGS_METHOD)
            try:
                call(body, metadata=tuple((k.lower(), v) for k, v in self.headers.items()), timeout=60)
                return None
            except self._grpc.RpcError as exc:
                if exc.code() in (self._grpc.StatusCode.RESOURCE_EXHAUSTED, self._grpc.StatusCode.UNAVAILABLE):
                    return 1.0
                raise click.ClickException(f"{exc.code().name}: {exc.details()}") from None
        ctype = "application/json" if json_body else "application/x-protobuf"
        req = urllib.request.Request(
            f"{self.base}/v1/{signal}", data=body, headers={"Content-Type": ctype, **self.headers}, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                resp.read()
                return None
        except urllib.error.HTTPError as exc:
            if exc.code in (429, 502, 503, 504):
                try:
                    return float(exc.headers.get("Retry-After") or 1)
                except ValueError:
                    return 1.0
            raise click.ClickException(f"HTTP {exc.code}: {exc.read()[:300]!r}") from None
        except urllib.error.URLError as exc:
            raise click.ClickException(f"cannot reach {self.base}: {exc.reason}") from None


def _parse_headers(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{value!r}: expected KEY=VALUE", ctx=ctx, param=param)
        headers[key.strip()] = val.strip()
    return headers


@click.command()
@click.argument("paths", nargs=-1, required=True)
@config_option
@click.option(
    "--endpoint",
    default=None,
    help="http(s)://host:port for OTLP/HTTP, or grpc://host:port for OTLP/gRPC "
    "(default: the daemon of --config if it runs, else http://127.0.0.1:4318).",
)
@click.option("--protocol", type=click.Choice(["auto", "http", "grpc"]), default="auto", show_default=True)
@click.option(
    "--signal",
    "forced_signal",
    type=click.Choice(["auto", "traces", "logs"]),
    default="auto",
    show_default=True,
    help="auto: files under a logs/ folder (or named logs*) are log requests.",
)
@click.option("--token", envvar="TRACESCORER_AUTH_TOKEN", default=None, help="Bearer token for the daemon.")
@click.option("--insecure", is_flag=True, help="gRPC: plaintext even for grpcs:// endpoints.")
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="KEY=VALUE",
    callback=_parse_headers,
    help="Extra request header (gRPC: metadata), repeatable, e.g. --header x-mlflow-experiment-id=1.",
)
def replay(
    paths: tuple[str, ...],
    config_path: str | None,
    endpoint: str | None,
    protocol: str,
    forced_signal: str,
    token: str | None,
    insecure: bool,
    headers: dict[str, str],
) -> None:
    """Send captured OTLP export requests (.pb protobuf, .json OTLP/JSON) to a daemon, in file order.

    PATHS may be files or capture folders (requests/ then logs/).
    """
    files = _expand(paths)
    if endpoint is None:
        settings = load(config_path)
        info = control.read_serve_info(settings.store.path)
        endpoint = info.url if info is not None and info.url else "http://127.0.0.1:4318"
        token = token or settings.receiver.auth_token or None
    if protocol == "auto":
        protocol = "grpc" if endpoint.startswith(("grpc://", "grpcs://")) else "http"
    sender = _Sender(endpoint, protocol, token or None, insecure, headers)
    sent = {"traces": 0, "logs": 0}
    with click.progressbar(
        files,
        label=f"replaying to {endpoint}",
        file=sys.stderr,
        show_pos=True,
        item_show_func=lambda f: f.name if f else "",
    ) as bar:
        for path in bar:
            signal = _signal(path, forced_signal)
            sender.send(path.read_bytes(), signal, path.suffix == ".json")
            sent[signal] += 1
    click.echo(
        f"sent {sent['traces']} trace request(s) and {sent['logs']} log request(s) from {len(files)} file(s)"
        f" over {protocol}",
        err=True,
    )
