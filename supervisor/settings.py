"""The supervisor daemon's settings (`PUBSUB_*` environment variables, flags), read with
`pubsub.runtime.settings.load` like every daemon's."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from pubsub.runtime.settings import ENV_PREFIX


class SupervisorSettings(BaseSettings):
    """The supervisor daemon."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    config_budget: int = Field(1, ge=1, description="configurations sent per Timeout")
    data_dir: Path = Field(description="directory of the durable supervisor database")
