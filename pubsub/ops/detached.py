"""A local cluster left running by `pubsub cluster up`: its manifest (which daemons, which
pids, which ports), whether each process still runs (a reused pid never counts), and
stopping them by pid."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from pubsub.ops.processes import ClusterError

MANIFEST = "cluster.json"


#: Seconds `down` waits after SIGTERM before it sends SIGKILL.
TERM_TIMEOUT = 5.0


#: Seconds `down` waits for a SIGKILLed process to disappear.
KILL_TIMEOUT = 5.0


class NoCluster(click.ClickException):
    """There is no cluster (manifest missing, unreadable or nothing running); exit 1."""


# --- the manifest and the processes it names -----------------------------------------------------
@dataclass(frozen=True)
class DaemonEntry:
    """One daemon as the manifest records it."""

    name: str
    ref: str
    pid: int | None
    log: str | None
    #: Its Prometheus endpoint's port (``up --metrics``) and admin address (`pubsub chaos`).
    metrics_port: int | None = None
    admin: str | None = None
    #: A node's HTTP API address (``up --http``).
    http: str | None = None

    @property
    def role(self) -> str:
        return "supervisor" if self.name.partition("-")[0] == "supervisor" else "node"


def manifest_path(directory: Path) -> Path:
    return directory / MANIFEST


def read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest of the cluster in `directory`; NoCluster if there is none or it is bad."""
    path = manifest_path(directory)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        inside = manifest_path(directory.parent).exists()  # --dir left out in the cluster's own directory
        hint = f"; {directory.parent} holds one: --dir {directory.parent}" if inside else ""
        raise NoCluster(
            f"no cluster in {directory} (no {MANIFEST}){hint}; start one with `pubsub cluster up --dir {directory}`"
        ) from None
    except OSError as exc:
        raise NoCluster(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise NoCluster(f"{path} is not a cluster manifest: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("supervisor"), dict):
        raise NoCluster(f"{path} is not a cluster manifest: no supervisor entry")
    if not isinstance(doc.get("nodes"), list):
        raise NoCluster(f"{path} is not a cluster manifest: no node list")
    return doc


def daemons_of(doc: Mapping[str, Any]) -> list[DaemonEntry]:
    """The supervisor, then every node, then any further (sharded) supervisors, from a
    manifest (entries that make no sense are reported with a ref of "?" and no pid rather
    than trusted)."""
    out: list[DaemonEntry] = []
    more = doc.get("supervisors")
    for raw in [doc["supervisor"], *doc["nodes"], *(more[1:] if isinstance(more, list) else ())]:
        if not isinstance(raw, Mapping):
            continue
        pid = raw.get("pid")
        out.append(
            DaemonEntry(
                name=str(raw.get("name", "?")),
                ref=str(raw.get("ref", "?")),
                pid=pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 1 else None,
                log=str(raw["log"]) if raw.get("log") else None,
                metrics_port=raw["metrics_port"] if isinstance(raw.get("metrics_port"), int) else None,
                admin=str(raw["admin"]) if raw.get("admin") else None,
                http=str(raw["http"]) if raw.get("http") else None,
            )
        )
    return out


def write_manifest(directory: Path, doc: Mapping[str, Any]) -> None:
    """Replace the manifest atomically."""
    path = manifest_path(directory)
    tmp = path.with_name(f".{MANIFEST}.cmd.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _proc_state(pid: int) -> str | None:
    """The state letter of /proc/PID/stat ("R", "S", "Z", ...), None without /proc entry."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[0] if ")" in stat else None


def is_running(entry: DaemonEntry) -> bool:
    """Whether the manifest's pid is alive (not a zombie) and still runs this daemon."""
    if entry.pid is None:
        return False
    try:
        os.kill(entry.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, but another user's: not ours, as the command line check shows
    if not Path("/proc").is_dir():  # no /proc (not Linux): the signal check is all we have
        return True
    if _proc_state(entry.pid) in (None, "Z", "X"):
        return False
    try:
        argv = Path(f"/proc/{entry.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    words = [a.decode("utf-8", "replace") for a in argv]
    return "pubsub.cli.main" in words and entry.ref in words


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _wait_gone(entries: Sequence[DaemonEntry], timeout: float) -> list[DaemonEntry]:
    """Poll until none of `entries` runs or `timeout` passes; those still running."""
    deadline = time.monotonic() + timeout
    pending = [e for e in entries if is_running(e)]
    while pending and time.monotonic() < deadline:
        time.sleep(0.05)
        pending = [e for e in pending if is_running(e)]
    return pending


def stop_daemons(entries: Sequence[DaemonEntry]) -> tuple[list[str], list[str]]:
    """SIGTERM every running entry, SIGKILL what is left after TERM_TIMEOUT.

    Returns (names stopped by SIGTERM, names that needed SIGKILL).  ClusterError if a
    process survives SIGKILL for KILL_TIMEOUT seconds.
    """
    running = [e for e in entries if is_running(e)]
    for entry in running:
        assert entry.pid is not None
        _signal(entry.pid, signal.SIGTERM)
        _signal(entry.pid, signal.SIGCONT)  # a stopped (SIGSTOP) daemon must run to exit
    stubborn = _wait_gone(running, TERM_TIMEOUT)
    for entry in stubborn:
        assert entry.pid is not None
        _signal(entry.pid, signal.SIGKILL)
    left = _wait_gone(stubborn, KILL_TIMEOUT)
    if left:
        raise ClusterError(
            "still running after SIGKILL: " + ", ".join(f"{e.name} (pid {e.pid})" for e in left)
        )
    killed = {e.name for e in stubborn}
    return [e.name for e in running if e.name not in killed], sorted(killed)
