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
    assert settings.segment_log == defaults.segment_log and settings.workers == defaults.workers


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
    assert (s.receiver.grpc.host, s.receiver.grpc.port) == ("127.0.0.1", 4317)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("receiver:\n  grpc: {host: 127.0.0.1}\napi: {port: 0}\n")
    s = load_settings(cfg, env={})
    assert (s.receiver.grpc.port, s.receiver.http.port, s.api.host, s.api.port) == (4317, 4318, "127.0.0.1", 0)
    assert load_settings(None, env={}).api.port == 4320


@pytest.mark.parametrize(
    "env,message",
    [
        ({"TRACESCORER_STOER__PATH": "x"}, "TRACESCORER_STOER__PATH: unknown section 'stoer'"),
        (
            {"TRACESCORER_STORE__PAHT": "x"},
            "store.paht: unknown key (did you mean 'path'?) (from TRACESCORER_STORE__PAHT)",
        ),
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
    assert s.receiver.grpc.port == 5317 and s.receiver.auth_token == "" and s.log.level == "DEBUG"


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


def test_collector_env_syntax_is_expanded_like_the_shell_form(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "store:\n  path: ${env:DATA}/a.duckdb\nreceiver:\n  auth_token: ${env:TOK:-fallback}\n"
        "judge:\n  model: ${MODEL:-openai/gpt-4o-mini}\n"
    )
    s = load_settings(cfg, env={"DATA": "/d"})
    assert (s.store.path, s.receiver.auth_token, s.judge.model) == ("/d/a.duckdb", "fallback", "openai/gpt-4o-mini")


def test_every_missing_variable_is_reported_at_once(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "store:\n  path: ${DATA_DIR}/ts.duckdb\njudge:\n  api_base: ${env:JUDGE_URL}\n"
        "receiver:\n  auth_token: ${TOKEN}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_settings(cfg, env={})
    message = str(info.value)
    for part in ("store.path: ${DATA_DIR}", "judge.api_base: ${JUDGE_URL}", "receiver.auth_token: ${TOKEN}"):
        assert part in message
    assert message.count("is not set") == 3 and "set them" in message


_SECRETS_CONFIG = """
store: {path: STORE}
judge:
  model: openai/gpt-4o-mini
  api_base: ${JUDGE_URL}
  api_key: ${env:JUDGE_KEY}
scorers:
  - {id: answered, prebuilt: non_empty_response, threshold: 1}
  - id: judged
    prebuilt: multi_turn_judge
    scope: conversation
    options: {criterion: "answers"}
    judge: {api_key: "${OTHER_KEY}"}
export:
  enabled: true
  sinks: [{phoenix: {endpoint: "${PHOENIX_URL}", api_key: "${PHOENIX_KEY}"}}]
monitors:
  - id: quality
    scorer: answered
    aggregate: pass_rate
    window: 5m
    below: 0.5
    notify: [{slack: "${SLACK_WEBHOOK_URL}"}, {webhook: "http://127.0.0.1:9/hook"}]
"""


def test_reading_leaves_out_what_only_the_daemon_uses_and_serve_still_requires_it(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(_SECRETS_CONFIG.replace("STORE", str(tmp_path / "ts.duckdb")))
    with pytest.raises(ConfigError) as info:
        load_settings(cfg, env={})
    for name in ("JUDGE_URL", "JUDGE_KEY", "OTHER_KEY", "PHOENIX_URL", "PHOENIX_KEY", "SLACK_WEBHOOK_URL"):
        assert f"${{{name}}} is not set" in str(info.value)
    s = load_settings(cfg, env={}, reading=True)
    assert [b.id for b in s.scorers] == ["answered", "judged"] and s.judge.model == "openai/gpt-4o-mini"
    assert s.judge.api_base is None and s.scorers[1].judge == {} and not s.export.enabled
    assert [n.url for n in s.monitors[0].notify] == ["http://127.0.0.1:9/hook"]
    assert {u.name for u in s.deferred} == {
        "JUDGE_URL", "JUDGE_KEY", "OTHER_KEY", "PHOENIX_URL", "PHOENIX_KEY", "SLACK_WEBHOOK_URL"
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"monitors.0.notify.0.slack: \$\{SLACK_WEBHOOK_URL\} is not set"):
        s.require_environment()
    full = {"JUDGE_URL": "http://j", "JUDGE_KEY": "k", "OTHER_KEY": "o", "PHOENIX_URL": "http://p", "PHOENIX_KEY": "pk"}
    s = load_settings(cfg, env={**full, "SLACK_WEBHOOK_URL": "https://hooks.slack.test/x"}, reading=True)
    assert not s.deferred and s.export.enabled and len(s.monitors[0].notify) == 2
    s.require_environment()


def test_reading_still_needs_what_the_read_commands_use(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("store:\n  path: ${DATA_DIR}/ts.duckdb\njudge:\n  api_key: ${KEY}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(cfg, env={}, reading=True)
    assert "store.path: ${DATA_DIR} is not set" in str(info.value) and "KEY" not in str(info.value)


@pytest.mark.parametrize(
    "text,message",
    [
        ("store:\n  pth: x\n", "store.pth: unknown key (did you mean 'path'?)"),
        ("recever:\n  grpc: {}\n", "recever: unknown key (did you mean 'receiver'?)"),
        ("receiver:\n  grpc: {hots: x}\n", "receiver.grpc.hots: unknown key (did you mean 'host'?)"),
        (
            "export:\n  sinks: [{phoenx: {endpoint: x}}]\n",
            "export.sinks.0.phoenx: unknown key (did you mean 'phoenix'?)",
        ),
        ("store:\n  zzz: 1\n", "store.zzz: unknown key (valid keys: backend, postgres, path,"),
        (
            "scorers:\n  - {id: a, prebuilt: completeness, sampling: {ratoi: 1}}\n",
            "scorers.0 (a).sampling.ratoi: unknown key (did you mean 'ratio'?)",
        ),
    ],
)
def test_unknown_keys_say_what_was_meant(tmp_path, text, message):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_settings(cfg, env={})
    assert message in str(info.value)


def test_an_unknown_section_in_a_variable_says_what_was_meant():
    with pytest.raises(ConfigError, match="unknown section 'stroe' \\(did you mean 'store'\\?\\)"):
        load_settings(None, env={"TRACESCORER_STROE__PATH": "x"})


_SCORER = "scorers:\n  - {id: answered, prebuilt: non_empty_response, threshold: 1}\n"


@pytest.mark.parametrize(
    "monitor,message",
    [
        (
            "{id: quality, scorer: answered, aggregate: mean, window: 1 hour, below: 1}",
            "monitors.0 (quality).window: '1 hour' is not a duration",
        ),
        (
            "{id: quality, scorer: nope, aggregate: mean, window: 1h, below: 1}",
            "monitors.0 (quality): scorer 'nope' matches no scorer binding (bound: answered)",
        ),
        (
            "{id: quality, scorer: answered, aggregate: mean, window: 1h}",
            "monitors.0 (quality): give exactly one of 'below' or 'above'",
        ),
        (
            "{id: quality, scorer: answered, aggregate: mean, window: 1h, below: 1, colldown: 1h}",
            "monitors.0 (quality).colldown: unknown key (did you mean 'cooldown'?)",
        ),
    ],
)
def test_monitor_errors_name_the_monitor_and_the_key(tmp_path, monitor, message):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"{_SCORER}monitors:\n  - {monitor}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(cfg, env={})
    assert message in str(info.value)
    assert "(root)" not in str(info.value) and "Value error" not in str(info.value)


@pytest.mark.parametrize(
    "level,expected", [("debug", "DEBUG"), ("Info", "INFO"), ("warn", "WARNING"), ("ERROR", "ERROR")]
)
def test_log_levels_in_any_case(tmp_path, level, expected):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"log:\n  level: {level}\n  format: JSON\n")
    s = load_settings(cfg, env={})
    assert (s.log.level, s.log.format) == (expected, "json")
    old = tmp_path / "old.yaml"
    old.write_text(f"log_level: {level}\n")  # the key's name before the log section
    assert load_settings(old, env={}).log.level == expected
    assert load_settings(old, env={"TRACESCORER_LOG_LEVEL": "error"}).log.level == "ERROR"
    assert load_settings(None, env={"TRACESCORER_LOG__LEVEL": level}).log.level == expected
    with pytest.raises(ConfigError, match="log.level"):
        load_settings(None, env={"TRACESCORER_LOG__LEVEL": "chatty"})
    with pytest.raises(ConfigError, match="log.format"):
        load_settings(None, env={"TRACESCORER_LOG__FORMAT": "xml"})
