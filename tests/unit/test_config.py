from pathlib import Path

import pytest

from tracescorer.config import ConfigError, load_settings

REPO = Path(__file__).resolve().parents[2]


def test_shipped_config_is_valid_and_matches_defaults():
    settings = load_settings(REPO / "config" / "tracescorer.yaml", env={})
    defaults = load_settings(None, env={})
    assert settings.receiver == defaults.receiver
    assert settings.store == defaults.store
    assert settings.assembly == defaults.assembly


def test_expansion_with_defaults(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("store:\n  path: ${DATA:-/var/lib/ts}/x.duckdb\nreceiver:\n  auth_token: ${TOK}\n")
    assert load_settings(cfg, env={}).store.path == "/var/lib/ts/x.duckdb"
    s = load_settings(cfg, env={"DATA": "/d", "TOK": "abc"})
    assert (s.store.path, s.receiver.auth_token) == ("/d/x.duckdb", "abc")


@pytest.mark.parametrize(
    "text,env,message",
    [
        ("receiver:\n  grpc:\n    prot: 1\n", {}, "receiver.grpc.prot: unknown key"),
        ("store:\n  retention_days: -1\n", {}, "store.retention_days"),
        ("nonsense: 1\n", {}, "nonsense: unknown key"),
        ("", {"TRACESCORER_RECEIVER__MAX_MESSAGE_BYTES": "lots"}, "receiver.max_message_bytes"),
        ("receiver:\n  tls:\n    cert_file: /nope.pem\n", {}, "receiver.tls"),
        ("scorers:\n  - id: a\n", {}, "scorers.0"),
        ("- a list\n", {}, "top level must be a mapping"),
        ("store: [\n", {}, "not valid YAML"),
    ],
)
def test_errors_name_the_key(tmp_path, text, env, message):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_settings(cfg, env=env)
    assert message in str(info.value)


def test_env_overrides_nested_keys_and_ignores_expansion_variables():
    s = load_settings(None, env={"TRACESCORER_RECEIVER__GRPC__PORT": "5317", "TRACESCORER_AUTH_TOKEN": "x",
                                 "TRACESCORER_JUDGE_MODEL": "openai/gpt-4o-mini", "TRACESCORER_LOG_LEVEL": "DEBUG"})
    assert s.receiver.grpc.port == 5317 and s.receiver.auth_token == "" and s.log_level == "DEBUG"


def test_masked_output_hides_secrets():
    s = load_settings(None, env={"TRACESCORER_RECEIVER__AUTH_TOKEN": "hunter2", "TRACESCORER_JUDGE__API_KEY": "sk-1"})
    masked = s.masked()
    assert masked["receiver"]["auth_token"] == "***" and masked["judge"]["api_key"] == "***"
    assert "hunter2" not in repr(masked)
