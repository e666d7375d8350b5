"""The one place a broker core is built: OctopiA (static scotSPR or dynamic scotIDR routing,
paper 002 §6-§9) or the PADRES-style baseline (§10: static TID-S or dynamic TID-D routing),
for the daemon and the simulator alike."""

from __future__ import annotations

from broker.cores.corebase import DEFAULT_TAU, DEFAULT_TW, BrokerCore
from broker.cores.octopia import OctopiaBroker
from broker.cores.padres import PadresBroker
from broker.cores.topology import BrokerId, Scot

#: The routing protocols a broker core implements.
PROTOCOLS = ("octopia", "padres")


def make_core(
    protocol: str,
    topo: Scot,
    bid: BrokerId,
    *,
    dynamic: bool = False,
    tau: float = DEFAULT_TAU,
    t_w: float = DEFAULT_TW,
    epoch: str = "",
) -> BrokerCore:
    """A broker core for `protocol` ("octopia" -- `dynamic` for scotIDR -- or "padres" --
    `dynamic` for TID-D); ValueError for any other protocol.  `epoch` goes into the ids the
    core makes (a restarted broker's differ from its predecessor's)."""
    if protocol == "octopia":
        return OctopiaBroker(topo, bid, dynamic=dynamic, tau=tau, t_w=t_w, epoch=epoch)
    if protocol == "padres":
        return PadresBroker(topo, bid, dynamic=dynamic, tau=tau, t_w=t_w, epoch=epoch)
    raise ValueError(f"unknown protocol {protocol!r} (one of {PROTOCOLS})")
