"""The monitor config contract and the bucketed window (pure parts; the state machine and what it
sends: test_evaluator.py)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tracescorer.config import ConfigError, Settings, load_settings
from tracescorer.config.monitors import MonitorSettings, format_duration, parse_duration
from tracescorer.monitors.window import BUCKETS, Reading, Window
from tracescorer.records.monitors import Counts, Sample

ISSUE_EXAMPLE = """
scorers:
  - {id: multi-turn-judge-scorer, prebuilt: multi_turn_judge, scope: conversation, threshold: 1,
     options: {criterion: "answered"}}
monitors:
  - id: support-quality            # unique
    scorer: multi-turn-judge-*     # a scorer id or glob
    aggregate: pass_rate           # mean | pass_rate | error_rate | count
    window: 30m                    # durations like 90s, 30m, 1h, 1d
    below: 0.8                     # or above:
    min_samples: 20
    cooldown: 1h
    notify:
      - webhook: https://example.internal/hooks/quality   # generic JSON POST
      - slack: ${SLACK_WEBHOOK_URL}                        # Slack incoming-webhook format
"""


def test_the_config_shape_of_the_issue_loads(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(ISSUE_EXAMPLE)
    settings = load_settings(path, env={"SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T/B/secret"})
    [m] = settings.monitors
    assert (m.id, m.scorer, m.aggregate, m.window_s, m.comparison, m.threshold, m.min_samples, m.cooldown_s) == (
        "support-quality",
        "multi-turn-judge-*",
        "pass_rate",
        1800,
        "below",
        0.8,
        20,
        3600,
    )
    assert [n.kind for n in m.notify] == ["webhook", "slack"]
    assert m.notify[1].url.endswith("/secret")
    assert "secret" not in m.notify[1].display
    masked = settings.masked()["monitors"][0]["notify"]
    assert masked[1]["slack"] == "***" and masked[0]["webhook"] == "https://example.internal/hooks/quality"


def test_an_unset_slack_variable_is_a_clear_error(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(ISSUE_EXAMPLE)
    with pytest.raises(ConfigError, match=r"monitors\.0\.notify\.1\.slack: \$\{SLACK_WEBHOOK_URL\} is not set"):
        load_settings(path, env={})
    with pytest.raises(ConfigError, match=r"monitors\.0 \(support-quality\)\.notify\.1.*slack: the URL is empty"):
        load_settings(path, env={"SLACK_WEBHOOK_URL": ""})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"window": "30 minutes"}, "not a duration"),
        ({"window": "0s"}, "between 1s and 366d"),
        ({"below": None}, "exactly one of 'below' or 'above'"),
        ({"above": 0.5}, "exactly one of 'below' or 'above'"),
        ({"below": 80}, "fraction between 0 and 1"),
        ({"aggregate": "median"}, "aggregate"),
        ({"min_samples": 0}, "min_samples"),
        ({"cooldown": "-1h"}, "not a duration"),
        ({"colour": "red"}, "unknown key"),
        ({"notify": [{"webhook": "ftp://x/y"}]}, "expected an http"),
        ({"notify": [{"webhook": "https://a/b", "slack": "https://c/d"}]}, "exactly one of 'webhook' or 'slack'"),
        ({"scorer": "nothing-*"}, "matches no scorer binding"),
        ({"trace_url": "https://ui/{span}"}, "placeholders"),
        ({"for": "a while"}, r"monitors\.0 \(m\)\.for: 'a while' is not a duration"),
        ({"keep_firing_for": "-5s"}, r"monitors\.0 \(m\)\.keep_firing_for: .*not a duration"),
        ({"for": "400d"}, r"for '400d' must be at most 366d"),
        (
            {"repeat_interval": "500ms"},
            r"monitors\.0 \(m\)\.repeat_interval: .*must be 0s \(no reminders\) or between 1s",
        ),
        ({"recovery_threshold": 0.7}, r"recovery_threshold 0\.7 must be at or above the threshold"),
        ({"below": None, "above": 0.2, "recovery_threshold": 0.3}, r"recovery_threshold 0\.3 must be at or below"),
        ({"recovery_threshold": 1.5}, r"recovery_threshold is a fraction between 0 and 1"),
        ({"resolve_for": "1m"}, r"unknown key 'resolve_for'; did you mean 'keep_firing_for'\?"),
        ({"hysteresis": 0.05}, r"did you mean 'recovery_threshold'\?"),
        ({"pending_for": "1m"}, r"did you mean 'for'\?"),
    ],
)
def test_bad_monitors_fail_at_start_naming_the_key(tmp_path, change: dict[str, Any], message: str):
    monitor = {"id": "m", "scorer": "judge", "aggregate": "pass_rate", "window": "30m", "below": 0.8, **change}
    monitor = {k: v for k, v in monitor.items() if v is not None}
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "scorers": [{"id": "judge", "prebuilt": "includes", "options": {"text": "x"}, "threshold": 1}],
                "monitors": [monitor],
            }
        )
    )
    with pytest.raises(ConfigError, match=message):
        load_settings(path, env={})


def test_defaults_keep_existing_configs_working_and_hold_back_noise(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(ISSUE_EXAMPLE)
    [m] = load_settings(path, env={"SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T/B/x"}).monitors
    # a minute breaching before it fires (Grafana's default pending period), as long clear before it
    # resolves, the threshold itself to recover, reminders every 4h (Alertmanager's default)
    assert (m.for_s, m.keep_firing_for_s, m.recovery, m.repeat_interval_s) == (60, 60, 0.8, 4 * 3600)
    short = _monitor(window="20s")
    assert (short.for_s, short.keep_firing_for_s) == (20, 20)  # never longer than the window
    given = _monitor(**{"for": "2m", "keep_firing_for": "30s", "recovery_threshold": 0.6, "repeat_interval": "0s"})
    assert (given.for_s, given.keep_firing_for_s, given.recovery, given.repeat_interval_s) == (120, 30, 0.6, 0)
    assert _monitor(**{"for": "90s"}).keep_firing_for_s == 90  # follows for unless given
    # shown back under the keys they were given as (check-config prints this)
    dumped = given.model_dump(mode="json")
    assert dumped["for"] == "2m" and "for_" not in dumped and dumped["keep_firing_for"] == "30s"


def test_pass_rate_needs_a_threshold_and_ids_are_unique():
    scorers = [
        {"id": "a", "prebuilt": "non_empty_response"},
        {"id": "b", "prebuilt": "non_empty_response", "threshold": 1},
    ]
    m = {"scorer": "a", "aggregate": "pass_rate", "window": "1h", "below": 0.5}
    with pytest.raises(ValueError, match="pass_rate needs a 'threshold'"):
        Settings.model_validate({"scorers": scorers, "monitors": [{"id": "x", **m}]})
    with pytest.raises(ValueError, match="duplicate monitor id"):
        Settings.model_validate({"scorers": scorers, "monitors": [{"id": "x", **m, "scorer": "*"}] * 2})
    ok = Settings.model_validate({"scorers": scorers, "monitors": [{"id": "x", **m, "aggregate": "mean"}]})
    assert ok.monitors[0].matches("a") and not ok.monitors[0].matches("b")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("30m", 1800),
        ("1h", 3600),
        ("1d", 86400),
        ("1h30m", 5400),
        ("2w", 1209600),
        ("500ms", 0.5),
        (45, 45),
    ],
)
def test_durations(text: str | int, seconds: float):
    assert parse_duration(text) == seconds


def test_format_duration():
    assert [format_duration(s) for s in (90, 1800, 5400, 86400, 0.5, 0)] == [
        "1m30s",
        "30m",
        "1h30m",
        "1d",
        "0.5s",
        "0s",
    ]


def _monitor(**extra: Any) -> MonitorSettings:
    return MonitorSettings.model_validate(
        {"id": "m", "scorer": "s", "aggregate": "pass_rate", "window": "60s", "below": 0.5, "min_samples": 2, **extra}
    )


def _sample(at: float, label: str | None = "fail", *, status: str = "ok", score: float | None = 0.0) -> Sample:
    return Sample(at=at, score_id=f"id{at}", scorer_id="s", status=status, score=score, label=label)


def test_window_buckets_evict_whole_buckets_and_bound_memory():
    w = Window(_monitor())
    assert w.width_s == 60 / BUCKETS
    for i in range(10_000):  # a score every 0.05s for 500s
        w.add(_sample(1000 + i * 0.05, "pass" if i % 2 else "fail", score=float(i % 2)))
    assert len(w.buckets) <= BUCKETS + 1 and len(w.examples) <= 5
    reading = w.read(1500.0)
    assert 1199 <= reading.samples <= 1221 and reading.value == pytest.approx(0.5, abs=0.01)
    assert w.read(1561.0) == Reading(None, 0)
    assert not w.buckets and not w.examples


def test_window_aggregates():
    t = 5000.0
    samples = [
        _sample(t, "pass", score=1.0),
        _sample(t, "fail", score=0.2),
        _sample(t, None, status="error", score=None),
        _sample(t, None, status="not_scorable", score=None),
    ]

    def read(aggregate: str) -> Reading:
        w = Window(_monitor(aggregate=aggregate, below=0.5 if aggregate != "count" else 3))
        for s in samples:
            w.add(s)
        return w.read(t)

    assert read("pass_rate") == Reading(0.5, 2)
    assert read("mean") == Reading(pytest.approx(0.6), 2)
    assert read("error_rate") == Reading(0.25, 4)
    assert read("count") == Reading(4.0, 4)


def test_late_scores_land_in_their_own_bucket_in_order():
    w = Window(_monitor())
    w.add(_sample(100.0))
    w.add(_sample(130.0))
    w.add(_sample(110.0))  # late
    w.add_counts(w.bucket_of(50.0), Counts(n=1))
    assert [b for b, _ in w.buckets] == sorted(b for b, _ in w.buckets)
    assert w.read(135.0).samples == 3  # the score at 50 is out of the window already


def test_examples_follow_what_the_monitor_watches():
    mean = Window(_monitor(aggregate="mean", below=0.5))
    for score in (0.9, 0.1, 0.6, 0.2):
        mean.add(_sample(10.0 + score, None, score=score))
    assert sorted(e.score for e in mean.recent_examples(11.0)) == [0.1, 0.2]  # type: ignore[type-var]
    errors = Window(_monitor(aggregate="error_rate", below=None, above=0.1))
    errors.add(_sample(10.0, None, status="error", score=None))
    errors.add(_sample(10.5, "fail"))
    assert [e.status for e in errors.recent_examples(11.0)] == ["error"]
