"""A topic's members as the supervisor reports them: ref -> the ``label`` its status gives
each member (the skip ring's label bits, the clique's place in its list).  Used by the
demo, `pubsub cluster status`, the local cluster and the tests' cluster checks; what the
members' own reports lack against it is each overlay's own judgement
(`pubsub.kernel.contracts.Overlay.legitimate`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def members_of(supervisor_body: Mapping[str, Any], topic: str) -> dict[str, str]:
    """ref -> ``label`` of one topic's members, from a supervisor status body; a label held
    by nobody appears as ``<none:LABEL>``."""
    entry = (supervisor_body.get("topics") or {}).get(topic) or {}
    members: dict[str, str] = {}
    for member in entry.get("members", []):
        bits = str(member.get("label"))
        ref = member.get("ref")
        members[str(ref) if ref is not None else f"<none:{bits}>"] = bits
    return members
