"""Daemon configuration shared by every mode: pydantic-settings models read from ``PUBSUB_*`` environment variables.

Precedence, highest first: command-line flags (passed to `load` as overrides), environment
variables (``PUBSUB_TIMEOUT_INTERVAL=0.5``, ...), then the defaults below.  Everything is
validated at start; `load` turns a validation failure into a `SettingsError` whose message
is one line naming the setting, its environment variable and what is wrong, so the CLI can
print it instead of a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


ENV_PREFIX = "PUBSUB_"
class SettingsError(ValueError):
    """Invalid configuration; the message is a single line meant for the operator."""


class RuntimeSettings(BaseSettings):
    """The network runtime (`pubsub.runtime.net`), shared by every daemon."""

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
        if self.admin_listen is None:
            return self
        from pubsub.kernel.wire import WireError, validate_ref

        try:
            validate_ref(self.admin_listen)
        except WireError:
            raise ValueError(
                f"admin_listen (--admin-listen / PUBSUB_ADMIN_LISTEN): {self.admin_listen!r} "
                "is not HOST:PORT"
            ) from None
        host = self.admin_listen.rpartition(":")[0]
        if not self.admin_allow_remote and not is_loopback(host):
            raise ValueError(
                f"admin_listen (--admin-listen / PUBSUB_ADMIN_LISTEN): {host} is not a "
                "loopback address; anyone who reaches the admin listener "
                "can crash or corrupt this daemon (allow it with --admin-allow-remote / "
                "PUBSUB_ADMIN_ALLOW_REMOTE=1)"
            )
        return self


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


def _one_line(exc: ValidationError, flags: Mapping[str, str]) -> str:
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
            parts.append(f"{loc} ({' / '.join(sources)}): {msg}")
        else:
            parts.append(msg)
    return "invalid configuration: " + "; ".join(parts)


def load(cls: type[S], flags: Mapping[str, str] | None = None, **overrides: Any) -> S:
    """Build `cls` from the environment, with non-None `overrides` (CLI flags) on top.

    `flags` maps setting names to the command-line flags that set them, so that the error
    message can name both ways of fixing a bad value.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return cls(**given)
    except ValidationError as exc:
        raise SettingsError(_one_line(exc, flags or {})) from None
