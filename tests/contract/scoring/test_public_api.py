"""The public names, and that importing them does not import litellm."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_public_names_importable() -> None:
    import tracescorer
    import tracescorer.prebuilt as prebuilt
    from tracescorer import (  # noqa: F401
        Judge,
        PromptStep,
        RetryMatcher,
        ScorerRegistry,
        ScorerResult,
        ScorerRun,
        ScorerRunError,
        StreamErrorRetryProcessor,
        create_scorer,
        filter_run,
        not_scorable,
        run_evals,
    )

    assert tracescorer.__version__
    for name in tracescorer.__all__:
        assert hasattr(tracescorer, name), name
    for name in prebuilt.__all__:
        assert callable(getattr(prebuilt, name)) or name.isupper() or name[0].isupper()
    assert "create_multi_turn_judge_scorer" in prebuilt.__all__


def test_import_does_not_load_litellm() -> None:
    code = (
        "import sys, tracescorer, tracescorer.prebuilt, tracescorer.scorers, tracescorer.runner;"
        "from tracescorer.prebuilt import create_multi_turn_judge_scorer;"
        "create_multi_turn_judge_scorer(model='openai/x', criterion='c');"
        "print('litellm' in sys.modules, 'jsonschema' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", "False"], out.stderr


def test_judge_is_the_only_litellm_importer() -> None:
    import re

    pattern = re.compile(r"^\s*(import litellm|from litellm)", re.MULTILINE)
    importers = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "tracescorer").rglob("*.py")
        if pattern.search(p.read_text(encoding="utf-8"))
    )
    assert importers == ["tracescorer/scorers/judge.py"]
