"""The supervisor daemon's settings (`PUBSUB_*` environment variables, flags), read with
`pubsub.runtime.settings.load` like every daemon's."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pubsub.runtime.envnames import ENV_PREFIX
from pubsub.runtime.settings import OVERLAY_FIELD, OverlayName, check_local_listen


class SupervisorSettings(BaseSettings):
    """The supervisor daemon."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    overlay: OverlayName = OVERLAY_FIELD

    config_budget: int = Field(1, ge=1, description="configurations sent per Timeout")
    data_dir: Path = Field(description="directory of the durable supervisor database")
    web_listen: str | None = Field(
        None, description="HOST:PORT of the web view (`pubsub.supervisor.webview`); unset turns it off"
    )
    web_allow_remote: bool = Field(
        False, description="allow the web view on an address that is not loopback"
    )
    peers: str = Field(
        "",
        description="the other supervisors, HOST:PORT,... (sharded supervisors, "
        "`pubsub.kernel.shards`); one of them is enough, the rest is discovered",
    )
    peer_timeout: float = Field(
        3.0, gt=0, description="seconds without a beat after which a peer supervisor is dead"
    )

    def peer_refs(self) -> list[str]:
        """`peers` as a list of references."""
        return [p.strip() for p in self.peers.split(",") if p.strip()]

    @model_validator(mode="after")
    def _web_loopback_only(self) -> SupervisorSettings:
        """The web view shows every member's address and needs no login: loopback only,
        unless `web_allow_remote` says otherwise."""
        if self.web_listen is not None:
            check_local_listen(
                "web_listen", self.web_listen, self.web_allow_remote,
                "the web view shows every member's address to whoever reaches it, without a login",
            )
        return self
