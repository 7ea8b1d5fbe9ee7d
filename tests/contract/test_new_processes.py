"""What a new Python process sees: imports that must not load litellm, sampling decisions that do
not depend on the process (its hash seed)."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

from tracescorer.sampling import sample_value

_rng = random.Random(20261130)
TRACE_IDS = [f"{_rng.getrandbits(128):032x}" for _ in range(200)]
CONVERSATION_IDS = [str(uuid.UUID(int=_rng.getrandbits(128))) for _ in range(200)]


def test_building_llm_bindings_does_not_import_litellm() -> None:
    code = textwrap.dedent("""
        import sys
        import tracescorer.config
        assert "litellm" not in sys.modules, "config"
        from tracescorer.config import JudgeSettings, ScorerBinding
        from tracescorer.runner.bindings import build_bindings
        assert "litellm" not in sys.modules, "bindings"
        b = ScorerBinding.model_validate({"id": "m", "prebuilt": "multi_turn_judge",
                                          "options": {"criterion": "c"}})
        build_bindings([b], JudgeSettings(model="openai/gpt-4o-mini"))
        assert "litellm" not in sys.modules, "build"
    """)
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root, timeout=60)


def test_decisions_reproducible_in_a_new_process() -> None:
    ids = TRACE_IDS + CONVERSATION_IDS
    code = (
        "import sys; from tracescorer.sampling import sample_value; "
        "print('\\n'.join(repr(sample_value(l)) for l in sys.stdin.read().split()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        input="\n".join(ids),
        text=True,
        capture_output=True,
        check=True,
        timeout=60,
        env={"PYTHONHASHSEED": "12345"},
    ).stdout.split()
    assert [float(v) for v in out] == [sample_value(t) for t in ids]
