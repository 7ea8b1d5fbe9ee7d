"""Independent computation of the agreement figures hard-coded in tests/unit/calibration/test_stats.py.

Run it in a scratch venv outside the repository (pip install scipy scikit-learn numpy); it is not
part of the suite and tracescorer does not depend on these libraries.
"""
import random
import numpy as np
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score, confusion_matrix, precision_score, recall_score, accuracy_score, mean_absolute_error

# (judge score, judge label, human label, human score)
SET = [
    (0.95, "pass", "pass", 0.9), (0.90, "pass", "pass", 1.0), (0.85, "pass", "fail", 0.4), (0.80, "pass", "pass", 0.8),
    (0.75, "pass", "pass", 0.7), (0.70, "pass", "fail", 0.3), (0.70, "pass", "pass", 0.9), (0.65, "pass", "pass", 0.6),
    (0.60, "pass", "fail", 0.5), (0.55, "pass", "pass", 0.7), (0.50, "pass", "fail", 0.2), (0.45, "fail", "fail", 0.3),
    (0.40, "fail", "pass", 0.6), (0.35, "fail", "fail", 0.1), (0.30, "fail", "fail", 0.2), (0.30, "fail", "fail", 0.3),
    (0.25, "fail", "pass", 0.5), (0.20, "fail", "fail", 0.0), (0.15, "fail", "fail", 0.1), (0.10, "fail", "fail", 0.0),
    (0.90, "pass", "pass", 0.8), (0.05, "fail", "fail", 0.2), (0.60, "pass", "pass", 0.6), (0.40, "fail", "fail", 0.4),
]
judge = [j for _, j, _, _ in SET]
human = [h for _, _, h, _ in SET]
js = [s for s, _, _, _ in SET]
hs = [s for _, _, _, s in SET]
print("n", len(SET))
print("accuracy", accuracy_score(human, judge))
print("kappa", repr(cohen_kappa_score(judge, human)))
print("confusion rows=human [fail, pass] cols=judge", confusion_matrix(human, judge, labels=["fail", "pass"]).tolist())
print("precision(fail)", repr(precision_score(human, judge, pos_label="fail")))
print("recall(fail)", repr(recall_score(human, judge, pos_label="fail")))
print("mae", repr(mean_absolute_error(hs, js)))
print("spearman", repr(spearmanr(js, hs).statistic))

def boot(stat, pairs, seed=7, resamples=1000):
    rng = random.Random(seed)
    n = len(pairs)
    vals = []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        v = stat([pairs[i] for i in idx])
        if v is not None and not np.isnan(v):
            vals.append(v)
    return np.percentile(vals, 2.5), np.percentile(vals, 97.5), len(vals)

import warnings
warnings.filterwarnings("ignore")
def kappa(sample):
    a = [p[0] for p in sample]; b = [p[1] for p in sample]
    if len(set(a) | set(b)) < 2:
        return None
    return cohen_kappa_score(a, b)
print("kappa interval seed 7", boot(kappa, list(zip(judge, human))))
def sp(sample):
    r = spearmanr([p[0] for p in sample], [p[1] for p in sample]).statistic
    return None if np.isnan(r) else r
print("spearman interval seed 7", boot(sp, list(zip(js, hs))))
print("mae interval seed 7", boot(lambda s: mean_absolute_error([p[1] for p in s], [p[0] for p in s]), list(zip(js, hs))))

# best threshold by brute force: pass when score >= t, t among the observed scores, max kappa then accuracy, lowest t
best = None
for t in sorted(set(js)):
    v = ["pass" if s >= t else "fail" for s in js]
    k = cohen_kappa_score(v, human)
    a = accuracy_score(human, v)
    key = (k, a, -t)
    if best is None or key > best[0]:
        best = (key, t, k, a)
print("best threshold", best[1], repr(best[2]), repr(best[3]))
