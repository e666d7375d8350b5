"""nats-server and redis-server as subprocesses of the benchmark: found on PATH (or in
/usr/sbin, where Debian puts nats-server), bound to 127.0.0.1 on a free port, with their log
in the run's directory, and stopped by pid (SIGTERM, then SIGKILL) whatever happens."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Self

from pubsub.ops.processes import pick_free_ports

HOST = "127.0.0.1"
START_TIMEOUT = 15.0
STOP_TIMEOUT = 5.0
INSTALL_HINT = "make bench installs it with apt when it can (bench/install-servers.sh)"


def find_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for folder in ("/usr/sbin", "/usr/local/sbin", "/sbin"):
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def version_of(binary: str | None, flag: str = "--version") -> str | None:
    if binary is None:
        return None
    try:
        done = subprocess.run([binary, flag], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr) else None


def missing_reason(binary: str, module: str, package: str) -> str | None:
    """None when the server binary and its Python client exist, else why not."""
    if find_binary(binary) is None:
        return f"{binary} not found (apt-get install {binary}; {INSTALL_HINT})"
    try:
        __import__(module)
    except ImportError:
        return f"the Python package {package} is missing (pip install -e '.[bench]')"
    return None


class ServerProcess:
    """One server process; `start` returns once its port accepts connections."""

    def __init__(self, name: str, workdir: Path, port: int | None = None) -> None:
        self.name = name
        self.workdir = workdir
        self.port = pick_free_ports(1)[0] if port is None else port
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / f"{name}.log"
        #: The process's working directory.
        self.cwd = workdir

    def command(self) -> list[str]:
        raise NotImplementedError

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> Self:
        self.launch()
        try:
            self.wait_started(time.monotonic() + START_TIMEOUT)
        except BaseException:
            self.stop()
            raise
        return self

    def launch(self) -> None:
        """Start the process, without waiting for it (`wait_started`)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                start_new_session=True,
            )

    def started(self) -> bool:
        """Whether the server is ready for clients: by default, its port accepts connections."""
        with contextlib.suppress(OSError), socket.create_connection((HOST, self.port), 0.5):
            return True
        return False

    def wait_started(self, deadline: float) -> None:
        """Return once `started`; RuntimeError if the process exits or `deadline` (monotonic) passes."""
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.process.returncode}: {self.log_tail()}"
                )
            if self.started():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} was not ready on {HOST}:{self.port} in time: {self.log_tail()}")
            time.sleep(0.05)

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
                process.wait()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class NatsServer(ServerProcess):
    """nats-server on 127.0.0.1; with `jetstream`, JetStream on (file storage in workdir/js)."""

    def __init__(self, workdir: Path, jetstream: bool) -> None:
        super().__init__("nats-server-js" if jetstream else "nats-server", workdir)
        self.jetstream = jetstream

    @property
    def url(self) -> str:
        return f"nats://{HOST}:{self.port}"

    def command(self) -> list[str]:
        binary = find_binary("nats-server")
        if binary is None:
            raise RuntimeError("nats-server not found")
        js = ["-js", "-sd", str(self.workdir / "js")] if self.jetstream else []
        return [binary, "-a", HOST, "-p", str(self.port), *js]


class RedisServer(ServerProcess):
    """redis-server on 127.0.0.1, nothing persisted (--save '' --appendonly no)."""

    def __init__(self, workdir: Path) -> None:
        super().__init__("redis-server", workdir)

    def command(self) -> list[str]:
        binary = find_binary("redis-server")
        if binary is None:
            raise RuntimeError("redis-server not found")
        return [
            binary, "--port", str(self.port), "--bind", HOST, "--save", "", "--appendonly", "no",
            "--dir", str(self.workdir),
        ]


class RelayProcess(ServerProcess):
    """Relay `index` of relay-floor (`bench.e2e.floor`), ready once it says so in its log
    (it has connected to its neighbours, which must be launched too)."""

    def __init__(self, workdir: Path, index: int, ports: list[int]) -> None:
        super().__init__(f"relay-{index:02d}", workdir, ports[index])
        self.cwd = Path(__file__).resolve().parents[2]  # where `-m bench.e2e.floor` is found
        self.index = index
        self.ports = ports

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "bench.e2e.floor", str(self.index), str(len(self.ports)),
            "--ports", ",".join(map(str, self.ports)), "--db", str(self.workdir / f"{self.name}.sqlite"),
        ]

    def started(self) -> bool:
        try:
            return "ready" in self.log_path.read_text(errors="replace").split()
        except OSError:
            return False
