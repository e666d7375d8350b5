"""The supervisor daemon's settings (`PUBSUB_*` environment variables, flags), read with
`pubsub.runtime.settings.load` like every daemon's."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

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
    rho: float | None = Field(
        None, gt=0, description="tco and omen: Low-ODA's ρ, how much more an edge must contribute to be "
        "taken over one of lower degree (paper 001 Alg. 2; unset: 3)"
    )
    coverage: int | None = Field(
        None, ge=1, description="tco and omen: λ, how many times a node's backups cover each of its topics "
        "(paper 001 §V-G, paper 003 §4.2; unset: 3 for tco, 5 for omen)"
    )
    backup_method: Literal["primal-dual", "greedy"] | None = Field(
        None, description="tco and omen: how backups are chosen, primal-dual (Alg. 12) or greedy (Alg. 11); "
        "unset: primal-dual"
    )
    resilience: int | None = Field(
        None, ge=1, le=16, description="omen: L, the resilience factor -- churn events announced to L "
        "successors, views kept for L predecessors (paper 003 §3.3; unset: 2)"
    )
    t_wait: int | None = Field(
        None, ge=1, le=1000, description="omen: T_wait, Timeouts between two T-Man exchanges (paper 003 "
        "Alg. 3; unset: 2)"
    )
    sample_size: int | None = Field(
        None, ge=2, le=256, description="omen: the peer-sampling view's size (unset: 8)"
    )

    def overlay_options(self) -> dict[str, Any]:
        """The overlay's own settings that were given (`Overlay.supervisor_core` takes them)."""
        given = {"rho": self.rho, "coverage": self.coverage, "backup_method": self.backup_method,
                 "resilience": self.resilience, "t_wait": self.t_wait, "sample_size": self.sample_size}
        return {name: value for name, value in given.items() if value is not None}

    @model_validator(mode="after")
    def _overlay_settings_only_for_their_overlay(self) -> SupervisorSettings:
        """ρ, λ and the backup method are tco's and omen's; L, T_wait and the sample size
        omen's: refused with any other overlay."""
        given = set(self.overlay_options())
        own = {"tco": {"rho", "coverage", "backup_method"},
               "omen": {"rho", "coverage", "backup_method", "resilience", "t_wait", "sample_size"}}
        foreign = sorted(given - own.get(self.overlay, set()))
        if foreign:
            flags = ", ".join("--" + name.replace("_", "-") for name in foreign)
            whose = "omen" if set(foreign) - own["tco"] else "tco or omen"
            raise ValueError(f"{flags} set the {whose} overlay, not {self.overlay}: add --overlay {whose.split()[0]}")
        return self

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
