import math

import pytest

from tracescorer.receiver.decode import DecodeError, decode_logs_json, decode_traces_json, decode_traces_protobuf


def _span_json(**fields):
    span = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "s"}
    span.update(fields)
    return ('{"resourceSpans":[{"scopeSpans":[{"spans":[%s]}]}]}' % __import__("json").dumps(span)).encode()


def test_snake_case_keys_enum_names_and_special_doubles_are_accepted():
    body = _span_json(
        kind="SPAN_KIND_PRODUCER",
        start_time_unix_nano="5",
        attributes=[
            {"key": "nan", "value": {"doubleValue": "NaN"}},
            {"key": "inf", "value": {"double_value": "-Infinity"}},
        ],
        status={"code": "STATUS_CODE_OK"},
    )
    span = decode_traces_json(body).spans[0]
    assert (span.kind, span.start_time_unix_nano, span.status_code) == ("producer", 5, "ok")
    assert math.isnan(span.attributes["nan"]) and span.attributes["inf"] == -math.inf


def test_lone_surrogates_become_replacement_characters():
    body = _span_json(name="x")
    body = body.replace(b'"name": "x"', b'"name": "a\\ud800b"')
    assert decode_traces_json(body).spans[0].name == "a\ufffdb"


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'{"resourceSpans": {}}',
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 5}]}]}]}',
        _span_json(startTimeUnixNano="soon"),
    ],
)
def test_wrong_json_types_are_decode_errors(body):
    with pytest.raises(DecodeError):
        decode_traces_json(body)


def test_zero_ids_are_rejected_and_zero_parent_means_root():
    body = _span_json(traceId="0" * 32)
    out = decode_traces_json(body)
    assert out.rejected == 1 and "all zeros" in out.errors[0]
    span = decode_traces_json(_span_json(parentSpanId="0" * 16)).spans[0]
    assert span.parent_span_id is None


def test_log_record_without_ids_is_fine_and_event_name_falls_back_to_attribute():
    body = b'{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"attributes":[{"key":"event.name","value":{"stringValue":"gen_ai.choice"}}]}]}]}]}'
    record = decode_logs_json(body).records[0]
    assert record.trace_id is None and record.name == "gen_ai.choice"


def test_garbage_protobuf_is_a_decode_error():
    with pytest.raises(DecodeError):
        decode_traces_protobuf(b"\xff\xff\xff")


def test_long_bits_objects_from_old_js_exporters():
    ns = 1_700_000_000_123_456_789
    body = _span_json(startTimeUnixNano={"low": ns & 0xFFFFFFFF, "high": ns >> 32, "unsigned": True})
    assert decode_traces_json(body).spans[0].start_time_unix_nano == ns


def test_deflate_bodies_zlib_or_raw():
    import zlib

    from tracescorer.receiver.http import inflate

    data = b"x" * 1000
    assert inflate(zlib.compress(data), 2000, "deflate") == data
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    assert inflate(raw.compress(data) + raw.flush(), 2000, "deflate") == data
    with pytest.raises(OverflowError):
        inflate(zlib.compress(data), 100, "deflate")
