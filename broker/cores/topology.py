"""The Structured Cyclic Overlay Topology (SCOT) of OctopiA §3-§4: G_af □ K_m.

A SCOT is the Cartesian product of an *acyclic factor* G_af (a tree whose vertices are the
region labels) and a complete graph K_m on the cluster indexes 0..m-1 (§3.2: acyclic,
connectivity, index and label-order properties).  Its brokers are B(x, i) with x a vertex of
G_af and i in 0..m-1, written ``"x,i"`` everywhere in this package (the label order of §3.2:
the factor's vertex first, the cluster index second).

Structuredness (§4):

- cluster C_i: the G_af-fibre with index i -- the brokers (x, i) for every x, joined by
  *aLinks* (intra-cluster links, one per edge of G_af);
- region R_x: the K_m-fibre with index x -- the brokers (x, i) for every i, joined by
  *iLinks* (inter-cluster links, every pair);
- primary neighbours of B(x, i): its aLink neighbours (y, i), y adjacent to x in G_af;
  secondary neighbours: its iLink neighbours (x, j), j != i;
- an *edge* broker has at most one primary neighbour, an *inner* broker at least two (so all
  brokers of a region have the same type);
- a client's host broker is the broker it is attached to; its host cluster and host region
  are that broker's cluster and region.

`scot` builds a validated `Scot` from the factor's edges and m (optionally the vertices in
order, every broker's address and the host brokers of named clients).  Vertex labels are
strings of 1..32 characters from ``[A-Za-z0-9_.-]`` (so ``"x,i"`` parses back unambiguously).
Validation (`TopologyError`, one line naming the problem): m < 1, bad or duplicate labels,
self loops, duplicate edges (either direction), a cycle, a disconnected factor, vertices listed
but not matching the edges, addresses that are not ``host:port``, do not cover every broker or
repeat, clients on unknown brokers.  Topology files and the shipped topologies are read by
`broker.topologyfile`.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

#: A broker's identifier "x,i": factor vertex x (its region R_x), cluster index i (C_i).
BrokerId = str

ALINK = "aLink"
ILINK = "iLink"

MAX_LABEL_CHARS = 32
MAX_CLUSTERS = 64  # CIV bit vectors travel as 64-bit integers on the wire
MAX_BROKERS = 100_000
_LABEL_RE = re.compile(rf"[A-Za-z0-9_.-]{{1,{MAX_LABEL_CHARS}}}")
_ADDR_RE = re.compile(r"[A-Za-z0-9._-]{1,253}:[0-9]{1,5}")


class TopologyError(ValueError):
    """A SCOT description that is not valid; the message names the problem."""


def broker_id(x: str, i: int) -> BrokerId:
    """The identifier of B(x, i)."""
    return f"{x},{i}"


def parse_broker_id(text: object) -> tuple[str, int]:
    """(x, i) of ``"x,i"``; TopologyError if it is not of that form."""
    if not isinstance(text, str):
        raise TopologyError(f"a broker id is a string 'x,i', not {type(text).__name__}")
    x, sep, i = text.rpartition(",")
    if not sep or not _LABEL_RE.fullmatch(x) or not i.isdigit() or (len(i) > 1 and i[0] == "0"):
        raise TopologyError(f"a broker id is 'vertex,cluster' like 'a,0', not {text[:60]!r}")
    return x, int(i)


def _check_label(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise TopologyError(f"{where}: a vertex label is a string, not {value!r}"[:200])
    if not _LABEL_RE.fullmatch(value):
        raise TopologyError(
            f"{where}: vertex label {value[:40]!r} must be 1..{MAX_LABEL_CHARS} characters "
            "of letters, digits, '_', '.', '-'"
        )
    return value


@dataclass(frozen=True)
class Scot:
    """A validated SCOT G_af □ K_m with its clusters, regions, links and neighbour classes.

    Build it with `scot` (or `load` / `loads`); the constructor assumes validated input.
    """

    vertices: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    m: int
    addresses: Mapping[BrokerId, str] = field(default_factory=dict)
    clients: Mapping[str, BrokerId] = field(default_factory=dict)

    # --- the factor ------------------------------------------------------------------------
    @cached_property
    def factor_adjacency(self) -> dict[str, tuple[str, ...]]:
        """G_af as adjacency lists (neighbours in vertex order)."""
        order = {v: k for k, v in enumerate(self.vertices)}
        adj: dict[str, list[str]] = {v: [] for v in self.vertices}
        for u, v in self.edges:
            adj[u].append(v)
            adj[v].append(u)
        return {v: tuple(sorted(ns, key=order.__getitem__)) for v, ns in adj.items()}

    @cached_property
    def diameter(self) -> int:
        """diam(G_af): the longest shortest path in the factor (a tree: two BFS passes)."""
        far, _ = self._farthest(self.vertices[0])
        _, dist = self._farthest(far)
        return dist

    def _farthest(self, start: str) -> tuple[str, int]:
        dist = self._factor_distances(start)
        best = max(self.vertices, key=lambda v: (dist[v], -self.vertices.index(v)))
        return best, dist[best]

    def _factor_distances(self, start: str) -> dict[str, int]:
        dist = {start: 0}
        todo = deque([start])
        while todo:
            u = todo.popleft()
            for w in self.factor_adjacency[u]:
                if w not in dist:
                    dist[w] = dist[u] + 1
                    todo.append(w)
        return dist

    # --- brokers, clusters, regions ------------------------------------------------------------
    @cached_property
    def brokers(self) -> tuple[BrokerId, ...]:
        """Every broker, cluster by cluster, in vertex order."""
        return tuple(broker_id(x, i) for i in range(self.m) for x in self.vertices)

    @cached_property
    def _broker_set(self) -> frozenset[BrokerId]:
        return frozenset(self.brokers)

    def __contains__(self, bid: object) -> bool:
        return bid in self._broker_set

    def __len__(self) -> int:
        return len(self.brokers)

    def locate(self, bid: BrokerId) -> tuple[str, int]:
        """(x, i) of broker B(x, i); TopologyError for a broker not in this SCOT."""
        if bid not in self._broker_set:
            raise TopologyError(f"no broker {str(bid)[:60]!r} in this SCOT")
        return parse_broker_id(bid)

    def cluster_of(self, bid: BrokerId) -> int:
        """The cluster index i of B(x, i)."""
        return self.locate(bid)[1]

    def region_of(self, bid: BrokerId) -> str:
        """The region label x of B(x, i)."""
        return self.locate(bid)[0]

    @property
    def clusters(self) -> tuple[int, ...]:
        """The cluster indexes 0..m-1 (V_cf)."""
        return tuple(range(self.m))

    def cluster(self, i: int) -> tuple[BrokerId, ...]:
        """C_i: the brokers (x, i) for every factor vertex x."""
        if not 0 <= i < self.m:
            raise TopologyError(f"no cluster C_{i} (clusters are 0..{self.m - 1})")
        return tuple(broker_id(x, i) for x in self.vertices)

    def region(self, x: str) -> tuple[BrokerId, ...]:
        """R_x: the brokers (x, i) for every cluster index i."""
        if x not in self.factor_adjacency:
            raise TopologyError(f"no region R_{x!r} (no such factor vertex)")
        return tuple(broker_id(x, i) for i in range(self.m))

    # --- links and neighbours --------------------------------------------------------------
    def primary_neighbours(self, bid: BrokerId) -> tuple[BrokerId, ...]:
        """The aLink neighbours of B(x, i): (y, i) for y adjacent to x in G_af."""
        x, i = self.locate(bid)
        return tuple(broker_id(y, i) for y in self.factor_adjacency[x])

    def secondary_neighbours(self, bid: BrokerId) -> tuple[BrokerId, ...]:
        """The iLink neighbours of B(x, i): (x, j) for every j != i."""
        x, i = self.locate(bid)
        return tuple(broker_id(x, j) for j in range(self.m) if j != i)

    def neighbours(self, bid: BrokerId) -> tuple[BrokerId, ...]:
        """Primary neighbours, then secondary neighbours."""
        return self.primary_neighbours(bid) + self.secondary_neighbours(bid)

    def ilink_to(self, bid: BrokerId, j: int) -> BrokerId:
        """get_iLink(j) at B(x, i): the secondary neighbour (x, j) in cluster C_j."""
        x, i = self.locate(bid)
        if not 0 <= j < self.m or j == i:
            raise TopologyError(f"{bid} has no iLink to cluster C_{j}")
        return broker_id(x, j)

    def link_kind(self, a: BrokerId, b: BrokerId) -> str | None:
        """ALINK, ILINK, or None when a and b are not neighbours."""
        xa, ia = self.locate(a)
        xb, ib = self.locate(b)
        if ia == ib and xb in self.factor_adjacency[xa]:
            return ALINK
        if xa == xb and ia != ib:
            return ILINK
        return None

    def alinks(self) -> tuple[tuple[BrokerId, BrokerId], ...]:
        """Every aLink once (undirected), cluster by cluster."""
        return tuple(
            (broker_id(u, i), broker_id(v, i)) for i in range(self.m) for u, v in self.edges
        )

    def ilinks(self) -> tuple[tuple[BrokerId, BrokerId], ...]:
        """Every iLink once (undirected), region by region."""
        return tuple(
            (broker_id(x, i), broker_id(x, j))
            for x in self.vertices
            for i in range(self.m)
            for j in range(i + 1, self.m)
        )

    def links(self) -> tuple[tuple[BrokerId, BrokerId], ...]:
        """aLinks then iLinks, each once."""
        return self.alinks() + self.ilinks()

    def is_inner(self, bid: BrokerId) -> bool:
        """Inner broker: at least two primary neighbours (§4.2)."""
        return len(self.primary_neighbours(bid)) >= 2

    def is_edge(self, bid: BrokerId) -> bool:
        """Edge broker: at most one primary neighbour (§4.2)."""
        return not self.is_inner(bid)

    def inner_brokers(self) -> tuple[BrokerId, ...]:
        return tuple(b for b in self.brokers if self.is_inner(b))

    def edge_brokers(self) -> tuple[BrokerId, ...]:
        return tuple(b for b in self.brokers if self.is_edge(b))

    def distance(self, a: BrokerId, b: BrokerId) -> int:
        """Hops between two brokers in the SCOT: factor distance plus one iLink if needed."""
        xa, ia = self.locate(a)
        xb, ib = self.locate(b)
        return self._factor_distances(xa)[xb] + (0 if ia == ib else 1)

    def path_in_cluster(self, a: BrokerId, b: BrokerId) -> tuple[BrokerId, ...]:
        """The unique aLink path from a to b (same cluster), both ends included."""
        xa, ia = self.locate(a)
        xb, ib = self.locate(b)
        if ia != ib:
            raise TopologyError(f"{a} and {b} are in different clusters")
        parent: dict[str, str] = {xa: xa}  # the root is its own parent (the walk stops there)
        todo = deque([xa])
        while todo:
            u = todo.popleft()
            for w in self.factor_adjacency[u]:
                if w not in parent:
                    parent[w] = u
                    todo.append(w)
        path = [xb]
        while path[-1] != xa:
            path.append(parent[path[-1]])
        return tuple(broker_id(x, ia) for x in reversed(path))

    # --- clients and addresses -----------------------------------------------------------------
    def host_broker(self, client: str) -> BrokerId:
        """The broker a named client is attached to (from the file's "clients")."""
        try:
            return self.clients[client]
        except KeyError:
            raise TopologyError(f"no client {client[:60]!r} in this topology") from None

    def host_cluster(self, client: str) -> int:
        return self.cluster_of(self.host_broker(client))

    def host_region(self, client: str) -> str:
        return self.region_of(self.host_broker(client))

    def address(self, bid: BrokerId) -> str:
        """The host:port of a broker (from the file's "addresses")."""
        self.locate(bid)
        try:
            return self.addresses[bid]
        except KeyError:
            raise TopologyError(f"the topology gives no address for broker {bid}") from None

    def broker_at(self, address: str) -> BrokerId | None:
        """The broker listening on `address`, if the topology names one."""
        for bid, addr in self.addresses.items():
            if addr == address:
                return bid
        return None

    # --- serialisation ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "factor": [list(e) for e in self.edges],
            "m": self.m,
            "vertices": list(self.vertices),
        }
        if self.addresses:
            out["addresses"] = dict(self.addresses)
        if self.clients:
            out["clients"] = dict(self.clients)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def with_addresses(self, addresses: Mapping[BrokerId, str]) -> Scot:
        """A copy with broker addresses (validated like a file's)."""
        return scot(self.edges, self.m, self.vertices, addresses=addresses, clients=self.clients)


def scot(
    factor: Iterable[Sequence[str]],
    m: int,
    vertices: Iterable[str] | None = None,
    *,
    addresses: Mapping[BrokerId, str] | None = None,
    clients: Mapping[str, BrokerId] | None = None,
) -> Scot:
    """A validated SCOT from the factor's edge list and m; TopologyError when invalid."""
    if type(m) is not int:
        raise TopologyError(f"m must be an integer, not {m!r}"[:200])
    if m < 1:
        raise TopologyError(f"m must be at least 1 (the order of K_m), got {m}")
    if m > MAX_CLUSTERS:
        raise TopologyError(f"m must be at most {MAX_CLUSTERS}, got {m}")
    if isinstance(factor, (str, bytes)) or not isinstance(factor, Iterable):
        raise TopologyError("factor must be a list of edges [u, v]")
    edges: list[tuple[str, str]] = []
    seen: set[frozenset[str]] = set()
    order: dict[str, None] = {}
    for k, edge in enumerate(factor):
        if isinstance(edge, (str, bytes)) or not isinstance(edge, Sequence) or len(edge) != 2:
            raise TopologyError(f"factor edge #{k} must be a pair [u, v], got {edge!r}"[:200])
        u = _check_label(edge[0], f"factor edge #{k}")
        v = _check_label(edge[1], f"factor edge #{k}")
        if u == v:
            raise TopologyError(f"factor edge #{k} is a self loop on {u!r}")
        key = frozenset((u, v))
        if key in seen:
            raise TopologyError(f"factor edge #{k} [{u!r}, {v!r}] is a duplicate")
        seen.add(key)
        edges.append((u, v))
        order.setdefault(u)
        order.setdefault(v)
    if vertices is not None:
        if isinstance(vertices, (str, bytes)) or not isinstance(vertices, Iterable):
            raise TopologyError("vertices must be a list of labels")
        listed: dict[str, None] = {}
        for k, v in enumerate(vertices):
            v = _check_label(v, f"vertex #{k}")
            if v in listed:
                raise TopologyError(f"vertex {v!r} is listed twice (broker ids must be unique)")
            listed[v] = None
        missing = [v for v in order if v not in listed]
        if missing:
            raise TopologyError(f"factor edges use vertices not in 'vertices': {missing[:5]}")
        order = listed
    if not order:
        raise TopologyError("the factor has no vertex (give edges, or 'vertices' with one label)")
    verts = tuple(order)
    if len(verts) * m > MAX_BROKERS:
        raise TopologyError(f"{len(verts) * m} brokers exceed the limit of {MAX_BROKERS}")
    # Acyclic and connected: union-find finds the first edge closing a cycle.
    parent = {v: v for v in verts}

    def root(v: str) -> str:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for u, v in edges:
        ru, rv = root(u), root(v)
        if ru == rv:
            raise TopologyError(f"the factor is not acyclic: edge [{u!r}, {v!r}] closes a cycle")
        parent[ru] = rv
    roots = {root(v) for v in verts}
    if len(roots) > 1:
        parts: dict[str, list[str]] = {}
        for v in verts:
            parts.setdefault(root(v), []).append(v)
        shown = [sorted(p)[:3] for p in parts.values()][:3]
        raise TopologyError(
            f"the factor is not connected: {len(roots)} components, e.g. {shown}"
        )
    topo = Scot(verts, tuple(edges), m)
    addr = _check_addresses(topo, addresses) if addresses else {}
    cl = _check_clients(topo, clients) if clients else {}
    return Scot(verts, tuple(edges), m, addr, cl)


def _check_addresses(topo: Scot, addresses: Mapping[BrokerId, str]) -> dict[BrokerId, str]:
    if not isinstance(addresses, Mapping):
        raise TopologyError("addresses must be a map from broker id to host:port")
    out: dict[BrokerId, str] = {}
    used: dict[str, BrokerId] = {}
    for bid, addr in addresses.items():
        if bid not in topo:
            raise TopologyError(f"addresses: no broker {str(bid)[:60]!r} in this SCOT")
        if not isinstance(addr, str) or not _ADDR_RE.fullmatch(addr):
            raise TopologyError(f"addresses: {bid} must map to host:port, not {addr!r}"[:200])
        port = int(addr.rpartition(":")[2])
        if not 1 <= port <= 65535:
            raise TopologyError(f"addresses: port of {bid} out of range: {addr}")
        if addr in used:
            raise TopologyError(f"addresses: {bid} and {used[addr]} share {addr}")
        used[addr] = bid
        out[bid] = addr
    missing = [b for b in topo.brokers if b not in out]
    if missing:
        raise TopologyError(
            f"addresses: {len(missing)} broker(s) have no address, e.g. {missing[:3]}"
        )
    return out


def _check_clients(topo: Scot, clients: Mapping[str, BrokerId]) -> dict[str, BrokerId]:
    if not isinstance(clients, Mapping):
        raise TopologyError("clients must be a map from client name to broker id")
    out: dict[str, BrokerId] = {}
    for name, bid in clients.items():
        if not isinstance(name, str) or not name:
            raise TopologyError(f"clients: a client name is a non-empty string, not {name!r}")
        if bid not in topo:
            raise TopologyError(f"clients: {name} is attached to unknown broker {bid!r}"[:200])
        out[name] = bid
    return out
