"""Benchmark of the scorer framework (prints figures; not a test).

1. Per-score overhead of the pipeline with function steps only (target <= 2 ms).
2. Judge calls/s through tracescorer's judge path (``scorer.run`` with a prompt step) vs bare
   ``litellm.acompletion`` against the same instant fake OpenAI server, at concurrency
   1/16/64 (target >= 90 % of bare litellm). The server runs in a child process so it does not
   compete with the client for the GIL.
3. litellm's import time and RSS, and that ``import tracescorer`` does not import it.

Run: ``.venv/bin/python bench/scoring.py [--calls 400] [--quick]``. Bounded: about a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SERVER_CODE = """
import sys
from tests.fakes import FakeOpenAI, Reply
server = FakeOpenAI(default=Reply.json({"score": 1}, usage={"prompt_tokens": 20, "completion_tokens": 5}))
server.start()
print(server.base_url, flush=True)
sys.stdin.read()
server.stop()
"""

IMPORT_CODE = """
import resource, sys, time
t = time.perf_counter()
import {module}
elapsed = time.perf_counter() - t
print(elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 'litellm' in sys.modules)
"""


def measure_import(module: str) -> tuple[float, float, bool]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_CODE.format(module=module)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=env,
    )
    seconds, rss_mb, loaded = out.stdout.split()
    return float(seconds), float(rss_mb), loaded == "True"


async def pipeline_overhead(n: int) -> tuple[float, float]:
    from tracescorer import ScorerRun, create_scorer

    def pre(*, run: Any, results: Any) -> int:
        return len(run.output)

    async def analyze(*, run: Any, results: Any) -> int:
        return int(results.preprocess_step_result) * 2

    scorer = (
        create_scorer(id="bench", description="b")
        .preprocess(pre)
        .analyze(analyze)
        .generate_score(lambda *, run, results: results.analyze_step_result / 100)
        .generate_reason(lambda *, run, results, score: f"score {score}")
    )
    run = ScorerRun(input="question", output="answer text", run_id="r")
    for _ in range(200):
        await scorer.run(run)
    started = time.perf_counter()
    for _ in range(n):
        await scorer.run(run)
    per_score = (time.perf_counter() - started) / n
    # the same four functions called directly: what the steps themselves cost
    from tracescorer.scorers.types import StepResults

    started = time.perf_counter()
    for _ in range(n):
        p = pre(run=run, results=StepResults())
        a = await analyze(run=run, results=StepResults(preprocess_step_result=p))
        s = a / 100
        f"score {s}"
    direct = (time.perf_counter() - started) / n
    return per_score, direct


async def judge_throughput(base_url: str, calls: int, concurrency: int, rounds: int) -> tuple[float, float]:
    import litellm

    from tracescorer import Judge, PromptStep, ScorerRun, create_scorer
    from tracescorer.scorers.structured import SCORE_SCHEMA, compile_schema

    litellm.suppress_debug_info = True
    opts: dict[str, Any] = {"api_base": base_url, "api_key": "sk-bench", "timeout": 30}
    scorer = create_scorer(
        id="bench-judge", judge=Judge(model="openai/bench-judge", instructions="Grade.", **opts)
    ).generate_score(PromptStep(description="s", create_prompt=lambda *, run, results: f"Grade: {run.output}"))
    response_format = compile_schema(SCORE_SCHEMA).response_format

    async def ours(i: int) -> None:
        result = await scorer.run(ScorerRun(output=f"answer {i}", run_id=str(i)))
        assert result.score == 1

    async def bare(i: int) -> None:
        resp = await litellm.acompletion(
            model="openai/bench-judge",
            messages=[{"role": "system", "content": "Grade."}, {"role": "user", "content": f"Grade: answer {i}"}],
            response_format=response_format,
            num_retries=0,
            max_retries=0,
            **opts,
        )
        assert json.loads(resp.choices[0].message.content)["score"] == 1

    async def rate(fn: Any) -> float:
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with gate:
                await fn(i)

        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(calls)))
        return calls / (time.perf_counter() - started)

    await asyncio.gather(*(bare(i) for i in range(20)))  # warm-up (connections, caches)
    await asyncio.gather(*(ours(i) for i in range(20)))

    async def settle() -> None:
        # litellm finishes each call's logging in background tasks; let them drain so one
        # measurement does not pay for the previous one's leftovers.
        for _ in range(50):
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if not pending:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)

    bare_rates, our_rates = [], []
    for i in range(rounds):  # interleaved, order alternating, best of N
        for name in ("bare", "ours") if i % 2 == 0 else ("ours", "bare"):
            await settle()
            if name == "bare":
                bare_rates.append(await rate(bare))
            else:
                our_rates.append(await rate(ours))
    return max(bare_rates), max(our_rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="judge calls per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (best of)")
    parser.add_argument("--quick", action="store_true", help="fewer calls, one round")
    args = parser.parse_args()
    calls, rounds = (100, 1) if args.quick else (args.calls, args.rounds)

    print("== imports (fresh interpreter) ==")
    for module in ("tracescorer, tracescorer.prebuilt", "litellm"):
        seconds, rss, loaded = measure_import(module)
        print(f"import {module:<34} {seconds * 1000:8.0f} ms   max RSS {rss:6.0f} MB   litellm loaded: {loaded}")

    print("\n== pipeline overhead, function steps only (4 steps) ==")
    per_score, direct = asyncio.run(pipeline_overhead(5000 if args.quick else 20000))
    print(
        f"per score: {per_score * 1e6:7.1f} us   (steps called directly: {direct * 1e6:5.1f} us; "
        f"framework overhead {(per_score - direct) * 1e6:6.1f} us; target <= 2000 us)"
    )

    print(f"\n== judge calls/s vs bare litellm.acompletion ({calls} calls, best of {rounds}) ==")
    with fake_server() as base_url:
        for concurrency in (1, 16, 64):
            bare, ours = asyncio.run(judge_throughput(base_url, calls, concurrency, rounds))
            print(
                f"concurrency {concurrency:>2}: bare litellm {bare:7.1f}/s   tracescorer "
                f"{ours:7.1f}/s   ratio {ours / bare:6.1%}   (target >= 90 %)"
            )


@contextmanager
def fake_server() -> Iterator[str]:
    """The instant fake OpenAI server in a child process (not competing for the GIL): its base URL."""
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER_CODE], cwd=ROOT, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        if not base_url.startswith("http"):
            raise RuntimeError("fake server did not start")
        yield base_url
    finally:
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
