"""The broker daemon's settings: `BrokerSettings` (flags, then ``PUBSUB_BROKER_*`` variables,
then defaults), the ``--link-rate x,i=R`` form, and the checks of the settings against the
topology file (`check_against_topology`).

Its one job is deciding whether a broker's configuration is acceptable, with one-line errors,
before anything starts (`broker.cli` loads the settings, `broker.app` runs with them).  The
routing settings are the paper's (002): OctopiA (§6-§9) with static scotSPR or dynamic scotIDR
routing, or the PADRES-style baseline (§10) with static TID-S or dynamic TID-D routing; tau
and t_w are the congestion threshold and the Link Status Table window of §9.2 (Eq. 3).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from broker.cores.corebase import DEFAULT_TAU, DEFAULT_TW
from broker.cores.failures import DEFAULT_MISSED
from broker.cores.topology import Scot, TopologyError, parse_broker_id
from broker.durable import DEFAULT_EXPIRY, DEFAULT_KEEP
from pubsub.runtime.envnames import ENV_PREFIX
from pubsub.runtime.settings import SettingsError

#: Setting name -> command-line flag (for one-line configuration errors).
FLAGS = {
    "broker_topology": "--topology",
    "broker_id": "--id",
    "broker_protocol": "--protocol",
    "broker_routing": "--routing",
    "broker_tau": "--tau",
    "broker_tw": "--tw",
    "broker_link_rates": "--link-rate",
    "broker_heartbeat": "--heartbeat",
    "broker_suspect_after": "--suspect-after",
    "broker_state_dir": "--state-dir",
    "broker_session_expiry": "--session-expiry",
    "broker_session_keep": "--session-keep",
}


#: The routings of each protocol, its default first.
ROUTINGS = {"octopia": ("idr", "spr", "idr+"), "padres": ("tid-s", "tid-d")}


class BrokerSettings(BaseSettings):
    """The broker daemon (flags, then ``PUBSUB_BROKER_*`` environment variables)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    broker_topology: Path = Field(description="the SCOT topology file, with every broker's address")
    broker_id: str = Field(description="this broker's id 'x,i' in the topology")
    broker_protocol: Literal["octopia", "padres"] = Field(
        "octopia", description="OctopiA (§6-§9) or the PADRES-style baseline (TID-S / TID-D)"
    )
    broker_routing: Literal["idr", "spr", "idr+", "tid-s", "tid-d"] | None = Field(
        None,
        validate_default=True,
        description="publication routing: for OctopiA dynamic scotIDR (idr, the default), static "
        "scotSPR (spr) or scotIDR with intra-cluster dynamic routing (idr+); for PADRES static TID-S "
        "(tid-s, the default) or dynamic TID-D (tid-d)",
    )
    broker_tau: float = Field(DEFAULT_TAU, ge=0, description="congestion threshold tau of Eq. 3")
    broker_tw: float = Field(
        DEFAULT_TW, gt=0, le=60, description="seconds of the Link Status Table window t_w"
    )
    broker_link_rates: dict[str, float] = Field(
        default_factory=dict, description="outgoing link -> messages per second at most"
    )
    broker_heartbeat: float = Field(
        0.5, ge=0, description="seconds between heartbeats to every neighbour (0: off)"
    )
    broker_suspect_after: int = Field(
        DEFAULT_MISSED, ge=1, le=1000,
        description="missed heartbeat periods before a silent neighbour is suspected",
    )
    broker_client_buffer_bytes: int = Field(
        8 << 20, ge=1024, description="unread bytes a client may hold before deliveries drop"
    )
    broker_state_dir: Path | None = Field(
        None, description="directory of the clients' advertisements and sessions, kept across restarts (none: not kept)"
    )
    broker_session_expiry: float = Field(
        DEFAULT_EXPIRY, gt=0, le=86400, description="seconds a disconnected session waits for its client"
    )
    broker_session_keep: int = Field(
        DEFAULT_KEEP, ge=1, le=1_000_000, description="deliveries a session keeps for a resume"
    )

    @field_validator("broker_routing")
    @classmethod
    def _check_routing(cls, value: str | None, info: ValidationInfo) -> str | None:
        """The protocol's default routing when none is given; a routing of the other protocol
        is refused (the protocol is validated first: it is declared first)."""
        protocol = info.data.get("broker_protocol")
        if protocol not in ROUTINGS:
            return value  # the protocol's own error is reported
        allowed = ROUTINGS[protocol]
        if value is None:
            return allowed[0]
        if value not in allowed:
            raise ValueError(
                f"{value} is not a routing of protocol {protocol}, which takes "
                f"{' or '.join(allowed)} (default {allowed[0]})"
            )
        return value

    @field_validator("broker_id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        try:
            parse_broker_id(value)
        except TopologyError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("broker_link_rates")
    @classmethod
    def _check_rates(cls, value: dict[str, float]) -> dict[str, float]:
        for link, rate in value.items():
            try:
                parse_broker_id(link)
            except TopologyError as exc:
                raise ValueError(f"link {link!r}: {exc}") from None
            if not rate > 0 or rate == float("inf"):
                raise ValueError(f"link {link}: the rate must be a finite number > 0, not {rate}")
        return value


def parse_link_rate(text: str) -> tuple[str, float]:
    """``"x,i=R"`` -> ("x,i", R); ValueError with a one-line message."""
    link, sep, rate_text = text.rpartition("=")
    if not sep:
        raise ValueError(f"{text!r} is not LINK=RATE (e.g. b,1=20)")
    try:
        parse_broker_id(link)
    except TopologyError as exc:
        raise ValueError(f"{text!r}: {exc}") from None
    try:
        rate = float(rate_text)
    except ValueError:
        raise ValueError(f"{text!r}: the rate {rate_text!r} is not a number") from None
    if not rate > 0 or rate == float("inf"):
        raise ValueError(f"{text!r}: the rate must be a finite number of messages per second > 0")
    return link, rate


def check_against_topology(topo: Scot, settings: BrokerSettings, listen: str | None) -> str:
    """The address to listen on; SettingsError (one line) when the settings and the
    topology disagree: unknown id, no addresses, --listen differing from the file, a rate
    for a link that is not one of this broker's."""
    me = settings.broker_id
    if me not in topo:
        raise SettingsError(
            f"invalid configuration: broker_id (--id / PUBSUB_BROKER_ID): {me} is not a broker "
            f"of {settings.broker_topology} (vertices {list(topo.vertices)[:8]}, m = {topo.m})"
        )
    if not topo.addresses:
        raise SettingsError(
            f"invalid configuration: {settings.broker_topology} has no \"addresses\" map; the "
            "brokers need every broker's HOST:PORT (see `pubsub broker --help`)"
        )
    address = topo.address(me)
    if listen is not None and listen != address:
        raise SettingsError(
            f"invalid configuration: --listen {listen} differs from the address of {me} in "
            f"{settings.broker_topology} ({address}); omit --listen or make them agree"
        )
    neighbours = set(topo.neighbours(me))
    for link in settings.broker_link_rates:
        if link not in neighbours:
            raise SettingsError(
                f"invalid configuration: broker_link_rates (--link-rate / "
                f"PUBSUB_BROKER_LINK_RATES): {link} is not a neighbour of {me} "
                f"(neighbours: {', '.join(topo.neighbours(me))})"
            )
    return address


__all__ = ["FLAGS", "BrokerSettings", "check_against_topology", "parse_link_rate"]
