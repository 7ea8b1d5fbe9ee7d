"""Idle connections at the open-files limit (issue 52): under a 1,024-file limit, 1,010 idle
connections (the gRPC receiver's cap nearly full of idle HTTP/2 connections, the HTTP receiver's
overfull with clients that never start their TLS handshake) do not hold a new exporter back: the
least recently active idle connections are closed for it, oldest first, and an OTel SDK export at
each receiver is acknowledged at its first attempt. Before, the HTTP export was refused until
the handshakes timed out (8.9-16 s through the SDK's retries) and the gRPC one until the idle
connections did."""

from __future__ import annotations

import asyncio
import logging
import re
import resource
import ssl
import subprocess
import urllib.request

import grpc
import pytest
from support.daemon import DaemonProcess, config_dict, wait_for_async
from support.edges import Conn, Sender, close, closed_by_peer, connect

from tracescorer.receiver.grpc_room import margin

LIMIT = 1024
IDLE = 1010
EXPORT_TIMEOUT_S = 5.0  # the SDK's whole budget, retries included: the handshakes hold for 30 s
# the client preface and an empty SETTINGS frame: an HTTP/2 connection that is set up and idle
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _limit_open_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


@pytest.fixture(scope="module")
def tls_pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    san = "subjectAltName=DNS:localhost,IP:127.0.0.1"
    args = ["-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost", "-addext", san]
    subprocess.run(["openssl", "req", *args, "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


async def _still_open(conn: Conn) -> bool:
    return not await closed_by_peer(conn, 0.3)


async def test_idle_connections_make_room_oldest_first_under_1024_open_files(tmp_path, tls_pair, monkeypatch, caplog):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 3000:
        pytest.skip(f"this test process needs ~2,000 open files (hard limit {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):  # they would override the exporter's CA file
        monkeypatch.delenv(name, raising=False)
    cert, key = tls_pair
    tls = {"cert_file": str(cert), "key_file": str(key)}
    cfg = config_dict(tmp_path, receiver={"tls": tls, "header_timeout_s": 30})
    daemon = DaemonProcess(tmp_path, cfg, preexec_fn=_limit_open_files).start()
    client_tls = ssl.create_default_context(cafile=str(cert))
    client_tls.set_alpn_protocols(["h2"])
    idle: list[Conn] = []
    try:
        caps = re.search(r"connections per receiver lowered to grpc (\d+), http (\d+)", daemon.log())
        assert caps, daemon.log()
        grpc_cap, http_cap = int(caps.group(1)), int(caps.group(2))
        http_port, grpc_port = int(daemon.http_url.rsplit(":", 1)[1]), daemon.info.grpc_port
        at_grpc = grpc_cap - margin(grpc_cap) // 2  # within the margin of the cap, none refused
        at_http = IDLE - at_grpc
        assert at_http > http_cap

        def metric(name: str, **labels: str) -> float:
            with urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10, context=client_tls) as r:
                text = r.read().decode()
            want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            found = re.search(rf"^{name}\{{{re.escape(want)}\}} (\S+)$", text, re.M)
            return float(found.group(1)) if found else 0.0

        # gRPC: set-up HTTP/2 connections with nothing in flight; HTTP: TCP connections that never
        # start their TLS handshake (the metric's first scrape above is on a connection of its own)
        grpc_idle = []
        for _ in range(at_grpc):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", grpc_port, ssl=client_tls, server_hostname="localhost"
            )
            writer.write(H2_PREFACE)
            grpc_idle.append((reader, writer))
        idle += grpc_idle
        http_idle = [await connect(http_port) for _ in range(at_http)]
        idle += http_idle
        # the gRPC receiver keeps room under its cap; the HTTP one made room as each connection came
        await wait_for_async(
            lambda: metric("tracescorer_receiver_connections_closed_total", listener="grpc", reason="evicted") > 0,
            10,
            interval_s=0.1,
            what="idle gRPC connections closed",
        )
        assert metric("tracescorer_receiver_connections_closed_total", listener="http", reason="evicted") > 0

        caplog.set_level(logging.WARNING)
        senders = [
            Sender(
                "http",
                http_url=f"https://localhost:{http_port}",
                timeout_s=EXPORT_TIMEOUT_S,
                certificate_file=str(cert),
            ),
            Sender(
                "grpc",
                grpc_endpoint=f"localhost:{grpc_port}",
                timeout_s=EXPORT_TIMEOUT_S,
                insecure=False,
                credentials=grpc.ssl_channel_credentials(cert.read_bytes()),
            ),
        ]
        for sender in senders:
            assert await asyncio.to_thread(sender.send), (sender.transport, caplog.text)
            sender.shutdown()
        assert "Transient error" not in caplog.text  # acknowledged at the first attempt, no retry

        # oldest first: at each receiver the first idle connection is closed, the last one kept
        for conns in (grpc_idle, http_idle):
            assert await closed_by_peer(conns[0], 10)
            assert await _still_open(conns[-1])
    finally:
        close(idle)
        code = daemon.stop()
    assert code == 0, daemon.log()
