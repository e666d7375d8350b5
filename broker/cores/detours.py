"""Detours around a suspected broker through the parallel clusters (issue 46 item 2) -- no I/O.

Paper 002 leaves broker failures out of scope (§9.2 limitation (i)).  A SCOT offers m parallel
copies of the factor tree, so a message that would cross a suspected broker D = B(y, i) can
walk around it: every cluster C_k holds a broker (v, k) for each factor vertex v, and a walk
from vertex u to vertex w may change cluster at any vertex over the region's iLinks.

What a detour must do.  A message sent to D by a neighbour P would be handled by D and passed
on, away from P, into the parts of D's cluster beyond it.  With D suspected, each of those
parts is entered at its *exit*: a primary neighbour of D (`exits`), which handles the message
as if D had sent it -- for a tree, the exits' sides are disjoint and together are D's cluster
without D and without P's side, so every broker beyond D is reached once:

* P a primary neighbour (an aLink copy, a subscription broadcast): the exits are D's other
  primary neighbours;
* P a secondary neighbour (a copy entering C_i over the iLink at y): every primary neighbour of
  D is an exit (P's side of C_i is empty).

How a detour walks (`next_hop`).  It carries its exit and an *avoid* list (D first).  At broker
(u, c), with exit (w, h): when u = w it crosses the iLink into (w, h); otherwise it takes the
aLink to (v, c), v the next vertex on the factor path from u to w, unless (v, c) is to be
avoided (listed, or suspected here: then it is listed), in which case it crosses an iLink to
another cluster c' at u whose (u, c') and (v, c') are not to be avoided, the next after c in
cyclic order.  Each step either shortens the factor distance to w or changes cluster at the same
vertex because a new broker was listed, so a walk ends within diam(G_af) * m steps, never
visits a broker twice, and crosses no broker the walk has reason to avoid.  When no cluster is
left at u, the detour is undeliverable (the caller counts it).  If the exit itself is suspected
where the walk would enter it, the walker sends the message around the exit in turn (the same
rule, with the exit as D and D as P).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from broker.cores.topology import BrokerId, Scot, broker_id

#: The longest avoid list a detour may carry (a bound for hostile input; a legitimate walk
#: lists at most one broker per cluster change).
MAX_AVOID = 64


def exits(topo: Scot, dead: BrokerId, came_from: BrokerId) -> tuple[BrokerId, ...]:
    """Where a message from `came_from` for the suspected `dead` is handled instead: the
    primary neighbours of `dead` other than `came_from` (module docstring)."""
    return tuple(b for b in topo.primary_neighbours(dead) if b != came_from)


def exit_towards(topo: Scot, dead: BrokerId, target: BrokerId) -> BrokerId | None:
    """The exit of `dead` whose side holds `target` (a broker of the same cluster), or None
    when `target` is `dead` itself or in another cluster."""
    if target == dead or topo.cluster_of(target) != topo.cluster_of(dead):
        return None
    path = topo.path_in_cluster(dead, target)
    return path[1]


def next_hop(
    topo: Scot, me: BrokerId, exit_: BrokerId, avoid: Sequence[BrokerId], suspects: Collection[BrokerId]
) -> tuple[BrokerId | None, list[BrokerId]]:
    """The neighbour a detour for `exit_` goes to from `me`, and its avoid list from here on;
    (None, avoid) when no way is left.  `me` is not `exit_`.  The caller handles the case in
    which the returned neighbour is `exit_` and is suspected (the walk enters it from `me`)."""
    avoided = list(avoid)
    u, c = topo.locate(me)
    w, h = topo.locate(exit_)
    if u == w:
        return exit_, avoided
    v = topo.path_in_cluster(broker_id(u, c), broker_id(w, c))[1]
    v_vertex = topo.region_of(v)
    ahead = broker_id(v_vertex, c)
    if ahead not in avoided and ahead not in suspects:
        return ahead, avoided
    if ahead not in avoided:
        avoided.append(ahead)
    for step in range(1, topo.m):
        k = (c + step) % topo.m
        side, beyond = broker_id(u, k), broker_id(v_vertex, k)
        if side in suspects or side in avoided or beyond in avoided:
            continue
        return side, avoided
    return None, avoided
