"""Conversation grouping and idle tracking."""

from __future__ import annotations

from tracescorer.assembly import ConversationTracker, group_conversations
from tracescorer.model import AgentRun, Message


def run(rid: str, conv: str | None, start: int, text: str = "q") -> AgentRun:
    return AgentRun(
        run_id=rid,
        trace_id="t" * 32,
        span_id="s" * 16,
        parent_span_id=None,
        conversation_id=conv,
        resource_id=None,
        agent_name="a",
        agent_id=None,
        service_name=None,
        convention="genai",
        model=None,
        started_at=start,
        ended_at=start + 1,
        status="ok",
        error=None,
        input_messages=(Message(role="user", content=text),),
    )


def test_group_orders_by_start_and_dedupes_by_run_id() -> None:
    convs = group_conversations(
        [
            run("r3", "c1", 30),
            run("r1", "c1", 10),
            run("x", None, 5),
            run("r2", "c2", 20),
            run("r1", "c1", 10, "updated"),
        ]
    )
    assert [c.conversation_id for c in convs] == ["c1", "c2"]
    c1 = convs[0]
    assert [r.run_id for r in c1.runs] == ["r1", "r3"]
    assert [m.content for m in c1.input_messages] == ["updated", "q"]


class Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


def test_tracker_idle_and_upsert() -> None:
    clock = Clock()
    tr = ConversationTracker(conversation_idle_s=900, clock=clock)
    tr.add([run("r1", "c1", 1), run("n", None, 1)])
    clock.t = 600
    tr.add([run("r2", "c1", 2)])
    clock.t = 700
    tr.add([run("r9", "c2", 3)])
    clock.t = 1400
    assert tr.pop_idle() == []  # both active within 900 s
    clock.t = 1501
    (idle_c1,) = tr.pop_idle()
    assert idle_c1.conversation_id == "c1" and [r.run_id for r in idle_c1.runs] == ["r1", "r2"]
    assert tr.stats.runs_without_conversation == 1
    tr.add([run("r2", "c2", 3)])  # upsert keeps one copy per run id
    got = tr.get("c2")
    assert got is not None and len(got.runs) == 2
    assert [c.conversation_id for c in tr.pop_all()] == ["c2"] and len(tr) == 0


def test_tracker_bounded() -> None:
    tr = ConversationTracker(max_conversations=2, clock=Clock())
    tr.add([run("a", "c1", 1), run("b", "c2", 2), run("c", "c3", 3)])
    assert [c.conversation_id for c in tr.pop_idle()] == ["c1"]
    assert tr.stats.conversations_evicted == 1 and len(tr) == 2


def test_touch_tracks_activity_without_holding_runs():
    from tracescorer.assembly.conversations import ConversationTracker

    now = [0.0]
    tracker = ConversationTracker(conversation_idle_s=10, max_conversations=2, clock=lambda: now[0])
    tracker.touch(["a", "b"])
    now[0] = 5
    tracker.touch(["a"])
    now[0] = 12
    assert [c.conversation_id for c in tracker.pop_idle()] == ["b"]
    tracker.touch(["c", "d"])  # over max_conversations: the least recently active is handed out early
    assert [c.conversation_id for c in tracker.pop_idle()] == ["a"]
    assert all(c.runs == () for c in tracker.pop_all())
