"""Agreement statistics against an independent computation on a fixed labelled set.

The expected figures were computed outside the repository with scikit-learn 1.9.1, SciPy 1.17.1
and NumPy 2.4.6 (a scratch venv): ``cohen_kappa_score``, ``confusion_matrix``,
``precision_score``/``recall_score(pos_label="fail")``, ``accuracy_score``,
``mean_absolute_error``, ``scipy.stats.spearmanr``; the bootstrap intervals by resampling with the
same ``random.Random(7).randrange`` draws, the statistic computed by those libraries on each
resample and ``numpy.percentile`` (linear) at 2.5 and 97.5; the best threshold by trying every
observed score with ``cohen_kappa_score``: tests/data/calibration/expected_stats.py.
"""

from __future__ import annotations

import pytest

from tracescorer.calibration import stats

# (judge score, judge label, human label, human score)
SET = [
    (0.95, "pass", "pass", 0.9), (0.90, "pass", "pass", 1.0), (0.85, "pass", "fail", 0.4), (0.80, "pass", "pass", 0.8),
    (0.75, "pass", "pass", 0.7), (0.70, "pass", "fail", 0.3), (0.70, "pass", "pass", 0.9), (0.65, "pass", "pass", 0.6),
    (0.60, "pass", "fail", 0.5), (0.55, "pass", "pass", 0.7), (0.50, "pass", "fail", 0.2), (0.45, "fail", "fail", 0.3),
    (0.40, "fail", "pass", 0.6), (0.35, "fail", "fail", 0.1), (0.30, "fail", "fail", 0.2), (0.30, "fail", "fail", 0.3),
    (0.25, "fail", "pass", 0.5), (0.20, "fail", "fail", 0.0), (0.15, "fail", "fail", 0.1), (0.10, "fail", "fail", 0.0),
    (0.90, "pass", "pass", 0.8), (0.05, "fail", "fail", 0.2), (0.60, "pass", "pass", 0.6), (0.40, "fail", "fail", 0.4),
]  # fmt: skip
LABELS = [(judge, human) for _, judge, human, _ in SET]
NUMBERS = [(judge, human) for judge, _, _, human in SET]
THRESHOLD_PAIRS = [(score, human) for score, _, human, _ in SET]


def test_categorical_agreement_matches_scikit_learn():
    assert stats.accuracy(LABELS) == pytest.approx(0.75)
    assert stats.cohen_kappa(LABELS) == pytest.approx(0.503448275862069, abs=1e-12)
    # scikit-learn's confusion_matrix(human, judge, labels=[fail, pass]) == [[9, 4], [2, 9]]
    assert stats.confusion(LABELS) == {"fail": {"fail": 9, "pass": 4}, "pass": {"fail": 2, "pass": 9}}
    precision, recall = stats.precision_recall(LABELS, "fail")
    assert precision == pytest.approx(0.8181818181818182, abs=1e-12)
    assert recall == pytest.approx(0.6923076923076923, abs=1e-12)


def test_numeric_agreement_matches_scikit_learn_and_scipy():
    assert stats.mean_absolute_error(NUMBERS) == pytest.approx(0.14166666666666666, abs=1e-12)
    assert stats.spearman(NUMBERS) == pytest.approx(0.8046366329121452, abs=1e-12)  # ties: 0.70, 0.30, 0.90...
    assert stats.ranks([3.0, 1.0, 3.0, 2.0]) == [3.5, 1.0, 3.5, 2.0]


def test_bootstrap_intervals_match_an_independent_resampling_and_are_stable_under_a_seed():
    kappa = stats.bootstrap(LABELS, stats.cohen_kappa, seed=7)
    assert kappa is not None
    assert (kappa.low, kappa.high) == pytest.approx((0.16054158607350097, 0.8235294117647058), abs=1e-12)
    rho = stats.bootstrap(NUMBERS, stats.spearman, seed=7)
    assert rho is not None and (rho.low, rho.high) == pytest.approx((0.5571704905212851, 0.9117183884074893), abs=1e-12)
    mae = stats.bootstrap(NUMBERS, stats.mean_absolute_error, seed=7)
    assert mae is not None and (mae.low, mae.high) == pytest.approx(
        (0.09583333333333333, 0.19166666666666665), abs=1e-12
    )
    assert stats.bootstrap(LABELS, stats.cohen_kappa, seed=7) == kappa  # the same seed, the same interval
    other = stats.bootstrap(LABELS, stats.cohen_kappa, seed=8)
    assert other is not None and other != kappa and abs(other.low - kappa.low) < 0.1  # another seed: close


def test_the_suggested_threshold_is_the_one_that_agrees_best_by_brute_force():
    found = stats.threshold_with_interval(THRESHOLD_PAIRS, seed=7)
    assert found is not None
    assert found.value == 0.55
    assert found.kappa == pytest.approx(0.5833333333333333, abs=1e-12)
    assert found.accuracy == pytest.approx(0.7916666666666666, abs=1e-12)
    assert found.interval is not None and found.interval.low <= found.value <= found.interval.high


def test_undefined_figures_are_none_not_errors():
    assert stats.cohen_kappa([]) is None and stats.accuracy([]) is None
    assert stats.cohen_kappa([("pass", "pass")] * 3) is None  # one category only: chance agreement is 1
    assert stats.spearman([(1.0, 2.0)]) is None and stats.spearman([(1.0, 2.0), (1.0, 3.0)]) is None
    assert stats.precision_recall([("pass", "pass")], "fail") == (None, None)
    assert stats.bootstrap([("pass", "pass")], stats.cohen_kappa) is None
    assert stats.best_threshold([]) is None
