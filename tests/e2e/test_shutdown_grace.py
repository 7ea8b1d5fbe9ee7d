"""SIGTERM with a judge that never answers: the daemon exits 0 within ``shutdown.grace_s``, the
cancelled targets are scored after the restart, nothing twice (both store backends)."""

from __future__ import annotations

import signal
import time

import pytest
from fakes.fake_openai import FakeOpenAI, Reply
from support.daemon import DaemonProcess, config_dict, wait_for

from tracescorer.demo import emit_conversations

GRACE_S = 4.0  # short, with room for the stages the grace is shared among (the store keeps a fifth)
CONVERSATIONS = [
    {"id": f"hang-{i}", "agent": "support", "turns": [(f"question {i}?", None, None, None, f"answer {i}.")]}
    for i in range(3)
]


@pytest.mark.parametrize("backend", ["duckdb", "postgres"])
def test_sigterm_with_a_hanging_judge_exits_in_grace_and_rescoring_after_restart(tmp_path, backend, request):
    with FakeOpenAI(default=Reply.hang()) as fake:
        store: dict[str, object] = {}
        workers: dict[str, object] = {}  # as deployed: worker processes stop within the grace too
        if backend == "postgres":
            store = {
                "backend": "postgres",
                "postgres": {"dsn": request.getfixturevalue("pg_dsn"), "claim_interval_s": 0.2},
            }
            workers = {"count": 0}  # the store's claims are what differs: fewer processes
        cfg = config_dict(
            tmp_path,
            store=store,
            assembly={"idle_s": 0.3, "conversation_idle_s": 0.5},
            judge={"model": "openai/gpt-4o-mini", "api_base": fake.base_url, "api_key": "k", "timeout_s": 300},
            scorers=[
                {
                    "id": "run-judge",
                    "prebuilt": "multi_turn_judge",
                    "scope": "run",
                    "options": {"criterion": "The agent answered"},
                },
                {
                    "id": "conversation-judge",
                    "prebuilt": "multi_turn_judge",
                    "scope": "conversation",
                    "options": {"criterion": "The agent answered"},
                },
                {"id": "non-empty", "prebuilt": "non_empty_response"},
            ],
            shutdown={"grace_s": GRACE_S},
            workers=workers,
        )
        daemon = DaemonProcess(tmp_path, cfg).start()
        emit_conversations(daemon.grpc_endpoint, CONVERSATIONS)
        fake.wait_for_requests(6, timeout_s=60)  # 3 run judges + 3 conversation judges, all hanging
        wait_for(
            lambda: daemon.query_json("SELECT count(*) AS n FROM scores WHERE scorer_id = 'non-empty'") == [{"n": 3}],
            30,
            what="the code scorer's rows",
        )
        started = time.monotonic()
        code = daemon.stop(signal.SIGTERM, timeout_s=GRACE_S + 30)
        took = time.monotonic() - started
        log = daemon.log()
        assert code == 0, log[-3000:]
        assert took < GRACE_S + 3, f"shutdown took {took:.1f}s (grace {GRACE_S}s)"
        assert "abandoned" in log
        assert daemon.query_json("SELECT count(*) AS n FROM scores WHERE scorer_id <> 'non-empty'") == [{"n": 0}]

        fake.script("", Reply.json({"satisfied": True, "reasoning": "answered"}))
        daemon.start()
        try:
            rows = wait_for(
                lambda: (lambda r: r if len(r) == 9 else None)(
                    daemon.query_json(
                        "SELECT scorer_id, coalesce(run_id, '') AS run_id, conversation_id, status FROM scores ORDER BY 1, 3"
                    )
                ),
                60,
                interval_s=0.2,
                what="every target scored after the restart",
            )
            assert {r["status"] for r in rows} == {"ok"}
            assert (
                sorted(r["scorer_id"] for r in rows)
                == ["conversation-judge"] * 3 + ["non-empty"] * 3 + ["run-judge"] * 3
            )
            decisions = daemon.query_json(
                "SELECT scorer_id, decision, count(*) AS n FROM scoring_decisions GROUP BY 1, 2 ORDER BY 1"
            )
            assert decisions == [
                {"scorer_id": s, "decision": "scored", "n": 3} for s in ("conversation-judge", "non-empty", "run-judge")
            ]
        finally:
            assert daemon.stop() == 0, daemon.log()[-3000:]
