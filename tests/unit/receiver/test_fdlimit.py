"""The open-files limit and the connection caps it leaves room for (issue 39)."""

from __future__ import annotations

import resource

import pytest

from tracescorer.config import ConfigError, load_settings
from tracescorer.receiver import fdlimit


def test_caps_that_fit_are_kept_else_lowered_in_proportion_keeping_a_reserve():
    assert fdlimit.share_connections({"grpc": 100, "http": 100}, 10_000) == {"grpc": 100, "http": 100}
    # 1,000 free: 125 kept back (an eighth), 875 shared
    assert fdlimit.share_connections({"grpc": 1024, "http": 1024}, 1000) == {"grpc": 437, "http": 437}
    assert fdlimit.share_connections({"grpc": 1024, "http": 1024}, 10) == {"grpc": 8, "http": 8}
    assert fdlimit.share_connections({"http": 50}, None) == {"http": 50}  # unknown room: as configured


def test_the_soft_limit_is_raised_to_the_hard_one_and_the_headroom_counted():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 256), hard))
        raised = fdlimit.raise_open_files_limit()
        assert raised is not None and raised.before == min(soft, 256)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == raised.soft
        assert raised.soft == (hard if hard != resource.RLIM_INFINITY else max(min(soft, 256), 1 << 16))
        used = fdlimit.open_files()
        assert used is not None and 0 < used < raised.soft
        room = fdlimit.headroom()
        assert room is not None and 0 < room <= raised.soft - used + 1
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize(
    "receiver, key",
    [
        ({"header_timeout_s": 0}, "header_timeout_s"),
        ({"idle_timeout_s": -1}, "idle_timeout_s"),
        ({"max_connections": 0}, "max_connections"),
        ({"min_body_bytes_per_s": 0}, "min_body_bytes_per_s"),
        ({"body_timeout_s": "soon"}, "body_timeout_s"),
        ({"header_timeout_s": 30, "idle_timeout_s": 10}, "header_timeout_s must not exceed idle_timeout_s"),
    ],
)
def test_connection_settings_are_validated(tmp_path, receiver, key):
    path = tmp_path / "c.yaml"
    path.write_text("receiver:\n" + "".join(f"  {k}: {v}\n" for k, v in receiver.items()))
    with pytest.raises(ConfigError, match=key):
        load_settings(path)
