"""Daemon configuration shared by every mode: pydantic-settings models read from ``PUBSUB_*`` environment variables.

Precedence, highest first: command-line flags (passed to `load` as overrides), environment
variables (``PUBSUB_TIMEOUT_INTERVAL=0.5``, ...), a configuration file (`ConfigFile`,
``--config FILE`` / ``PUBSUB_CONFIG``), then the defaults below.  Everything is validated
at start; `load` turns a validation failure into a `SettingsError` whose message is one
line naming the setting, its flag, its environment variable (and the file when the value
came from there) and what is wrong, so the CLI can print it instead of a traceback.

A configuration file is a flat mapping, YAML (``.yaml``, ``.yml``, or any other name) or
TOML (``.toml``), of setting names -- the environment variable without ``PUBSUB_``, in
lower case; ``-`` may stand for ``_`` -- to values::

    timeout_interval: 0.5          # PUBSUB_TIMEOUT_INTERVAL
    data_dir: data                 # relative paths are relative to the file's directory
    metrics_port: 9100

`ConfigFile.check` refuses keys that are no setting of the daemon at hand (one line naming
them), so a typo cannot pass silently.
"""

from __future__ import annotations

import os
import re
import tomllib
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as EnvParseError

from pubsub.kernel.registry import DEFAULT_OVERLAY, overlay_names
from pubsub.runtime.envnames import ENV_PREFIX
from pubsub.runtime.limitsettings import LimitSettings


def registered_overlay(value: str) -> str:
    """An overlay's name, if the registry has one so named (`pubsub.kernel.registry`)."""
    if value not in overlay_names():
        raise ValueError(f"no overlay {value!r}; registered: {', '.join(overlay_names())}")
    return value


#: The ``overlay`` setting of the node and supervisor daemons (``--overlay``, PUBSUB_OVERLAY).
OverlayName = Annotated[str, AfterValidator(registered_overlay)]
OVERLAY_FIELD: Any = Field(
    DEFAULT_OVERLAY,
    description="the overlay the topics' members form (pubsub.kernel.registry: skipring, clique, ...)",
)


class SettingsError(ValueError):
    """Invalid configuration; the message is a single line meant for the operator."""


class RuntimeSettings(LimitSettings):
    """The network runtime (`pubsub.runtime.net`), shared by every daemon (with the resource
    limits of `pubsub.runtime.limitsettings`)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    timeout_interval: float = Field(0.3, gt=0, description="seconds between Timeout calls")
    timer_jitter: float = Field(
        0.1, ge=0, lt=1, description="each timer period is interval * (1 +- jitter)"
    )
    max_frame_bytes: int = Field(
        1 << 20, ge=1024, le=(1 << 32) - 1, description="largest frame payload accepted or sent"
    )
    reconnect_backoff_min: float = Field(0.05, gt=0, description="first reconnect delay, s")
    reconnect_backoff_max: float = Field(2.0, gt=0, description="largest reconnect delay, s")
    unreachable_after: int = Field(
        3, ge=1, description="consecutive failed connects before a peer is reported unreachable"
    )
    send_queue_bound: int = Field(10_000, ge=1, description="frames queued per peer at most")
    connect_timeout: float = Field(2.0, gt=0, description="seconds allowed for one connect")
    hello_timeout: float = Field(
        10.0, gt=0, description="seconds an accepted connection may take to send Hello"
    )
    flush_timeout: float = Field(
        1.0, ge=0, description="seconds spent flushing queued frames on shutdown"
    )
    tls_ca: Path | None = Field(
        None, description="the cluster CA certificate (PEM); with tls_cert and tls_key turns TLS on"
    )
    tls_cert: Path | None = Field(None, description="this daemon's certificate (PEM, `pubsub certs`)")
    tls_key: Path | None = Field(None, description="the key of tls_cert (PEM)")
    insecure: bool = Field(
        False, description="allow listening on an address that is not loopback without TLS"
    )
    permissions: Path | None = Field(
        None,
        description="the permissions file (TOML, `pubsub.runtime.permissions`): what each "
        "client certificate may do; reloaded on SIGHUP; needs TLS",
    )

    @property
    def tls(self) -> bool:
        """Whether connections use TLS (all three tls_* settings are given)."""
        return self.tls_ca is not None

    @model_validator(mode="after")
    def _tls_complete(self) -> RuntimeSettings:
        given = [self.tls_ca is not None, self.tls_cert is not None, self.tls_key is not None]
        if any(given) and not all(given):
            raise ValueError(
                "tls_ca, tls_cert and tls_key (--tls-ca / --tls-cert / --tls-key, "
                "PUBSUB_TLS_CA / _CERT / _KEY) go together: give all three or none"
            )
        if self.permissions is not None and not any(given):
            raise ValueError(
                "a permissions file names certificate identities: it needs TLS "
                "(--tls-ca / --tls-cert / --tls-key)"
            )
        return self

    @model_validator(mode="after")
    def _backoff_order(self) -> RuntimeSettings:
        if self.reconnect_backoff_min > self.reconnect_backoff_max:
            raise ValueError(
                "reconnect_backoff_min must not exceed reconnect_backoff_max "
                f"({self.reconnect_backoff_min} > {self.reconnect_backoff_max})"
            )
        return self


class TelemetrySettings(BaseSettings):
    """Metrics and the event stream, shared by every daemon (`pubsub.telemetry.metrics`,
    `pubsub.telemetry.events`, docs/events.md)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    metrics_port: int = Field(
        0, ge=0, le=65535, description="port of the Prometheus endpoint; 0 turns it off"
    )
    metrics_host: str = Field(
        "127.0.0.1", min_length=1, description="address the Prometheus endpoint binds"
    )
    metrics_max_topics: int = Field(
        64,
        ge=1,
        le=10_000,
        description="topics that get their own `topic` label value; the rest are folded "
        "into topic=\"_other\"",
    )
    events_dir: Path | None = Field(
        None, description="run directory of the event stream; unset turns it off"
    )
    events_rotate_seconds: float = Field(
        2.0, gt=0, description="seconds before the current event file is moved into place"
    )
    events_rotate_bytes: int = Field(
        4 << 20, ge=1024, description="bytes after which the current event file is moved"
    )
    events_snapshot_every: int = Field(
        10, ge=1, description="Timeout intervals between periodic snapshot events"
    )
    events_retain_files: int = Field(
        0,
        ge=0,
        description="rotated event files of this daemon kept in the run directory; older "
        "ones are deleted as it rotates (0: keep all)",
    )
    events_retain_seconds: float = Field(
        0.0,
        ge=0,
        description="seconds a rotated event file of this daemon is kept; older ones are "
        "deleted as it rotates (0: keep all)",
    )


class AdminSettings(BaseSettings):
    """The admin listener of every daemon (`pubsub.runtime.admin`): where an operator's fault
    injections are accepted.  Off unless `admin_listen` is set; only on a loopback address
    unless `admin_allow_remote`."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    admin_listen: str | None = Field(
        None, description="HOST:PORT of the admin listener; unset turns it off"
    )
    admin_allow_remote: bool = Field(
        False, description="allow an admin listener on an address that is not loopback"
    )

    @model_validator(mode="after")
    def _loopback_only(self) -> AdminSettings:
        if self.admin_listen is not None:
            check_local_listen(
                "admin_listen", self.admin_listen, self.admin_allow_remote,
                "anyone who reaches the admin listener can crash or corrupt this daemon",
            )
        return self


def check_local_listen(name: str, address: str, allow_remote: bool, risk: str) -> None:
    """ValueError (one line naming the flag and the variable) unless `address` is HOST:PORT
    on a loopback host, or `allow_remote` -- for listeners without authentication: the admin
    listener, the node's HTTP API, the supervisor's web view.  `name` is the setting
    (``admin_listen``: flag --admin-listen, allowed remotely by --admin-allow-remote);
    `risk` says what a remote listener would expose."""
    from pubsub.kernel.wire import WireError, validate_ref

    where = f"{name} (--{name.replace('_', '-')} / {ENV_PREFIX}{name.upper()})"
    try:
        validate_ref(address)
    except WireError:
        raise ValueError(f"{where}: {address!r} is not HOST:PORT") from None
    host = address.rpartition(":")[0]
    if not allow_remote and not is_loopback(host):
        base = name.removesuffix("_listen")
        raise ValueError(
            f"{where}: {host} is not a loopback address; {risk} (allow it with "
            f"--{base}-allow-remote / {ENV_PREFIX}{base.upper()}_ALLOW_REMOTE=1)"
        )


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only (localhost, 127.0.0.0/8)."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


S = TypeVar("S", bound=BaseSettings)


def _one_line(
    exc: ValidationError, flags: Mapping[str, str], config: ConfigFile | None = None, from_file: Iterable[str] = ()
) -> str:
    from_file = set(from_file)
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = err.get("msg", "invalid").removeprefix("Value error, ")
        if loc:
            sources = [ENV_PREFIX + loc.upper()]
            if loc in flags:
                sources.insert(0, flags[loc])
            if err.get("type") == "missing":
                msg = "required but not set"
            elif loc in from_file and config is not None:
                sources.append(f"config file {config.path}")
                msg = f"{msg} (got {config.values[loc]!r} from {config.path.name})"
            parts.append(f"{loc} ({' / '.join(sources)}): {msg}")
        else:
            parts.append(msg)
    return "invalid configuration: " + "; ".join(parts)


# --------------------------------------------------------------------------- configuration files
def yaml_error_detail(exc: Exception) -> str:
    """What follows "FILE is not valid YAML" in a one-line error about `exc` (a
    ``yaml.YAMLError``): " (line L, column C): what is wrong", without the position when the
    error has none."""
    where = getattr(exc, "problem_mark", None)
    at = f" (line {where.line + 1}, column {where.column + 1})" if where is not None else ""
    problem = getattr(exc, "problem", None) or type(exc).__name__
    return f"{at}: {problem}"


@dataclass(frozen=True)
class ConfigFile:
    """A daemon's configuration file, read and flattened (see the module docstring)."""

    path: Path
    values: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path | str) -> ConfigFile:
        """Read `path`; SettingsError (one line) when it cannot be read or is not a flat
        mapping of names to values."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SettingsError(f"cannot read config file {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise SettingsError(f"config file {path} is not UTF-8 text") from None
        data: Any
        if path.suffix.lower() == ".toml":
            try:
                data = tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                raise SettingsError(f"config file {path} is not valid TOML: {exc}") from None
        else:
            import yaml

            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise SettingsError(f"config file {path} is not valid YAML{yaml_error_detail(exc)}") from None
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise SettingsError(
                f"config file {path} must be a mapping of setting names to values, not a "
                f"{type(data).__name__}"
            )
        values: dict[str, Any] = {}
        for key, value in data.items():
            if not isinstance(key, str):
                raise SettingsError(f"config file {path}: the key {key!r} is not a setting name")
            if isinstance(value, dict) and not _takes_mapping(key):
                raise SettingsError(
                    f"config file {path}: {key} holds a table; settings are flat (name: value)"
                )
            values[key.strip().lower().replace("-", "_")] = value
        return cls(path.absolute(), values)

    def check(self, known: Iterable[str], what: str) -> None:
        """SettingsError naming every key that is not in `known` (the settings of `what`)."""
        allowed = set(known)
        unknown = sorted(k for k in self.values if k not in allowed)
        if unknown:
            import difflib

            close = {k: difflib.get_close_matches(k, sorted(allowed), n=1) for k in unknown}
            hints = [f"{k} -> {m[0]}" for k, m in close.items() if m]
            if len(unknown) == 1 and hints:
                known = f"did you mean {close[unknown[0]][0]}?"
            elif hints:
                known = f"nearest known names: {', '.join(hints)}"
            else:
                known = f"known: {', '.join(sorted(allowed))}"
            raise SettingsError(
                f"config file {self.path}: unknown setting{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(unknown)} for {what} ({known})"
            )

    def get(self, name: str) -> Any:
        return self.values.get(name)


def _takes_mapping(key: str) -> bool:
    """Settings whose value is itself a mapping (the broker's link rates)."""
    return key.strip().lower().replace("-", "_") in {"broker_link_rates"}


def settings_names(*classes: type[BaseSettings]) -> set[str]:
    """Every setting name of `classes` (what a configuration file may hold for them)."""
    return {name for cls in classes for name in cls.model_fields}


def _env_has(name: str) -> bool:
    wanted = (ENV_PREFIX + name).upper()
    return any(key.upper() == wanted for key in os.environ)


def _is_path(annotation: Any) -> bool:
    if annotation is Path:
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_is_path(a) for a in typing.get_args(annotation))
    return False


def _from_file(cls: type[BaseSettings], config: ConfigFile) -> dict[str, Any]:
    """The file's values for the fields of `cls` that no environment variable sets, with
    relative paths taken relative to the file's directory."""
    out: dict[str, Any] = {}
    for name, info in cls.model_fields.items():
        if name not in config.values or _env_has(name):
            continue
        value = config.values[name]
        if isinstance(value, str) and value and _is_path(info.annotation) and not Path(value).is_absolute():
            value = str(config.path.parent / value)
        out[name] = value
    return out


def load(
    cls: type[S],
    flags: Mapping[str, str] | None = None,
    *,
    config: ConfigFile | None = None,
    **overrides: Any,
) -> S:
    """Build `cls` from the flags (non-None `overrides`), the environment, the configuration
    file `config` and the defaults, in that order of precedence.

    `flags` maps setting names to the command-line flags that set them, so that the error
    message can name every way of fixing a bad value.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    file_values = _from_file(cls, config) if config is not None else {}
    try:
        return cls(**(file_values | given))
    except ValidationError as exc:
        from_file = set(file_values) - set(given)
        raise SettingsError(_one_line(exc, flags or {}, config, from_file)) from None
    except EnvParseError as exc:  # a setting that takes JSON, given something else in the environment
        named = re.search(r'field "(\w+)"', str(exc))
        variable = f"{cls.model_config.get('env_prefix', '')}{named.group(1)}".upper() if named else "a variable"
        raise SettingsError(
            f"{variable} in the environment: not valid JSON (this setting takes a JSON value)"
        ) from None
