"""Run extraction is pinned byte for byte: every capture in tests/data/captures, and the
reference load's agent traces, must give exactly the runs of tests/data/extraction_golden.json
(in full for each capture as delivered and a few load traces; by hash for the variants: spans
reversed, one trace per call, incomplete with conversation keys, the whole load).

The serialisation keeps everything a run carries (every dataclass field in order, tuples apart
from lists, dict key order, ints apart from floats), so a change to extraction's internals that
changes any output — even the order of an attributes dict — fails here. The golden file was
written by the code before extraction was optimised; regenerate it only for an intended change
of output (``PYTHONPATH=.:tests python tests/unit/conventions/test_extraction_golden.py --write``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from support.captures import CASES, load_case

from tracescorer.conventions import Extraction, extract_runs
from tracescorer.model import LogRecord, Span
from tracescorer.receiver.decode import decode_traces_protobuf

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "data" / "extraction_golden.json"


def plain(value: Any) -> Any:
    """A JSON-ready form of ``value`` that tells apart what json.dumps would merge."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            "@" + type(value).__name__: [[f.name, plain(getattr(value, f.name))] for f in dataclasses.fields(value)]
        }
    if isinstance(value, tuple):
        return {"@tuple": [plain(v) for v in value]}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {"@dict": [[plain(k), plain(v)] for k, v in value.items()]}
    if isinstance(value, bytes):
        return {"@bytes": value.hex()}
    if isinstance(value, float):
        return {"@float": repr(value)}
    if value is None or isinstance(value, (str, bool, int)):
        return value
    return {"@" + type(value).__name__: repr(value)}


def _extraction(result: Extraction) -> Any:
    return {
        "runs": [plain(r) for r in result.runs],
        "unmatched_reason": result.unmatched_reason,
        "unmatched": plain(result.unmatched),
    }


def _load_traces() -> list[list[Span]]:
    """A few of the reference load's templates: agent traces, and a mix with plain ones."""
    sys.path.insert(0, str(ROOT / "bench" / "reference"))
    try:
        from otlp_load import build_templates
    finally:
        sys.path.remove(str(ROOT / "bench" / "reference"))
    spans = [
        s
        for t in build_templates(1, 40) + build_templates(1, 40, seed=2, mix=0.3)
        for s in decode_traces_protobuf(t.data).spans
    ]
    by_trace: dict[str, list[Span]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    return list(by_trace.values())


def snapshot() -> dict[str, Any]:
    """Every workload's extraction, in a fixed order."""
    out: dict[str, Any] = {}
    for case in CASES:
        spans, logs = load_case(case)
        out[f"capture/{case.name}"] = _extraction(extract_runs(spans, logs))
        out[f"capture/{case.name}/reversed"] = digest(_extraction(extract_runs(spans[::-1], logs[::-1])))
        out[f"capture/{case.name}/per-trace"] = digest(
            [
                _extraction(extract_runs([s for s in spans if s.trace_id == t], _logs_of(logs, t)))
                for t in dict.fromkeys(s.trace_id for s in spans)
            ]
        )
        out[f"capture/{case.name}/incomplete"] = digest(
            _extraction(extract_runs(spans, logs, incomplete=True, conversation_keys=("session.id", "thread_id")))
        )
    load = _load_traces()
    out["load"] = [_extraction(extract_runs(spans)) for spans in load[:6]]
    out["load/all"] = digest([_extraction(extract_runs(spans)) for spans in load])
    out["load/batched"] = digest(_extraction(extract_runs([s for spans in load for s in spans])))
    return out


def _logs_of(logs: list[LogRecord], trace_id: str) -> list[LogRecord]:
    return [r for r in logs if r.trace_id == trace_id]


def digest(data: Any) -> str:
    """The variants are pinned by a hash of their serialisation (the golden file stays small)."""
    return "sha256:" + hashlib.sha256(compact(data).encode()).hexdigest()


def compact(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def render(data: dict[str, Any]) -> str:
    """The golden file: compact JSON, one line per workload (a diff names it)."""
    return "{\n" + ",\n".join(f"{json.dumps(k)}: {compact(v)}" for k, v in data.items()) + "\n}\n"


def test_extraction_matches_golden() -> None:
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))
    got = json.loads(render(snapshot()))
    assert list(got) == list(want)
    for key in want:  # one workload at a time: a failure names it
        assert got[key] == want[key], key
    assert render(snapshot()) == GOLDEN.read_text(encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: test_extraction_golden.py --write  (rewrites the golden file)")
    GOLDEN.write_text(render(snapshot()), encoding="utf-8")
