"""Checks shared by the integration tests: a running `LocalCluster` against the ideal SR(n).

The ideal comes from the independent oracle (`tests.checker.compare`); the cluster only
supplies what the daemons report (`LocalCluster.snapshot`): the supervisor's members of a
topic and the state of every running node that reports one for it, members or not.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from pubsub.ops.localcluster import LocalCluster
from tests.checker import compare


def referenced(state: Mapping[str, Any]) -> set[str]:
    """Every node reference one reported topic state holds (left, right, ring, shortcuts)."""
    refs: set[str] = set()
    for key in ("left", "right", "ring"):
        contact = state.get(key)
        if isinstance(contact, (list, tuple)) and len(contact) == 2:
            refs.add(str(contact[1]))
    shortcuts = state.get("shortcuts") or {}
    if isinstance(shortcuts, Mapping):
        refs.update(str(ref) for ref in shortcuts.values() if ref is not None)
    return refs


def ring_problems(
    cluster: LocalCluster,
    wanted: Mapping[str, Collection[str]],
    gone: Collection[str] = (),
    *,
    via_cli: bool = False,
) -> list[str]:
    """Why the cluster is not exactly SR(n) over `wanted[topic]` for every topic ([] if it is).

    * the supervisor must list exactly the references in `wanted[topic]`;
    * the oracle must find no difference between the reported states and the ideal skip
      ring over the supervisor's members (this also flags a non-member that still holds
      state for the topic, and any member that references a node outside the ring);
    * no running node may reference a node in `gone`, in any topic (said explicitly so a
      failure names the stale reference).
    """
    problems: list[str] = []
    views = cluster.snapshots(sorted(wanted), via_cli=via_cli)
    for topic, refs in sorted(wanted.items()):
        members, states = views[topic]
        missing = sorted(set(refs) - set(members))
        extra = sorted(set(members) - set(refs))
        if missing:
            problems.append(f"{topic}: supervisor does not list {_names(cluster, missing)}")
        if extra:
            problems.append(f"{topic}: supervisor lists unexpected {_names(cluster, extra)}")
        problems.extend(f"{topic}: {diff}" for diff in compare(members, states))
        for ref, state in sorted(states.items()):
            stale = referenced(state) & set(gone)
            if stale:
                problems.append(
                    f"{topic}: {cluster.name_of(ref)} still references {_names(cluster, stale)}"
                )
    return problems


def _names(cluster: LocalCluster, refs: Collection[str]) -> str:
    return ", ".join(f"{cluster.name_of(r)} ({r})" for r in sorted(refs))


def assert_stays(problems: Callable[[], list[str]], duration: float, interval: float) -> int:
    """Sample `problems` every `interval` seconds for `duration` seconds; each must be [].

    Closure, observed: returns how many samples were taken (at least two).
    """
    deadline = time.monotonic() + duration
    samples = 0
    while True:
        found = problems()
        samples += 1
        assert not found, f"sample {samples} of the window is not exact:\n  " + "\n  ".join(
            found[:15]
        )
        if samples >= 2 and time.monotonic() >= deadline:
            return samples
        time.sleep(interval)
