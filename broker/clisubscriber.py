"""``pubsub subscribe --broker B --filter F --json`` as a process, its output collected (for the
integration tests and the benchmarks that watch what a subscriber application receives).

`CliSubscriber` starts the command (with ``--retry-for``), reads its stdout line by line on a
thread (each JSON delivery, with the moment it was read) and its stderr (the subscription's
messages: subscribed, reconnecting, resumed, gap notices), and stops it with SIGINT, then
SIGKILL, both bounded.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from broker.cores.language.filters import Filter
from broker.cores.language.text import parse_filter
from broker.localscot import LocalScot


class CliSubscriber:
    """One `pubsub subscribe --broker` process and what it printed (module docstring)."""

    def __init__(self, scot: LocalScot, bid: str, filter_text: str, retry_for: float = 2.0,
                 python: str | None = None, cwd: Path | None = None) -> None:
        self.bid = bid
        self.filter: Filter = parse_filter(filter_text)
        self.proc = subprocess.Popen(
            [python or sys.executable, "-m", "pubsub.cli.main", "subscribe", "--broker", scot.address(bid),
             "--filter", filter_text, "--json", "--retry-for", repr(retry_for)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
        )
        #: every delivery printed, and when it was read
        self.lines: list[dict[str, Any]] = []
        self.read_at: list[float] = []
        self.errors: list[str] = []
        self.bad_lines = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._read_out, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            now = time.monotonic()
            try:
                delivery = json.loads(line)
                int(delivery["attrs"]["seq"])
            except (ValueError, KeyError, TypeError):
                with self._lock:
                    self.bad_lines += 1
                continue
            with self._lock:
                self.lines.append(delivery)
                self.read_at.append(now)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._lock:
                self.errors.append(line.rstrip())

    @property
    def started(self) -> bool:
        with self._lock:
            return any(" subscribed s1 " in line for line in self.errors)

    def seqs(self) -> Counter[int]:
        """How often each publication (by its ``seq`` attribute) was delivered."""
        with self._lock:
            return Counter(int(d["attrs"]["seq"]) for d in self.lines)

    def first_arrivals(self) -> dict[int, float]:
        """When each publication (by seq) was first read."""
        with self._lock:
            out: dict[int, float] = {}
            for d, at in zip(self.lines, self.read_at, strict=True):
                out.setdefault(int(d["attrs"]["seq"]), at)
            return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
