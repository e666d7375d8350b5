"""The supervisor daemon's settings (`PUBSUB_*` environment variables, flags), read with
`pubsub.runtime.settings.load` like every daemon's."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pubsub.runtime.settings import ENV_PREFIX, is_loopback


class SupervisorSettings(BaseSettings):
    """The supervisor daemon."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    config_budget: int = Field(1, ge=1, description="configurations sent per Timeout")
    data_dir: Path = Field(description="directory of the durable supervisor database")
    web_listen: str | None = Field(
        None, description="HOST:PORT of the web view (`supervisor.webview`); unset turns it off"
    )
    web_allow_remote: bool = Field(
        False, description="allow the web view on an address that is not loopback"
    )

    @model_validator(mode="after")
    def _web_loopback_only(self) -> SupervisorSettings:
        """The web view shows every member's address and needs no login: loopback only,
        unless `web_allow_remote` says otherwise."""
        if self.web_listen is None:
            return self
        from pubsub.kernel.wire import WireError, validate_ref

        try:
            validate_ref(self.web_listen)
        except WireError:
            raise ValueError(
                f"web_listen (--web-listen / PUBSUB_WEB_LISTEN): {self.web_listen!r} is not HOST:PORT"
            ) from None
        host = self.web_listen.rpartition(":")[0]
        if not self.web_allow_remote and not is_loopback(host):
            raise ValueError(
                f"web_listen (--web-listen / PUBSUB_WEB_LISTEN): {host} is not a loopback "
                "address; the web view shows every member's address to whoever reaches it, "
                "without a login (allow it with --web-allow-remote / PUBSUB_WEB_ALLOW_REMOTE=1)"
            )
        return self
