"""The subscriber daemon's settings (`PUBSUB_*` environment variables, flags), read with
`pubsub.runtime.settings.load` like every daemon's."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pubsub.kernel import registry
from pubsub.kernel.wire import DEFAULT_MAX_FRAME, MAX_PAYLOAD_BYTES
from pubsub.runtime.envnames import ENV_PREFIX
from pubsub.runtime.settings import (
    OVERLAY_FIELD,
    OverlayName,
    RuntimeSettings,
    SettingsError,
    check_local_listen,
)

#: Default largest payload a client may publish (PUBSUB_MAX_PAYLOAD_BYTES).
DEFAULT_MAX_PAYLOAD_BYTES = 64 * 1024
#: Seconds a node under load may hold its own publications' arc broadcast back to batch
#: them (`pubsub.kernel.executor.Executor`; docs/measurements/issue11.md, eighth round).
DEFAULT_SPREAD_HOLD = 0.015
#: The hold starts only after a broadcast that carried at least this many publications.
HOLD_MIN_BATCH = 8
#: Bytes of a frame reserved for everything but the payload (topic, references, key, ...).
FRAME_OVERHEAD = DEFAULT_MAX_FRAME - MAX_PAYLOAD_BYTES



class NodeSettings(BaseSettings):
    """The subscriber daemon."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    overlay: OverlayName = OVERLAY_FIELD

    data_dir: Path | None = Field(
        None,
        description="directory of the node's topics file and publication store "
        "(without it everything is kept in memory)",
    )
    flooding: bool = Field(
        True, description="spread new publications besides anti-entropy (off: anti-entropy alone)"
    )
    dissemination: Literal["tree", "flood"] | None = Field(
        None,
        description="how new publications spread: tree (the arc broadcast, n-1 messages) or "
        "flood (the paper's flooding, §4.3); unset: the overlay's default (tree where the "
        "overlay has a ring, flood on tco)",
    )
    publish_linger: float = Field(
        0.0,
        ge=0,
        le=1.0,
        description="seconds a group commit waits for more publications before it starts "
        "(0: at the end of the event-loop pass)",
    )
    spread_hold: float = Field(
        DEFAULT_SPREAD_HOLD,
        ge=0,
        le=1.0,
        description="seconds the publications issued here may wait, stored and acknowledged, to "
        "start their arc broadcast together while the node is under load (its previous "
        f"broadcast carried at least {HOLD_MIN_BATCH} of them); 0: never",
    )
    max_payload_bytes: int = Field(
        DEFAULT_MAX_PAYLOAD_BYTES,
        ge=0,
        le=MAX_PAYLOAD_BYTES,
        description="largest payload a client may publish through this node",
    )
    store_sync: Literal["full", "normal"] = Field(
        "normal",
        description="SQLite synchronous mode of the publication store: normal (a commit "
        "is one write to the store's journal, moved into SQLite about once a second; an "
        "acknowledged publication survives the node's process being killed, not a power "
        "loss or OS crash of its machine), full (it survives those too: every commit is "
        "fsynced)",
    )
    handover_timeout: float = Field(
        1.5, gt=0, description="seconds one hand-over step may take before the next attempt"
    )
    handover_attempts: int = Field(4, ge=1, description="hand-over attempts before failing")
    dedupe_window: float = Field(
        120.0,
        ge=0,
        le=86_400,
        description="seconds a message id is remembered: a publish request repeating it within "
        "the window is answered as a duplicate and not published again",
    )
    order_wait: float = Field(
        2.0,
        ge=0,
        le=60,
        description="seconds a publisher's publications may stop arriving while some of them "
        "wait for a missing predecessor; then they are stored anyway (out of order, counted)",
    )
    order_max_wait: float = Field(
        30.0,
        ge=0,
        le=600,
        description="seconds a publication waits for its publisher's previous one at most, "
        "however busy the publisher (at least order_wait)",
    )

    http_listen: str | None = Field(
        None,
        description="HOST:PORT of the node's HTTP API (pubsub.node.http); unset turns it off",
    )
    http_allow_remote: bool = Field(
        False, description="allow the HTTP API on an address that is not loopback"
    )

    @model_validator(mode="after")
    def _max_wait_covers_wait(self) -> NodeSettings:
        if self.order_max_wait < self.order_wait:
            raise ValueError(
                f"order_max_wait ({self.order_max_wait}) must be at least order_wait ({self.order_wait})"
            )
        return self

    @model_validator(mode="after")
    def _http_loopback_only(self) -> NodeSettings:
        """The HTTP API has no authentication: loopback only unless explicitly allowed."""
        if self.http_listen is not None:
            check_local_listen(
                "http_listen", self.http_listen, self.http_allow_remote,
                "the HTTP API has no authentication: anyone who reaches it can publish and "
                "change the node's topics",
            )
        return self


def dissemination_of(node: NodeSettings) -> str:
    """The dissemination the node runs: the one set, else its overlay's default
    (`Overlay.disseminations`); SettingsError, naming the allowed ones, for one the
    overlay cannot run (the arc broadcast needs a ring)."""
    allowed = registry.overlay(node.overlay).disseminations
    if node.dissemination is None:
        return allowed[0]
    if node.dissemination not in allowed:
        raise SettingsError(
            f"invalid configuration: dissemination (--dissemination, PUBSUB_DISSEMINATION): the {node.overlay} "
            f"overlay spreads publications by {' or '.join(allowed)}, not {node.dissemination} "
            "(or by anti-entropy alone: --no-flooding)"
        )
    return node.dissemination


def check_node_limits(node: NodeSettings, runtime: RuntimeSettings) -> None:
    """SettingsError unless the largest payload fits in the largest frame with room for the
    rest of a PublishNew or Delivery frame, or the overlay cannot run the dissemination."""
    dissemination_of(node)
    room = runtime.max_frame_bytes - FRAME_OVERHEAD
    if node.max_payload_bytes > room:
        raise SettingsError(
            "invalid configuration: max_payload_bytes (PUBSUB_MAX_PAYLOAD_BYTES): "
            f"{node.max_payload_bytes} does not fit in a frame of "
            f"{runtime.max_frame_bytes} bytes (PUBSUB_MAX_FRAME_BYTES); at most {max(room, 0)}"
        )
