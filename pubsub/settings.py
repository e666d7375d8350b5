"""Daemon configuration: pydantic-settings models read from ``PUBSUB_*`` environment variables.

Precedence, highest first: command-line flags (passed to `load` as overrides), environment
variables (``PUBSUB_TIMEOUT_INTERVAL=0.5``, ...), then the defaults below.  Everything is
validated at start; `load` turns a validation failure into a `SettingsError` whose message
is one line naming the setting, its environment variable and what is wrong, so the CLI can
print it instead of a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pubsub.wire import DEFAULT_MAX_FRAME, MAX_PAYLOAD_BYTES

ENV_PREFIX = "PUBSUB_"
#: Default largest payload a client may publish (PUBSUB_MAX_PAYLOAD_BYTES).
DEFAULT_MAX_PAYLOAD_BYTES = 64 * 1024
#: Bytes of a frame reserved for everything but the payload (topic, references, key, ...).
FRAME_OVERHEAD = DEFAULT_MAX_FRAME - MAX_PAYLOAD_BYTES


class SettingsError(ValueError):
    """Invalid configuration; the message is a single line meant for the operator."""


class RuntimeSettings(BaseSettings):
    """The network runtime (`pubsub.net`), shared by every daemon."""

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


class SupervisorSettings(BaseSettings):
    """The supervisor daemon."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    config_budget: int = Field(1, ge=1, description="configurations sent per Timeout")
    data_dir: Path = Field(description="directory of the durable supervisor database")


class NodeSettings(BaseSettings):
    """The subscriber daemon."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    data_dir: Path | None = Field(
        None,
        description="directory of the node's topics file and publication store "
        "(without it everything is kept in memory)",
    )
    flooding: bool = Field(True, description="flood new publications (§4.3) besides anti-entropy")
    max_payload_bytes: int = Field(
        DEFAULT_MAX_PAYLOAD_BYTES,
        ge=0,
        le=MAX_PAYLOAD_BYTES,
        description="largest payload a client may publish through this node",
    )
    store_sync: Literal["full", "normal"] = Field(
        "full",
        description="SQLite synchronous mode of the publication store: full survives a "
        "machine crash, normal only a process crash",
    )
    handover_timeout: float = Field(
        1.5, gt=0, description="seconds one hand-over step may take before the next attempt"
    )
    handover_attempts: int = Field(4, ge=1, description="hand-over attempts before failing")


def check_node_limits(node: NodeSettings, runtime: RuntimeSettings) -> None:
    """SettingsError unless the largest payload fits in the largest frame with room for the
    rest of a PublishNew or Delivery frame."""
    room = runtime.max_frame_bytes - FRAME_OVERHEAD
    if node.max_payload_bytes > room:
        raise SettingsError(
            "invalid configuration: max_payload_bytes (PUBSUB_MAX_PAYLOAD_BYTES): "
            f"{node.max_payload_bytes} does not fit in a frame of "
            f"{runtime.max_frame_bytes} bytes (PUBSUB_MAX_FRAME_BYTES); at most {max(room, 0)}"
        )


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
