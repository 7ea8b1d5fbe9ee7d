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
    assert settings.api == defaults.api and settings.metrics == defaults.metrics


def test_expansion_with_defaults(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("store:\n  path: ${DATA:-/var/lib/ts}/x.duckdb\nreceiver:\n  auth_token: ${TOK}\n")
    assert load_settings(cfg, env={"TOK": ""}).store.path == "/var/lib/ts/x.duckdb"
    s = load_settings(cfg, env={"DATA": "/d", "TOK": "abc"})
    assert (s.store.path, s.receiver.auth_token) == ("/d/x.duckdb", "abc")
    explicit_empty = tmp_path / "e.yaml"
    explicit_empty.write_text("receiver:\n  auth_token: ${TOK:-}\n")
    assert load_settings(explicit_empty, env={}).receiver.auth_token == ""


def test_unset_variable_without_default_is_an_error_naming_key_and_variable(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("store:\n  path: ${TS_DATA_DIR}/ts.duckdb\n")
    with pytest.raises(ConfigError) as info:
        load_settings(cfg, env={})
    assert "store.path: ${TS_DATA_DIR} is not set" in str(info.value)


def test_partial_listener_override_keeps_that_listeners_defaults(tmp_path):
    s = load_settings(None, env={"TRACESCORER_RECEIVER__HTTP__HOST": "127.0.0.1"})
    assert (s.receiver.http.host, s.receiver.http.port) == ("127.0.0.1", 4318)
    assert (s.receiver.grpc.host, s.receiver.grpc.port) == ("0.0.0.0", 4317)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("receiver:\n  grpc: {host: 127.0.0.1}\napi: {port: 0}\n")
    s = load_settings(cfg, env={})
    assert (s.receiver.grpc.port, s.receiver.http.port, s.api.host, s.api.port) == (4317, 4318, "127.0.0.1", 0)
    assert load_settings(None, env={}).api.port == 4320


@pytest.mark.parametrize(
    "env,message",
    [
        ({"TRACESCORER_STOER__PATH": "x"}, "TRACESCORER_STOER__PATH: unknown section 'stoer'"),
        ({"TRACESCORER_STORE__PAHT": "x"}, "store.paht: unknown key (from TRACESCORER_STORE__PAHT)"),
        ({"TRACESCORER_STORE": "x"}, "TRACESCORER_STORE: 'store' is a section"),
        ({"TRACESCORER_STORE__PATH__X": "1"}, "(from TRACESCORER_STORE__PATH__X)"),
        ({"TRACESCORER_RECEIVER__HTTP__PORT": "abc"}, "receiver.http.port: Input should be a valid integer"),
        ({"TRACESCORER_RECEIVER__HTTP__PORT": "abc"}, "(got 'abc') (from TRACESCORER_RECEIVER__HTTP__PORT)"),
        (
            {"TRACESCORER_ASSEMBLY__CONVERSATION_KEYS": "[unclosed"},
            "assembly.conversation_keys: Input should be a valid list",
        ),
    ],
)
def test_bad_env_overrides_are_errors_naming_the_variable(env, message):
    with pytest.raises(ConfigError) as info:
        load_settings(None, env=env)
    assert message in str(info.value)


def test_store_path_checks(tmp_path):
    from tracescorer.config import check_store_path

    a_file = tmp_path / "plain"
    a_file.write_text("x")
    with pytest.raises(ConfigError) as info:
        check_store_path(str(a_file / "ts.duckdb"))
    assert "store.path" in str(info.value) and "which is a file, not a directory" in str(info.value)
    with pytest.raises(ConfigError, match="store.path: .* is a directory"):
        check_store_path(str(tmp_path))
    assert check_store_path(str(tmp_path / "new" / "deeper" / "ts.duckdb")) == tmp_path / "new" / "deeper"
    assert check_store_path(str(tmp_path / "ts.duckdb")) is None


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
        ("store:\n  memory_limit: 64MB\n", {}, "store.memory_limit 64MB is below 128MB"),
    ],
)
def test_errors_name_the_key(tmp_path, text, env, message):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_settings(cfg, env=env)
    assert message in str(info.value)


def test_env_overrides_nested_keys_and_ignores_expansion_variables():
    s = load_settings(
        None,
        env={
            "TRACESCORER_RECEIVER__GRPC__PORT": "5317",
            "TRACESCORER_AUTH_TOKEN": "x",
            "TRACESCORER_JUDGE_MODEL": "openai/gpt-4o-mini",
            "TRACESCORER_LOG_LEVEL": "DEBUG",
        },
    )
    assert s.receiver.grpc.port == 5317 and s.receiver.auth_token == "" and s.log_level == "DEBUG"


def test_masked_output_hides_secrets():
    s = load_settings(None, env={"TRACESCORER_RECEIVER__AUTH_TOKEN": "hunter2", "TRACESCORER_JUDGE__API_KEY": "sk-1"})
    masked = s.masked()
    assert masked["receiver"]["auth_token"] == "***" and masked["judge"]["api_key"] == "***"
    assert "hunter2" not in repr(masked)


def test_postgres_backend_needs_a_dsn_and_check_config_masks_its_password(tmp_path):
    cfg = tmp_path / "pg.yaml"
    cfg.write_text("store:\n  backend: postgres\n  postgres:\n    dsn: ${PG_DSN:-}\n")
    with pytest.raises(ConfigError, match="store.postgres.dsn"):
        load_settings(cfg, env={})
    s = load_settings(cfg, env={"PG_DSN": "postgresql://ts:s3cret@db:5432/ts"})
    assert s.store.backend == "postgres" and s.store.postgres.dsn.endswith("@db:5432/ts")
    masked = s.masked()["store"]["postgres"]["dsn"]
    assert masked == "postgresql://ts:***@db:5432/ts"
    kv = load_settings(cfg, env={"PG_DSN": "host=db user=ts password=s3cret dbname=ts"})
    assert "s3cret" not in str(kv.masked())
    assert load_settings(None, env={}).store.backend == "duckdb"
    assert load_settings(None, env={}).shutdown.grace_s == 20
    with pytest.raises(ConfigError, match="pool_min_size"):
        load_settings(None, env={"TRACESCORER_STORE__POSTGRES__POOL_MIN_SIZE": "9"})
