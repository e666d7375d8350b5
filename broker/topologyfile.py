"""SCOT topology files (OctopiA §3-§4, §10): the JSON format, reading it, the shipped topologies.

Its one job is reading topology files into `broker.cores.topology.Scot`; it lives beside the
daemon and the tooling rather than in `broker.cores` because it reads files (cores do no I/O,
docs/architecture.md).

Topology file (JSON; `load` / `loads` / `broker.cores.topology.Scot.to_json`)::

    {
      "factor": [["a", "b"], ["b", "c"]],        # edges of G_af (required; [] for one vertex)
      "m": 3,                                    # clusters, the order of K_m (required, >= 1)
      "vertices": ["a", "b", "c"],               # optional: the factor's vertices, in order;
                                                 #   needed only when G_af is a single vertex
      "addresses": {"a,0": "127.0.0.1:7100", ...},  # optional: every broker's host:port
      "clients": {"P1": "b,0", ...}              # optional: host broker of named clients
    }

Validation (`broker.cores.topology.TopologyError`, one line naming the problem): unknown or
missing keys, an unreadable file or text that is not JSON, and everything
`broker.cores.topology.scot` checks.

Shipped topologies (`broker/topologies/`): ``figure3.json`` (the 6-vertex factor of Fig. 2
times K_3, Fig. 3), ``figure7.json`` (the path a-b-c times K_4, Fig. 7), ``scot3x3.json`` (the
path a-b-c times K_3, the 9-broker example) and ``s_e.json`` (S_e of Fig. 9: the 14-vertex
factor times K_4, §10).  The extracted paper text does not contain the figures' edges; the
readings are documented in `figure3`, `figure7` and `s_e`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from broker.cores.topology import Scot, TopologyError, scot

_KEYS = frozenset({"factor", "m", "vertices", "addresses", "clients"})


def from_dict(obj: object) -> Scot:
    """A SCOT from the parsed topology file (see the module docstring)."""
    if not isinstance(obj, Mapping):
        raise TopologyError("a topology file holds a JSON object")
    unknown = sorted(set(obj) - _KEYS)
    if unknown:
        raise TopologyError(f"unknown topology key(s) {unknown[:5]} (known: {sorted(_KEYS)})")
    for key in ("factor", "m"):
        if key not in obj:
            raise TopologyError(f"the topology needs {key!r}")
    return scot(
        obj["factor"],
        obj["m"],
        obj.get("vertices"),
        addresses=obj.get("addresses"),
        clients=obj.get("clients"),
    )


def loads(text: str | bytes) -> Scot:
    """A SCOT from the text of a topology file."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise TopologyError(f"a topology file must be JSON: {exc}"[:200]) from None
    return from_dict(obj)


def load(path: str | Path) -> Scot:
    """A SCOT from a topology file; TopologyError names the file when it is unreadable."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(f"cannot read topology file {path}: {exc}") from None
    try:
        return loads(text)
    except TopologyError as exc:
        raise TopologyError(f"{path}: {exc}") from None


def shipped(name: str) -> Scot:
    """A topology file shipped in ``broker/topologies/`` (``"s_e"``, ``"figure3"``, ...)."""
    ref = resources.files("broker") / "topologies" / f"{name}.json"
    try:
        text = ref.read_text(encoding="utf-8")
    except (OSError, FileNotFoundError):
        raise TopologyError(f"no shipped topology {name!r}") from None
    return loads(text)


def figure3() -> Scot:
    """Fig. 2/3: a six-vertex acyclic factor a..f times K_3 (18 brokers).

    Reading (the figure's edges are not in the extracted text): the path a-b-c-d-e-f.  It
    agrees with every statement the text makes about it: B(a, 2) is an edge broker, B(e, 1) an
    inner broker, and B(d, 1) a primary neighbour of B(e, 1) (§4.2, §9.1).
    """
    return shipped("figure3")


def figure7() -> Scot:
    """Fig. 7: the three-vertex path a-b-c times K_4 (the tetrahedron), 12 brokers."""
    return shipped("figure7")


def scot3x3() -> Scot:
    """The 3x3 example: the path a-b-c times K_3 (9 brokers)."""
    return shipped("scot3x3")


def s_e() -> Scot:
    """S_e of Fig. 9 (§10): a 14-vertex acyclic factor A..N times K_4 (56 brokers).

    The text fixes the factor's inner vertices (F, G, H, I) and edge vertices (A-E, J-N) but
    not its edges.  Reading: the inner vertices form the path F-G-H-I and the ten leaves hang
    off them in alphabetical order, A B C on F, D E on G, J K on H, L M N on I -- every inner
    vertex then has degree 4.  (The text's total of 54 brokers is 14 x 4 = 56.)
    """
    return shipped("s_e")
