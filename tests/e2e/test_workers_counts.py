"""A daemon started again with worker processes after it ran without: what the last one left
unscored is scored once by the next, whichever way it finds idle conversations."""

from __future__ import annotations

from support.daemon import DaemonProcess, config_dict, wait_for

from tracescorer.demo import emit_conversations


def test_a_conversation_left_unscored_without_workers_is_scored_by_the_workers_after_a_restart(tmp_path):
    def config(workers: int, idle_s: float) -> dict:
        return config_dict(
            tmp_path,
            workers={"count": workers},
            assembly={"idle_s": 0.3, "conversation_idle_s": idle_s},
            scorers=[{"id": "conversation-check", "prebuilt": "non_empty_response", "scope": "conversation"}],
        )

    turns = [(f"Question {i}?", None, None, None, f"Answer {i}.") for i in range(2)]
    daemon = DaemonProcess(tmp_path, config(0, 3600)).start()  # never idle while it runs
    try:
        emit_conversations(daemon.grpc_endpoint, [{"id": "left", "agent": "helper", "turns": turns}])
        wait_for(lambda: len(daemon.query_json("SELECT run_id FROM runs")) == 2, 30, interval_s=0.2, what="2 runs")
    finally:
        assert daemon.stop() == 0, daemon.log()[-3000:]
    assert not daemon.query_json("SELECT id FROM scores")

    daemon = DaemonProcess(tmp_path, config(2, 0.5)).start()
    try:
        wait_for(
            lambda: daemon.query_json("SELECT conversation_id FROM scores"),
            30,
            interval_s=0.2,
            what="the conversation scored after the restart",
        )
        scores = daemon.query_json("SELECT conversation_id FROM scores")
    finally:
        assert daemon.stop() == 0, daemon.log()[-3000:]
    assert [s["conversation_id"] for s in scores] == ["left"]
