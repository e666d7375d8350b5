"""Daemons of a local cluster as OS processes on 127.0.0.1: free ports, one `Daemon`
record per process (how to start it, its log, its process), and the cluster's errors.
Used by every mode's local launcher (`pubsub.ops.daemongroup`)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

HOST = "127.0.0.1"
#: Seconds a daemon may take to answer `status`, from its start or, when daemons start
#: together, from the last of them to answer (`DaemonGroup.wait_answering`).
START_TIMEOUT = 20.0
#: Seconds `stop` waits after SIGTERM before it sends SIGKILL.
TERM_TIMEOUT = 5.0
#: Seconds a single status / subscribe request may take.
REQUEST_TIMEOUT = 5.0
#: Seconds a CLI invocation may take (interpreter start-up included).
CLI_TIMEOUT = 30.0
#: With `base_port`, daemon i (0 = the supervisor) serves metrics on base_port + this + i.
METRICS_PORT_OFFSET = 1000
#: With `base_port`, daemon i (0 = the supervisor) has its admin listener on base_port + this + i.
ADMIN_PORT_OFFSET = 2000
#: The Prometheus file_sd target file a cluster with metrics writes into its work dir.
PROMETHEUS_TARGETS = "prometheus-targets.json"
#: Seconds a port `pick_free_ports` hands out stays leased to its caller: no other caller of
#: this user on this machine gets it meanwhile, however free it looks (its daemon may not
#: have bound it yet).
PORT_LEASE = 120.0


class ClusterError(RuntimeError):
    """The cluster could not do what was asked (a daemon did not start, a request failed)."""


class ClusterTimeout(ClusterError):
    """A condition did not hold within its deadline; the message says what was still wrong."""


# --- ports ---------------------------------------------------------------------------------------
def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for automatically chosen local ports (Linux), else a safe guess."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def port_is_free(port: int, host: str = HOST) -> bool:
    """Whether a listening socket could bind `host:port` now (as the daemons bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def port_leases_path() -> Path:
    """The file in which `pick_free_ports` records its leases, one per user and machine."""
    return Path(tempfile.gettempdir()) / f"pubsub-port-leases-{os.getuid()}.json"


@contextmanager
def _port_leases(path: Path) -> Iterator[dict[int, float] | None]:
    """The unexpired leases {port: expiry (epoch seconds)} under an exclusive lock on `path`,
    written back when the block ends; None if the file cannot be used (then there are no
    leases: each pick is checked by binding only, as without this file).  A damaged file
    counts as empty and is rewritten."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        yield None
        return
    with os.fdopen(fd, "r+", encoding="utf-8") as file:
        fcntl.flock(file, fcntl.LOCK_EX)  # released when the file closes
        try:
            stored = json.loads(file.read() or "{}")
            leases = {int(port): float(expiry) for port, expiry in stored.items()}
        except (ValueError, TypeError, AttributeError):
            leases = {}
        now = time.time()
        leases = {port: expiry for port, expiry in leases.items() if expiry > now}
        yield leases
        file.seek(0)
        file.truncate()
        file.write(json.dumps({str(port): expiry for port, expiry in sorted(leases.items())}))


def pick_free_ports(
    count: int, *, rng: random.Random | None = None, lease: float = PORT_LEASE, leases_file: Path | None = None,
) -> list[int]:
    """`count` distinct ports on 127.0.0.1 that are free now, outside the ephemeral range.

    Ports are drawn at random from 10000 up to the start of the ephemeral range; each is
    verified by binding it and leased for `lease` seconds in `leases_file` (by default
    `port_leases_path()`), which every caller consults under a lock, so that two clusters or
    tests starting side by side never get the same port while their daemons are still
    starting.  (A program that does not use this function may still take a port before the
    daemon binds it; the daemon then fails to start and says so in its log.)
    """
    rng = rng or random.Random()
    low_ephemeral, high_ephemeral = _ephemeral_range()
    if low_ephemeral > 10000 + 4 * count:
        lo, hi = 10000, low_ephemeral - 1
    else:  # an unusual configuration: fall back to the ports above the ephemeral range
        lo, hi = high_ephemeral + 1, 65535
    chosen: list[int] = []
    with _port_leases(leases_file or port_leases_path()) as leases:
        leased = leases or {}
        for _ in range(200 * max(count, 1)):
            if len(chosen) == count:
                break
            port = rng.randint(lo, hi)
            if port not in chosen and port not in leased and port_is_free(port):
                chosen.append(port)
        if len(chosen) < count:
            raise ClusterError(f"found only {len(chosen)} of {count} free ports in {lo}..{hi}")
        if leases is not None:
            expiry = time.time() + lease
            leases.update((port, expiry) for port in chosen)
    return chosen


# --- one daemon ----------------------------------------------------------------------------------
@dataclass
class Daemon:
    """One daemon of the cluster: how to start it, and its current process (if any)."""

    name: str
    ref: str
    args: list[str]
    data_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    log_file: IO[bytes] | None = field(default=None, repr=False)
    starts: int = 0
    #: Port of the daemon's Prometheus endpoint on 127.0.0.1, or None (metrics off).
    metrics_port: int | None = None
    #: The daemon's admin address (`pubsub chaos`), or None (admin listener off).
    admin_ref: str | None = None
    #: A node's HTTP API address (``--http-listen``), or None (not served).
    http_ref: str | None = None

    @property
    def port(self) -> int:
        return int(self.ref.rpartition(":")[2])

    @property
    def running(self) -> bool:
        """Started and not (yet) exited."""
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def log_of_current_run(self) -> str:
        """What the daemon logged since it was last started (after the cluster's banner)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return text.rpartition(f" start #{self.starts} of {self.name} ---\n")[2]

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the daemon's log file (for error messages)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _status_problem(daemon: Daemon, exc: Exception) -> str:
    return f"{daemon.name} ({daemon.ref}) does not answer status: {exc}"


def _check_answered_by(daemon: Daemon, answer: object) -> None:
    """ClusterError if `answer`, a status reply from `daemon`'s address, comes from another
    process than the one started (its port was taken, by another cluster for instance)."""
    if not isinstance(answer, dict) or daemon.pid is None:
        return
    stats = answer.get("stats")
    pid = stats.get("pid") if isinstance(stats, dict) else None
    if isinstance(pid, int) and pid != daemon.pid:
        raise ClusterError(
            f"{daemon.ref}, the address of {daemon.name}, is answered by another process (pid "
            f"{pid}), not by the {daemon.name} just started (pid {daemon.pid}): the port is in "
            "use; choose other ports (--base-port) or stop what holds it"
        )


def poll(
    problems: Callable[[], list[str]], timeout: float, what: str, interval: float = 0.1
) -> float:
    """Call `problems` every `interval` seconds until it returns []; the seconds it took.

    ClusterTimeout (with the last problems, at most 15 of them) after `timeout` seconds.
    """
    start = time.monotonic()
    deadline = start + timeout
    while True:
        found = problems()
        if not found:
            return time.monotonic() - start
        if time.monotonic() > deadline:
            shown = "\n  ".join(found[:15])
            more = f"\n  ... and {len(found) - 15} more" if len(found) > 15 else ""
            raise ClusterTimeout(
                f"timed out after {timeout:g} s waiting for {what}; still wrong:\n  {shown}{more}"
            )
        time.sleep(interval)


def terminate(proc: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """Stop a child process by its pid: SIGTERM, a bounded wait, then SIGKILL; reaped in
    every case, no error if it has ended already."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout)


def _exit(status: int) -> None:
    raise SystemExit(status)


def _unwind(signum: int, frame: object) -> None:
    """SIGTERM's handler: SystemExit, raised at once -- or, inside a running event loop,
    from a callback of its own, so that it leaves the loop without failing the task the
    signal happened to interrupt (asyncio would report that task's exception as never
    retrieved, with a traceback)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        _exit(128 + signum)
    else:
        loop.call_soon_threadsafe(_exit, 128 + signum)


@contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """While inside, SIGTERM ends the program as Ctrl-C would, by unwinding: every
    ``finally`` and ``with`` on the way out runs (the processes a command started are
    stopped), and the exit status is 143.  Python's default would end the process at once
    and leave its children running.  The previous handler is put back on the way out."""
    previous = signal.signal(signal.SIGTERM, _unwind)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
