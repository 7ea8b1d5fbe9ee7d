"""Every captured case, replayed through the running daemon over its original transport with
``tracescorer replay``, gives the runs of its expected.json via ``tracescorer runs --format jsonl``.
One parametrized test over tests/data/captures: new cases need no new code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.captures import CASES, CONTRACT_KEYS, case_transport, check_parents, check_run, load_case
from support.daemon import DaemonProcess, config_dict, wait_for


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("captures")
    d = DaemonProcess(tmp, config_dict(tmp, assembly={"idle_s": 0.3})).start()
    yield d
    assert d.stop() == 0, d.log()


def _runs_cli(daemon, *args: str) -> list[dict]:
    out = daemon.cli("runs", "--format", "jsonl", *args).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_replayed_capture_gives_expected_runs(daemon, case: Path):
    expected = json.loads((case / "expected.json").read_text())
    transport = case_transport(case, expected)
    endpoint = f"grpc://{daemon.grpc_endpoint}" if transport == "grpc" else daemon.http_url
    daemon.cli("replay", str(case), "--endpoint", endpoint)
    spans, _ = load_case(case)
    trace_ids = sorted({s.trace_id for s in spans})

    def runs_of_case() -> list[dict] | None:
        got = [r for t in trace_ids for r in daemon.runs(trace_id=t)]  # polled in-process
        return got if len(got) >= len(expected["runs"]) else None

    got = wait_for(runs_of_case, 20, interval_s=0.2, what=f"{len(expected['runs'])} runs of {case.name}")
    got.sort(key=lambda r: (r["started_at"], r["run_id"]))
    assert len(got) == len(expected["runs"])
    for run, want in zip(got, expected["runs"], strict=False):
        assert list(run) == CONTRACT_KEYS
        check_run(run, want, expected)
    check_parents(got, expected)
    # Every conversation the runs belong to lists them (a nested agent may have its own).
    for conv in {want.get("conversation_id", expected.get("conversation_id")) for want in expected["runs"]} - {None}:
        by_conv = _runs_cli(daemon, "--conversation", conv)  # the real CLI
        mine = {
            run["run_id"]
            for run, want in zip(got, expected["runs"], strict=False)
            if want.get("conversation_id", expected.get("conversation_id")) == conv
        }
        assert mine <= {r["run_id"] for r in by_conv}
