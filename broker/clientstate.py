"""What only a broker holds, kept on disk so that it survives kill -9 (issue 46 item 4).

The routing tables are not saved: every PRT entry is held across the cluster and every CLT
entry by its host, so a restarted broker rebuilds them from its neighbours
(`broker.cores.resync`).  What nobody else holds is the broker's own clients': the
advertisements filed under their client ids and the sessions with their subscriptions
(`broker.sessions`).  With ``--state-dir DIR`` the broker keeps them in ``DIR/clients.json``,
rewritten whole on every change (write to a temporary file, fsync, rename: a crash leaves
the old file or the new one, never half of one), and makes them again at its next start.

The file (version 1)::

    {"version": 1, "broker": "b,1",
     "advertisements": [["feed", "a-1f...", "seq >= 0"], ...],          # client, id, filter
     "sessions": [["3f0c...", [["s1", "seq >= 0"], ...]], ...]}          # token, subscriptions

`load` refuses a file that is not this (unreadable, not JSON, another version, another
broker's, a filter that does not parse, more than the limits) with a `StateError` naming the
file and the problem: the daemon says it in one line and exits 2, and never starts with
tables it cannot trust.  Move the file away to start empty.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker.cores.language.filters import Filter
from broker.cores.language.text import parse_filter
from broker.cores.language.values import FilterError

VERSION = 1
FILE_NAME = "clients.json"
#: Bounds on what a state file may hold (a hostile or corrupt file is refused, not obeyed).
MAX_ENTRIES = 100_000
MAX_FILE_BYTES = 64 << 20


class StateError(ValueError):
    """A state file that cannot be used; the message names the file and the problem."""


@dataclass
class ClientState:
    """The advertisements (client, id, filter) and sessions (token -> [(id, filter)])."""

    broker: str
    advertisements: list[tuple[str, str, Filter]] = field(default_factory=list)
    sessions: dict[str, list[tuple[str, Filter]]] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({
            "version": VERSION,
            "broker": self.broker,
            "advertisements": [[c, i, f.to_text()] for c, i, f in self.advertisements],
            "sessions": [[token, [[i, f.to_text()] for i, f in subs]] for token, subs in self.sessions.items()],
        })


def path_in(state_dir: Path) -> Path:
    return state_dir / FILE_NAME


def load(state_dir: Path, broker: str) -> ClientState:
    """The state kept in `state_dir` (empty when there is no file yet); StateError when the
    file is there and cannot be used."""
    path = path_in(state_dir)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return ClientState(broker)
    except OSError as exc:
        raise StateError(f"{path}: cannot read the broker's state: {exc.strerror}") from None
    if size > MAX_FILE_BYTES:
        raise StateError(f"{path}: {size} bytes is more than a broker's state may hold ({MAX_FILE_BYTES})")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StateError(f"{path}: not a broker state file ({exc})"[:300]) from None
    return _parse(raw, path, broker)


def _parse(raw: object, path: Path, broker: str) -> ClientState:
    def bad(what: str) -> StateError:
        return StateError(f"{path}: {what}; move the file away to start this broker without it"[:300])

    if not isinstance(raw, dict) or raw.get("version") != VERSION:
        raise bad(f"not a version-{VERSION} broker state file")
    if raw.get("broker") != broker:
        raise bad(f"the state of broker {str(raw.get('broker'))[:40]!r}, not of {broker}")
    advs, sessions = raw.get("advertisements"), raw.get("sessions")
    if not isinstance(advs, list) or not isinstance(sessions, list):
        raise bad("advertisements and sessions must be lists")
    if len(advs) + len(sessions) > MAX_ENTRIES:
        raise bad(f"more than {MAX_ENTRIES} entries")
    state = ClientState(broker)
    for entry in advs:
        if not (isinstance(entry, list) and len(entry) == 3 and all(isinstance(x, str) for x in entry)):
            raise bad(f"an advertisement is [client, id, filter], not {str(entry)[:60]}")
        state.advertisements.append((entry[0], entry[1], _filter(entry[2], bad)))
    for entry in sessions:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], list)):
            raise bad(f"a session is [token, subscriptions], not {str(entry)[:60]}")
        subs = []
        for sub in entry[1]:
            if not (isinstance(sub, list) and len(sub) == 2 and all(isinstance(x, str) for x in sub)):
                raise bad(f"a subscription is [id, filter], not {str(sub)[:60]}")
            subs.append((sub[0], _filter(sub[1], bad)))
        state.sessions[entry[0]] = subs
    return state


def _filter(text: str, bad: Callable[[str], StateError]) -> Filter:
    try:
        return parse_filter(text)
    except FilterError as exc:
        raise bad(f"filter {text[:60]!r} does not parse: {exc}") from None


def save(state_dir: Path, state: ClientState) -> None:
    """Replace the state file atomically (temporary file, fsync, rename, fsync of the directory)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = path_in(state_dir)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(state.to_json())
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    fd = os.open(state_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
