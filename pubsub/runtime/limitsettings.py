"""The resource-limit settings every daemon's runtime has (`pubsub.runtime.limits`).

They are fields of `pubsub.runtime.settings.RuntimeSettings` (which inherits them from
`LimitSettings`), so they come, like every runtime setting, from ``PUBSUB_*`` environment
variables (``PUBSUB_FRAME_DEADLINE=10``) or the ``--config`` file (``frame_deadline: 10``).
The defaults leave an honest cluster alone: a frame of the largest size has half a minute
to arrive, a client connection without a stream five minutes of silence, and the caps on
connections follow from the process's descriptor limit.  The publish quotas are off
unless set.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

#: The environment prefix of every setting (also in `pubsub.runtime.settings`, which imports this module).
_PREFIX = "PUBSUB_"


class LimitSettings(BaseSettings):
    """Deadlines, connection caps, buffer caps and publish quotas of one runtime."""

    model_config = SettingsConfigDict(env_prefix=_PREFIX, extra="ignore", frozen=True)

    frame_deadline: float = Field(
        30.0, gt=0,
        description="seconds a frame may take to arrive once its first byte is in (a "
        "connection still inside a frame after that is closed: frame_deadline)",
    )
    idle_timeout: float = Field(
        300.0, ge=0,
        description="seconds a client connection without a stream may stay silent (nothing "
        "read, nothing written) before it is closed; 0 turns it off",
    )
    max_connections: int = Field(
        0, ge=0,
        description="accepted connections held at once; 0: the descriptor limit "
        "(RLIMIT_NOFILE) minus fd_reserve",
    )
    max_connections_per_source: int = Field(
        0, ge=0,
        description="accepted connections held at once from one IP address; 0: a quarter "
        "of max_connections (at least 16)",
    )
    fd_reserve: int = Field(
        64, ge=8,
        description="descriptors never given to accepted connections (store, logs, metrics, "
        "the connections this daemon opens to its supervisor and peers)",
    )
    conn_buffer_bytes: int = Field(
        256 * 1024, ge=4096,
        description="bytes of an unfinished frame one connection may hold by itself; beyond "
        "that it draws on inflight_bytes",
    )
    inflight_bytes: int = Field(
        32 * 1024 * 1024, ge=0,
        description="bytes of unfinished frames beyond conn_buffer_bytes all connections "
        "together may hold; a connection that needs more is closed (buffer_limit)",
    )
    publish_rate: float = Field(
        0.0, ge=0,
        description="publications per second one client (certificate name, else IP address) "
        "may make, averaged over publish_burst; 0: no limit",
    )
    publish_burst: float = Field(
        0.0, ge=0,
        description="publications a client may make at once before publish_rate applies; "
        "0: one second's worth (at least 1)",
    )
    publish_bytes_rate: float = Field(
        0.0, ge=0,
        description="payload bytes per second one client may publish (a burst of one "
        "second's worth, at least one largest publication); 0: no limit",
    )
    publish_max_bytes: int = Field(
        0, ge=0,
        description="largest payload of one publication; 0: only max_frame_bytes limits it",
    )
