"""Webhook delivery against a real local HTTP server: retries, timeouts, final errors, formats."""

from __future__ import annotations

import aiohttp
import pytest
from fakes.webhook_receiver import WebhookReceiver
from support.daemon import wait_for_async

from tracescorer.config.monitors import NotifySettings
from tracescorer.monitors.messages import Example, Notification, encode, slack_body, webhook_body
from tracescorer.monitors.notify import Delivery, Dispatcher, deliver


@pytest.fixture
def receiver():
    with WebhookReceiver() as r:
        yield r


def target(url: str, **extra: object) -> NotifySettings:
    return NotifySettings.model_validate({"webhook": url, "retry_initial_s": 0.05, **extra})


def notification(**extra: object) -> Notification:
    base: dict[str, object] = {
        "monitor_id": "support-quality",
        "kind": "firing",
        "scorer": "judge-*",
        "aggregate": "pass_rate",
        "comparison": "below",
        "threshold": 0.8,
        "window": "30m",
        "window_s": 1800.0,
        "value": 0.5,
        "samples": 20,
        "min_samples": 20,
        "since": 1.7e9,
        "at": 1.7e9,
        "examples": (
            Example(
                scorer_id="judge-a",
                trace_id="ab" * 16,
                conversation_id="conv <1>",
                run_id="r1",
                agent="bot",
                score=0.0,
                label="fail",
                status="ok",
                reason="Ignored <@U123> & the <!channel> <script>alert(1)</script>",
                url="https://ui.example/trace/abab?x=1&y=2",
            ),
        ),
    }
    return Notification(**{**base, **extra})  # type: ignore[arg-type]


async def _deliver(t: NotifySettings, body: bytes = b"{}") -> Delivery:
    async with aiohttp.ClientSession() as session:
        return await deliver(session, t, body)


async def test_retries_a_failing_webhook_until_it_answers(receiver):
    receiver.fail("/hook", 2, status=503)
    result = await _deliver(target(receiver.url + "/hook", retries=3), b'{"a": 1}')
    assert result.ok and result.attempts == 3 and result.status == 200
    assert [r.status for r in receiver.at("/hook")] == [503, 503, 200]
    assert all(r.body == {"a": 1} for r in receiver.at("/hook"))
    assert receiver.at("/hook")[0].headers["Content-Type"] == "application/json"


async def test_gives_up_after_the_retries_and_reports_the_error(receiver):
    receiver.fail("/down", 10, status=500)
    result = await _deliver(target(receiver.url + "/down", retries=2))
    assert not result.ok and result.attempts == 3 and result.error == "HTTP 500"
    assert len(receiver.at("/down")) == 3


async def test_a_client_error_is_final(receiver):
    receiver.fail("/gone", 5, status=404)
    result = await _deliver(target(receiver.url + "/gone", retries=3))
    assert not result.ok and result.attempts == 1 and result.status == 404
    assert len(receiver.at("/gone")) == 1


async def test_a_hanging_endpoint_times_out_and_is_retried(receiver):
    receiver.hang("/slow", 3.0)
    result = await _deliver(target(receiver.url + "/slow", retries=1, timeout_s=0.3))
    assert result.ok and result.attempts == 2  # the first attempt was abandoned at its timeout


async def test_connection_refused_is_retried_then_reported():
    with WebhookReceiver() as gone:
        url = gone.url + "/x"
    result = await _deliver(target(url, retries=1))
    assert not result.ok and result.attempts == 2 and "Client" in (result.error or "")


async def test_extra_headers_are_sent(receiver):
    await _deliver(target(receiver.url + "/auth", headers={"Authorization": "Bearer s3cret"}))
    assert receiver.at("/auth")[0].headers["Authorization"] == "Bearer s3cret"


def test_webhook_body_names_monitor_value_window_and_examples():
    body = webhook_body(notification())
    assert body["type"] == "tracescorer.monitor" and body["version"] == 1 and body["status"] == "firing"
    assert (body["monitor"], body["value"], body["window"], body["window_seconds"]) == (
        "support-quality",
        0.5,
        "30m",
        1800,
    )
    assert body["since"].startswith("2023-11-14T22:13:20")
    [example] = body["examples"]
    assert example["trace_id"] == "ab" * 16 and example["conversation_id"] == "conv <1>"
    assert example["reason"].startswith("Ignored") and example["url"].startswith("https://ui.example/")
    assert "0.5" in body["message"] and "below 0.8" in body["message"] and "30m" in body["message"]


def test_slack_body_escapes_untrusted_text():
    body = slack_body(notification())
    text = str(body["blocks"])
    assert "<script>" not in text and "<@U123>" not in text and "<!channel>" not in text
    assert "&lt;script&gt;" in text and "&lt;!channel&gt;" in text and "conversation conv &lt;1&gt;" in text
    # the link is the one Slack link, its URL kept intact
    assert "<https://ui.example/trace/abab?x=1&y=2|trace " + "ab" * 16 + ">" in text
    assert body["text"].startswith("[FIRING] support-quality")
    resolved = slack_body(notification(kind="resolved", examples=()))
    assert resolved["text"].startswith("[RESOLVED]") and len(resolved["blocks"]) == 2


async def test_dispatcher_keeps_order_per_monitor_and_isolates_monitors(receiver):
    receiver.hang("/slow", 1.0)
    done: list[tuple[str, str, bool]] = []
    dispatcher = Dispatcher(lambda n, ds: done.append((n.monitor_id, n.kind, all(d.ok for d in ds))))
    await dispatcher.start()
    slow, fast = [target(receiver.url + "/slow")], [target(receiver.url + "/fast")]
    assert dispatcher.submit(notification(monitor_id="a"), slow)
    assert dispatcher.submit(notification(monitor_id="a", kind="resolved", examples=()), slow)
    assert dispatcher.submit(notification(monitor_id="b"), fast)
    await wait_for_async(lambda: len(done) == 3, 10, what="three notifications sent")
    assert done[0] == ("b", "firing", True)  # not held up behind monitor a's slow endpoint
    assert done[1:] == [("a", "firing", True), ("a", "resolved", True)]
    assert await dispatcher.shutdown(1) == 0
    assert not dispatcher.submit(notification(), fast)  # nothing accepted after shutdown


async def test_dispatcher_shutdown_abandons_at_the_deadline(receiver):
    receiver.hang("/stuck", 5.0)
    dispatcher = Dispatcher(lambda n, ds: None)
    await dispatcher.start()
    dispatcher.submit(notification(), [target(receiver.url + "/stuck", timeout_s=30)])
    dispatcher.submit(notification(kind="resolved"), [target(receiver.url + "/stuck", timeout_s=30)])
    assert await dispatcher.shutdown(0.3) == 2  # both abandoned at the deadline, not sent after 5 s


def test_encode_picks_the_format():
    n = notification()
    assert b'"blocks"' in encode("slack", n) and b'"type": "tracescorer.monitor"' in encode("webhook", n)
