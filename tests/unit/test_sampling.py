"""Deterministic, correlated sampling (tracescorer.sampling)."""

from __future__ import annotations

import hashlib
import itertools
import random
import uuid

import pytest

from tracescorer.sampling import is_sampled, sample_value

_rng = random.Random(20261130)
TRACE_IDS = [f"{_rng.getrandbits(128):032x}" for _ in range(20_000)]
CONVERSATION_IDS = [str(uuid.UUID(int=_rng.getrandbits(128))) for _ in range(20_000)]


def test_trace_id_uses_lower_64_bits_like_otel() -> None:
    high = "ffffffffffffffff"
    assert sample_value(high + "0000000000000000") == 0.0
    assert sample_value("0" * 16 + "8000000000000000") == 0.5
    assert sample_value("0" * 16 + "4000000000000000") == 0.25
    # the upper half (the part OTel's TraceIdRatioBased ignores) does not matter
    assert sample_value("0" * 16 + "0123456789abcdef") == sample_value(high + "0123456789abcdef")
    # uppercase hex is the same id
    assert sample_value("A" * 32) == sample_value("a" * 32)


def test_trace_id_matches_otel_sampler_decision() -> None:
    from opentelemetry.sdk.trace.sampling import Decision, TraceIdRatioBased

    for ratio in (0.1, 0.5, 0.9):
        sampler = TraceIdRatioBased(ratio)
        for trace_id in TRACE_IDS[:2000]:
            otel = sampler.should_sample(None, int(trace_id, 16), "x").decision
            assert is_sampled(trace_id, ratio) == (otel == Decision.RECORD_AND_SAMPLE)


def test_other_ids_use_sha256() -> None:
    target = "conv-42"
    digest = hashlib.sha256(target.encode("utf-8")).digest()[:8]
    expected = int.from_bytes(digest, "big") / 2**64
    assert sample_value(target) == pytest.approx(expected, abs=2**-52)
    assert sample_value("") == sample_value("")
    assert 0.0 <= sample_value("ünïcødé") < 1.0
    # 31 or 33 hex characters are not trace ids: hashed
    assert sample_value("a" * 31) != sample_value("a" * 32)


def test_values_stay_below_one() -> None:
    assert sample_value("0" * 16 + "f" * 16) < 1.0
    assert is_sampled("0" * 16 + "f" * 16, 1.0)
    assert all(0.0 <= sample_value(t) < 1.0 for t in TRACE_IDS[:1000] + CONVERSATION_IDS[:1000])


@pytest.mark.parametrize("ids", [TRACE_IDS, CONVERSATION_IDS], ids=["trace", "conversation"])
@pytest.mark.parametrize("ratio", [0.01, 0.1, 0.5, 0.9])
def test_ratio_accuracy(ids: list[str], ratio: float) -> None:
    sampled = sum(is_sampled(t, ratio) for t in ids)
    # binomial: 4 standard deviations, never flaky for these fixed ids
    tolerance = 4 * (len(ids) * ratio * (1 - ratio)) ** 0.5
    assert abs(sampled - ratio * len(ids)) <= tolerance


@pytest.mark.parametrize("ids", [TRACE_IDS, CONVERSATION_IDS], ids=["trace", "conversation"])
def test_edges_zero_never_one_always(ids: list[str]) -> None:
    assert not any(is_sampled(t, 0.0) for t in ids)
    assert all(is_sampled(t, 1.0) for t in ids)
    assert all(is_sampled(t, 1) for t in ids[:100])  # an int ratio from YAML


@pytest.mark.parametrize("ids", [TRACE_IDS, CONVERSATION_IDS], ids=["trace", "conversation"])
def test_smaller_ratio_samples_a_subset(ids: list[str]) -> None:
    ratios = [0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0]
    chosen = [{t for t in ids if is_sampled(t, r)} for r in ratios]
    for smaller, larger in itertools.pairwise(chosen):
        assert smaller <= larger
    assert len(chosen[2]) < len(chosen[4])  # and a strict subset in practice


@pytest.mark.parametrize("ratio", [-0.1, 1.5, float("nan")])
def test_ratio_out_of_range_is_an_error(ratio: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        is_sampled("a" * 32, ratio)
