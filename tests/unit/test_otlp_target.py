"""Where the export sends OTLP/HTTP: the spec's defaults and endpoint variables
(https://opentelemetry.io/docs/specs/otel/protocol/exporter/)."""

from __future__ import annotations

from tracescorer.export.otlp_transport import resolve_target


def _url(endpoint=None, environ=None, signal="traces"):
    return resolve_target(
        signal, endpoint=endpoint, protocol="http/protobuf", headers={"x": "1"}, timeout_s=1, environ=environ or {}
    ).endpoint


def test_no_endpoint_anywhere_is_the_default_collector_with_the_signal_path():
    assert _url() == "http://localhost:4318/v1/traces"
    assert _url(signal="logs") == "http://localhost:4318/v1/logs"


def test_a_base_endpoint_gets_the_signal_path_and_the_signal_variable_is_used_as_given():
    assert _url("http://c:4318") == "http://c:4318/v1/traces"
    assert _url(environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}) == "http://c:4318/v1/traces"
    assert _url(environ={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:9/custom"}) == "http://c:9/custom"
    assert _url("http://c:4318/v1/traces") == "http://c:4318/v1/traces"
