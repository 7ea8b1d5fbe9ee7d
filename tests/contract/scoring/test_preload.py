"""judge.preload(): litellm and its first-use work off the event loop, without the network.

Each test runs in a fresh interpreter (litellm must not be imported yet for the measurement to
mean anything), talking to the fake OpenAI server over real HTTP.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# Records every connection / name lookup the process attempts, from the audit hooks of the
# socket module (no patching of litellm or of the socket module itself).
_AUDIT = """
import sys
ATTEMPTS = []
def _hook(event, args):
    if event == "socket.connect":
        address = args[1]
        ATTEMPTS.append(("connect", str(address[0]) if isinstance(address, tuple) else str(address)))
    elif event == "socket.getaddrinfo":
        ATTEMPTS.append(("getaddrinfo", str(args[0])))
sys.addaudithook(_hook)
def non_loopback():
    return [a for a in ATTEMPTS if a[1] not in ("127.0.0.1", "localhost", "::1")]
"""

_LAG = (
    _AUDIT
    + """
import asyncio, json, threading, time
from tests.fakes import FakeOpenAI, Reply
from tracescorer import Judge, PromptStep, ScorerRun, create_scorer
from tracescorer.scorers import judge as judge_module

async def main():
    report = {"litellm_before": "litellm" in sys.modules}
    with FakeOpenAI() as server:
        server.script("GRADE", Reply.json({"score": 0.5}))
        scorer = create_scorer(id="lag", judge=Judge(
            model="openai/fake-judge", api_base=server.base_url, api_key="sk-test", timeout=30,
        )).generate_score(PromptStep(description="s", create_prompt=lambda *, run, results: "GRADE"))
        await asyncio.to_thread(judge_module.preload)
        report["litellm_after_preload"] = "litellm" in sys.modules
        report["network_during_preload"] = non_loopback()
        gaps = []
        stop = asyncio.Event()
        async def ticker():
            last = time.perf_counter()
            while not stop.is_set():
                await asyncio.sleep(0.01)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now
        task = asyncio.create_task(ticker())
        await asyncio.sleep(0.05)
        gaps.clear()
        result = await scorer.run(ScorerRun(output="x"))
        stop.set()
        await task
        report["score"] = result.score
        report["max_gap_s"] = max(gaps) if gaps else None
        report["ticks"] = len(gaps)
        report["network_total"] = non_loopback()
        report["cost_map_env"] = __import__("os").environ.get("LITELLM_LOCAL_MODEL_COST_MAP")
    print("REPORT " + json.dumps(report))

asyncio.run(main())
"""
)


def _run(code: str, env_drop: tuple[str, ...] = ()) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in env_drop}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests")])
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("REPORT "))
    report: dict[str, object] = json.loads(line[len("REPORT ") :])
    return report


def test_first_judge_call_after_preload_does_not_stall_the_event_loop() -> None:
    # The local price map is the default: with the variable unset, nothing may be fetched.
    report = _run(_LAG, env_drop=("LITELLM_LOCAL_MODEL_COST_MAP",))
    assert report["litellm_before"] is False
    assert report["litellm_after_preload"] is True
    assert report["score"] == 0.5
    assert report["network_during_preload"] == []
    assert report["network_total"] == []
    assert report["cost_map_env"] == "True"
    assert isinstance(report["ticks"], int) and report["ticks"] > 0
    gap = report["max_gap_s"]
    # litellm's import alone takes seconds; after preload the first call must not hold the
    # loop for anything like that (a generous bound for a loaded 2-core machine)
    assert isinstance(gap, float) and gap < 1.5, report


def test_preload_is_what_imports_litellm_and_is_idempotent() -> None:
    code = (
        _AUDIT
        + """
import json, threading
import tracescorer, tracescorer.prebuilt
from tracescorer.prebuilt import create_multi_turn_judge_scorer
from tracescorer.scorers import judge
create_multi_turn_judge_scorer(model="openai/x", criterion="c")
before = "litellm" in sys.modules
threads = [threading.Thread(target=judge.preload) for _ in range(3)]
for t in threads: t.start()
for t in threads: t.join()
judge.preload()
print("REPORT " + json.dumps({"before": before, "after": "litellm" in sys.modules,
                              "jsonschema": "jsonschema" in sys.modules,
                              "phonenumbers": "phonenumbers" in sys.modules,
                              "network": non_loopback()}))
"""
    )
    report = _run(code, env_drop=("LITELLM_LOCAL_MODEL_COST_MAP",))
    assert report == {"before": False, "after": True, "jsonschema": True, "phonenumbers": True, "network": []}


def test_an_explicit_cost_map_setting_is_kept() -> None:
    code = """
import json, os
from tracescorer.scorers import judge
judge.preload()
print("REPORT " + json.dumps({"env": os.environ["LITELLM_LOCAL_MODEL_COST_MAP"]}))
"""
    env_value = "true"  # the user's own spelling: left exactly as it is
    os.environ["_TS_COST_MAP"] = env_value
    try:
        report = _run("import os; os.environ['LITELLM_LOCAL_MODEL_COST_MAP'] = os.environ['_TS_COST_MAP']\n" + code)
    finally:
        del os.environ["_TS_COST_MAP"]
    assert report == {"env": "true"}
