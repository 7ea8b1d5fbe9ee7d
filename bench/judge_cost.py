"""What judging costs (prints figures; not a test).

1. Dollars per 1,000 runs offered to a multi-turn judge, for a realistic mix, with each way of
   paying less off and on: naive; verdict reuse; provider prompt caching; gating; batch mode
   (OpenAI only: the daemon's :class:`~tracescorer.runner.batches.Batcher` against the fake's
   Batch API, its batch rows in memory); all of them.
   The judge is the prebuilt multi-turn judge with a custom rubric of ~2,600 tokens (the
   instructions: the static prefix), over conversations of 2-8 assistant turns (90-1,400
   tokens); ``--repeats`` of the runs (default 25 %) are exact repeats of an earlier one
   (retried clients, replayed traces, canned conversations, backfills over unchanged runs);
   ``--flagged`` of them (default 35 %) fail a cheap code check, and a gated judge runs only on
   those. Each configuration runs on fresh fake providers in this process that price like the
   real ones: the tests' fake OpenAI server (automatic prefix caching of >= 1,024 tokens,
   ``prompt_tokens_details.cached_tokens``) for ``openai/gpt-4.1-mini`` and the fake Anthropic
   Messages server (``cache_control`` marks, cache reads and writes) for
   ``anthropic/claude-sonnet-4-5``; "no caching" is the same server caching nothing. Cost is
   litellm's price of each reply's usage (what the daemon stores and its budget counts); reuse
   goes through the judge's real reuse hook (:data:`tracescorer.scorers.reuse.SESSION`) with the
   verdicts kept in memory instead of the store; the gate is
   :func:`tracescorer.runner.gates.gate_refusal`. Every verdict is checked against the naive one.
2. The judge path's calls/s at concurrency 64 against bare ``litellm.acompletion`` on the same
   instant fake (``bench/scoring.py``'s measurement, the fake in a child process).

Run: ``.venv/bin/python bench/judge_cost.py [--runs 1000] [--repeats 0.25] [--flagged 0.35]``.
Bounded: about two minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scoring import fake_server, judge_throughput  # noqa: E402 - bench/ is the script's own folder

from tests.fakes import FakeOpenAI, Reply  # noqa: E402
from tests.fakes.fake_anthropic import FakeAnthropic  # noqa: E402
from tracescorer.config.scoring import GateSettings, JudgeSettings  # noqa: E402
from tracescorer.records.judge_batches import JudgeBatchRecord  # noqa: E402
from tracescorer.runner.batches import Batcher  # noqa: E402
from tracescorer.runner.gates import gate_refusal  # noqa: E402
from tracescorer.scorers import batching, reuse  # noqa: E402
from tracescorer.scorers.prebuilt import create_multi_turn_judge_scorer  # noqa: E402
from tracescorer.scorers.types import ScorerRun  # noqa: E402

CRITERION = "The assistant resolved the customer's billing question accurately and politely"
RUBRIC = "You grade customer-support conversations for a billing team.\n\n" + "\n".join(
    f"Rule {i}: a satisfying answer states the amount, the date and the next step, cites the invoice "
    f"number when one was given, never promises a refund outside the policy, and stays polite "
    f"(example {i}: 'Your invoice INV-{1000 + i} of $4{i}.00 was charged on the 3rd; the refund "
    f"reaches your card in 5 days.' satisfies; 'We will see.' does not)."
    for i in range(32)
)
WORDS = ["invoice", "charge", "refund", "card", "account", "billing", "plan", "upgrade", "payment", "date"]
WORDS += ["amount", "policy", "support", "cycle", "credit", "balance", "receipt", "tax", "renewal", "discount"]
GATE = GateSettings(scorer="quick-check", below=0.5)
MODELS = {"openai": "openai/gpt-4.1-mini", "anthropic": "anthropic/claude-sonnet-4-5"}
SATISFIED = Reply.json({"satisfied": True, "reasoning": "Amount, date and next step given politely."})
NOT_SATISFIED = Reply.json({"satisfied": False, "reasoning": "The assistant apologised without a next step."})


def conversations(n: int, repeats: float, flagged: float, seed: int = 7) -> list[tuple[str, ...]]:
    """``n`` conversations (assistant turns), ``repeats`` of them copies of an earlier one."""
    rng = random.Random(seed)
    out: list[tuple[str, ...]] = []
    for i in range(n):
        if out and rng.random() < repeats:
            out.append(out[rng.randrange(len(out))])
            continue
        turns = []
        for t in range(rng.randint(2, 8)):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 120)))
            turns.append(f"Turn {t} of conversation {i}: {words}.")
        if rng.random() < flagged:
            turns[-1] += " Sorry, I cannot help with that."
        out.append(tuple(turns))
    return out


def quick_check(turns: tuple[str, ...]) -> float:
    """The cheap code check the judge is gated on: 0 when the assistant gave up somewhere."""
    return 0.0 if any("Sorry, I cannot" in t for t in turns) else 1.0


class MemoryVerdicts:
    """The judge's reuse hook with the verdicts in memory (the daemon keeps them in its store)."""

    def __init__(self) -> None:
        self.kept: dict[str, str] = {}

    async def stored(self, key: str) -> reuse.Verdict | None:
        text = self.kept.get(key)
        return None if text is None else reuse.Verdict(text=text, origin="bench")

    async def admit(self) -> None:
        return None

    def judged(self, key: str, model: str, text: str) -> None:
        self.kept[key] = text


class MemoryBatches:
    """The batcher's two store methods, in memory."""

    def __init__(self) -> None:
        self.rows: dict[str, JudgeBatchRecord] = {}

    async def open_judge_batches(self) -> list[JudgeBatchRecord]:
        return [r for r in self.rows.values() if r.status != "closed"]

    async def put_judge_batch(self, batch: JudgeBatchRecord) -> None:
        self.rows[batch.id] = batch


async def _unused(item: object) -> None:
    raise AssertionError("the bench runs the scorers itself")


@dataclass
class Tally:
    usd: float = 0.0
    calls: int = 0
    reused: int = 0
    gated: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0


async def run_mix(
    provider: str,
    convs: list[tuple[str, ...]],
    *,
    reusing: bool,
    caching: bool,
    gating: bool,
    batch: bool,
    concurrency: int,
) -> tuple[Tally, list[float | None]]:
    """Judge ``convs`` on fresh fake providers; the cost and each conversation's score (None: gated)."""
    if provider == "openai":
        server: FakeOpenAI = FakeOpenAI(default=SATISFIED, prompt_cache=caching)
        base = server.start().base_url
    else:
        server = FakeAnthropic(default=SATISFIED, min_cache_tokens=1024 if caching else 10**9)
        base = server.start().base_url.removesuffix("/v1")
    server.script("Sorry, I cannot", NOT_SATISFIED)
    scorer = create_multi_turn_judge_scorer(
        model=MODELS[provider], criterion=CRITERION, instructions=RUBRIC, api_base=base, api_key="k", timeout=30
    )
    verdicts = MemoryVerdicts() if reusing else None
    tally, scores = Tally(), [None] * len(convs)
    gate = asyncio.Semaphore(concurrency if not batch else len(convs))  # batch waits: judge.batch.max_pending
    batcher = None
    if batch:
        settings = JudgeSettings.model_validate({"batch": {"collect_s": 0.5, "poll_s": 0.05, "max_size": 2000}})
        batcher = Batcher(MemoryBatches(), settings, _unused, max_queue=1)  # type: ignore[arg-type]
        await batcher.start()

    async def one(i: int) -> None:
        turns = convs[i]
        if gating and gate_refusal(GATE, "scored", quick_check(turns)) is not None:
            tally.gated += 1
            return
        async with gate:
            token, queued = reuse.SESSION.set(verdicts), batching.BATCH.set(batcher)
            try:
                result = await scorer.run(ScorerRun(output=tuple({"role": "assistant", "content": t} for t in turns)))
            finally:
                reuse.SESSION.reset(token)
                batching.BATCH.reset(queued)
        scores[i] = result.score
        for call in result.judge_calls:
            tally.usd += call.cost_usd or 0.0
            tally.reused += call.reused_from is not None
            tally.calls += call.reused_from is None
            tally.input_tokens += call.input_tokens or 0
            tally.cached_tokens += call.cached_tokens or 0

    try:
        await asyncio.gather(*(one(i) for i in range(len(convs))))
    finally:
        if batcher is not None:
            await batcher.stop(time.monotonic() + 5)
        server.stop()
    return tally, scores


CONFIGS = {
    "naive": {},
    "reuse": {"reusing": True},
    "caching": {"caching": True},
    "gating": {"gating": True},
    "batch": {"batch": True},
    "all on": {"reusing": True, "caching": True, "gating": True},
    "all+bat": {"reusing": True, "caching": True, "gating": True, "batch": True},
}


async def cost_table(convs: list[tuple[str, ...]], concurrency: int) -> None:
    per = 1000 / len(convs)
    for provider in MODELS:
        print(f"\n== {MODELS[provider]}: $ per 1,000 runs offered ({len(convs)} runs, concurrency {concurrency}) ==")
        naive_usd, naive_scores = 0.0, []
        for name, flags in CONFIGS.items():
            if flags.get("batch") and provider != "openai":
                print(f"{name:<8} (batch mode submits OpenAI batches only: sent live)")
                continue
            options = {"reusing": False, "caching": False, "gating": False, "batch": False, **flags}
            started = time.perf_counter()
            tally, scores = await run_mix(provider, convs, concurrency=concurrency, **options)
            if name == "naive":
                naive_usd, naive_scores = tally.usd, scores
            changed = sum(1 for s, n in zip(scores, naive_scores, strict=True) if s is not None and s != n)
            cached = tally.cached_tokens / tally.input_tokens if tally.input_tokens else 0.0
            print(
                f"{name:<8} ${tally.usd * per:8.3f}  {tally.usd / naive_usd:5.2f}x naive   requests {tally.calls:5d}"
                f"  reused {tally.reused:4d}  gated {tally.gated:4d}  input read from cache {cached:4.0%}"
                f"  verdicts changed {changed}   ({time.perf_counter() - started:4.1f} s)"
            )


def throughput(calls: int, rounds: int) -> None:
    print(f"\n== judge path vs bare litellm at concurrency 64 ({calls} calls, best of {rounds}) ==")
    with fake_server() as base_url:
        bare, ours = asyncio.run(judge_throughput(base_url, calls, 64, rounds))
    print(f"bare litellm {bare:7.1f}/s   tracescorer {ours:7.1f}/s   ratio {ours / bare:6.1%}   (target >= 90 %)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeats", type=float, default=0.25, help="share of runs repeating an earlier one")
    parser.add_argument("--flagged", type=float, default=0.35, help="share of runs the cheap check flags")
    parser.add_argument("--concurrency", type=int, default=16, help="judge calls in flight for the cost runs")
    parser.add_argument("--calls", type=int, default=400, help="calls per throughput measurement")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds (best of)")
    args = parser.parse_args()
    convs = conversations(args.runs, args.repeats, args.flagged)
    asyncio.run(cost_table(convs, args.concurrency))
    throughput(args.calls, args.rounds)


if __name__ == "__main__":
    main()
