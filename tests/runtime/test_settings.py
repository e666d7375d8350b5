"""Settings: flags > environment > configuration file > defaults (`pubsub.runtime.settings`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pubsub.runtime.settings import ConfigFile, RuntimeSettings, SettingsError, TelemetrySettings, load


def test_precedence_flag_environment_file_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "d.yaml"
    path.write_text("timeout_interval: 0.7\nunreachable_after: 9\n")
    config = ConfigFile.read(path)
    monkeypatch.delenv("PUBSUB_TIMEOUT_INTERVAL", raising=False)
    monkeypatch.delenv("PUBSUB_UNREACHABLE_AFTER", raising=False)
    assert load(RuntimeSettings).timeout_interval == 0.3  # default
    assert load(RuntimeSettings, config=config).timeout_interval == 0.7  # file
    monkeypatch.setenv("pubsub_timeout_interval", "0.9")  # any case, like pydantic-settings
    got = load(RuntimeSettings, config=config)
    assert (got.timeout_interval, got.unreachable_after) == (0.9, 9)  # environment beats file
    assert load(RuntimeSettings, config=config, timeout_interval=1.1).timeout_interval == 1.1  # flag


def test_toml_relative_paths_and_hyphens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PUBSUB_EVENTS_DIR", raising=False)
    path = tmp_path / "conf" / "d.toml"
    path.parent.mkdir()
    path.write_text('events-dir = "run/events"\nevents_retain_files = 5\n')
    got = load(TelemetrySettings, config=ConfigFile.read(path))
    assert got.events_dir == tmp_path / "conf" / "run" / "events"
    assert got.events_retain_files == 5


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ("a = [1", ".toml", "is not valid TOML"),
        ("x: {y: 1}\n", ".yaml", "x holds a table; settings are flat"),
        ("1: 2\n", ".yaml", "the key 1 is not a setting name"),
        ("just text\n", ".yml", "must be a mapping"),
    ],
)
def test_unusable_files_are_one_line_errors(tmp_path: Path, content: str, suffix: str, message: str) -> None:
    path = tmp_path / f"d{suffix}"
    path.write_text(content)
    with pytest.raises(SettingsError, match=message) as err:
        ConfigFile.read(path)
    assert "\n" not in str(err.value)


def test_unknown_keys_and_bad_values_name_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PUBSUB_METRICS_PORT", raising=False)
    path = tmp_path / "d.yaml"
    path.write_text("metrics_port: 70000\nmetrics_prot: 1\n")
    config = ConfigFile.read(path)
    with pytest.raises(SettingsError, match=r"unknown setting metrics_prot for a node \(did you mean metrics_port\?\)"):
        config.check(["metrics_port"], "a node")
    path.write_text("metrics_prot: 1\ntimeout_intervall: 2\n")
    with pytest.raises(SettingsError, match=r"\(nearest known names: metrics_prot -> metrics_port, timeout_intervall -> timeout_interval\)"):
        ConfigFile.read(path).check(["metrics_port", "timeout_interval"], "a node")
    with pytest.raises(SettingsError, match=r"metrics_port \(--metrics-port / PUBSUB_METRICS_PORT / config file .*d\.yaml\): .*got 70000"):
        load(TelemetrySettings, {"metrics_port": "--metrics-port"}, config=config)
    with pytest.raises(SettingsError, match="cannot read config file"):
        ConfigFile.read(tmp_path / "missing.yaml")
