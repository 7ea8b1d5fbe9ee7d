"""The log formats and the judge failure streaks, on real loggers and handlers."""

from __future__ import annotations

import io
import json
import logging

from tracescorer.logs import JsonFormatter
from tracescorer.scorers.judge_health import FailureStreaks


def _logger(name: str, formatter: logging.Formatter) -> tuple[logging.Logger, io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    logger = logging.getLogger(name)
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger, out


def test_json_lines_carry_the_exception_text() -> None:
    logger, out = _logger("tests.logs.json", JsonFormatter())
    logger.info('plain %s with "quotes"\nand a newline', "message")
    try:
        raise ValueError("broken thing")
    except ValueError:
        logger.exception("it failed: %d", 3)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2  # a newline in a message stays inside its JSON string
    first, second = map(json.loads, lines)
    assert first["message"] == 'plain message with "quotes"\nand a newline' and "exception" not in first
    assert (second["level"], second["logger"], second["message"]) == ("ERROR", "tests.logs.json", "it failed: 3")
    assert second["exception"].startswith("Traceback") and "ValueError: broken thing" in second["exception"]


class _Error(Exception):
    status_code = 503


def test_a_failure_streak_is_logged_once_reminded_and_its_end_logged() -> None:
    logger, out = _logger("tests.logs.streaks", logging.Formatter("%(levelname)s %(message)s"))
    now = [100.0]
    streaks = FailureStreaks(logger, remind_s=60, clock=lambda: now[0])
    streaks.answered("m")  # answering without a streak logs nothing
    for _ in range(5):
        streaks.failed("m", _Error("down"))
        now[0] += 10
    streaks.failed("other", TimeoutError())
    assert out.getvalue().splitlines() == [
        "WARNING judge m is failing: _Error (503): down (logged once; failures are counted until it answers again)",
        "WARNING judge other is failing: TimeoutError: no message (logged once; failures are counted until it "
        "answers again)",
    ]
    now[0] += 20  # 70 s after the first failure: one reminder
    streaks.failed("m", TimeoutError("slow"))
    streaks.failed("m", TimeoutError("slow"))
    assert (
        out.getvalue().splitlines()[-1]
        == "WARNING judge m still failing: 6 failed request(s) in 70s (_Error (503) x5, TimeoutError x1)"
    )
    assert streaks.failing("m") == 7
    now[0] += 5
    streaks.answered("m")
    streaks.answered("m")
    assert out.getvalue().splitlines()[-1] == (
        "WARNING judge m answering again after 7 failed request(s) in 75s (_Error (503) x5, TimeoutError x2)"
    )
    assert streaks.failing("m") == 0 and streaks.failing("other") == 1
    assert len(out.getvalue().splitlines()) == 4
