"""What the online-scoring end-to-end tests share (tests/e2e/test_scoring_e2e.py and
test_scoring_paths_e2e.py): the conversations, the bindings, the config and the queries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakes.fake_openai import FakeOpenAI, Reply

from support.daemon import DaemonProcess, config_dict, wait_for

CRITERION = "The agent answered every question"
GOOD = {
    "id": "conv-good",
    "agent": "support-alpha",
    "turns": [
        ("Where is my order 7?", "track_order", {"order": 7}, "in transit", "Order 7 is in transit, arriving Friday."),
        ("Can I change the address?", None, None, None, "Yes, I changed the address for order 7."),
    ],
}
BAD = {
    "id": "conv-bad",
    "agent": "support-alpha",
    "turns": [
        (
            "Refund order 9 please",
            "refund",
            {"order": 9},
            "ERROR: payment provider down",
            "The refund did not go through.",
        ),
    ],
}
OUTAGE = {
    "id": "conv-outage",
    "agent": "support-alpha",
    "turns": [
        ("JUDGE_OUTAGE trigger question", None, None, None, "An answer the judge cannot grade (JUDGE_OUTAGE)."),
    ],
}
BILLING = {
    "id": "conv-billing",
    "agent": "billing-bot",
    "turns": [
        ("What is my balance?", None, None, None, "Your balance is 12 EUR."),
    ],
}
# the daemon's own process does the scoring: fewer processes (each imports litellm) where what is
# tested is the runner's decisions, not the worker processes (those run as deployed elsewhere)
NO_WORKERS = {"count": 0}


def script_judge(fake: FakeOpenAI) -> FakeOpenAI:
    """The judge's answers: satisfied, not satisfied for the failed refund, 500 for the outage."""
    fake.script("Criterion:", Reply.json({"satisfied": True, "reasoning": "all answered"}))
    fake.script("did not go through", Reply.json({"satisfied": False, "reasoning": "refund failed"}))
    fake.script("JUDGE_OUTAGE", Reply.server_error(500))
    return fake


def judge(fake: FakeOpenAI) -> dict[str, Any]:
    # retries of the outage's 500s a few milliseconds apart, not 1 s and 2 s
    return {
        "model": "openai/gpt-4o-mini",
        "api_base": fake.base_url,
        "api_key": "test-key",
        "timeout_s": 10,
        "retry_initial_s": 0.05,
    }


def bindings(extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    return [
        {"id": "non-empty", "prebuilt": "non_empty_response", "scope": "run", "threshold": 1},
        {"id": "no-tool-errors", "prebuilt": "no_tool_errors", "scope": "run", "threshold": 1},
        {
            "id": "multi-turn-judge-scorer",
            "prebuilt": "multi_turn_judge",
            "scope": "conversation",
            "options": {"criterion": CRITERION},
            "threshold": 1,
            "filter": {"agent_name": "support-*"},
        },
        {"id": "never-sampled", "prebuilt": "non_empty_response", "scope": "run", "sampling": {"ratio": 0.0}},
        *(extra or []),
    ]


def scoring_config(
    tmp_path: Path, fake: FakeOpenAI, scorers: list[dict[str, Any]], **sections: dict[str, Any]
) -> dict[str, Any]:
    judge_extra = sections.pop("judge", {})
    return config_dict(
        tmp_path,
        assembly={"idle_s": 0.3, "conversation_idle_s": 0.5},
        judge={**judge(fake), **judge_extra},
        scorers=scorers,
        **sections,
    )


def scores(daemon: DaemonProcess, where: str = "TRUE") -> list[dict[str, Any]]:
    return daemon.query_json(f"SELECT * FROM scores WHERE {where} ORDER BY scorer_id, conversation_id, run_id")


def decisions(daemon: DaemonProcess, where: str = "TRUE") -> list[dict[str, Any]]:
    return daemon.query_json(f"SELECT * FROM scoring_decisions WHERE {where} ORDER BY scorer_id, target_id")


def wait_scores(daemon: DaemonProcess, n: int, where: str = "TRUE", timeout_s: float = 30) -> list[dict[str, Any]]:
    return wait_for(
        lambda: (lambda rows: rows if len(rows) >= n else None)(scores(daemon, where)),
        timeout_s,
        interval_s=0.25,
        what=f"{n} scores where {where}",
    )
