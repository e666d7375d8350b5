"""Progress of a long command (`pubsub analyze`, `pubsub experiment run`) on stderr.

On a terminal it is a live line drawn with rich: a spinner, the current phase, the time
spent in it and in total, and a bar when the phase has a known size; the command's own
lines (`log`) scroll above it.  Anywhere else (a pipe, a log file, CI) every phase is one
plain line ``[  12.3 s] phase``, and once nothing has been written for `HEARTBEAT` seconds
a line ``[  42.3 s] ... still <phase> (30 s)`` says what is still going on (again after
each further `HEARTBEAT` of silence), so that a log never stays silent for minutes while
Spark works, and a command that reports on its own gets no such lines in between.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import IO, Any

#: Seconds of silence after which a "still ..." line is written when stderr is not a terminal.
HEARTBEAT = 10.0
#: Seconds between two looks of the heartbeat thread at how long the log has been silent.
HEARTBEAT_TICK = 1.0


class Progress:
    """``with Progress("analysis") as p: p.phase("reading"); p.log("..."); p.advance()``."""

    def __init__(
        self,
        title: str,
        *,
        stream: IO[str] | None = None,
        live: bool | None = None,
        heartbeat: float = HEARTBEAT,
    ) -> None:
        self.title = title
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.heartbeat = heartbeat
        self.started = time.monotonic()
        self._phase = ""
        self._phase_started = self.started
        self._last_line = self.started
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._rich: Any = None
        self._task: Any = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> Progress:
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, SpinnerColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress

            self._rich = RichProgress(
                SpinnerColumn(),
                TextColumn("[bold]{task.fields[title]}[/bold]: {task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            self._rich.start()
            self._task = self._rich.add_task("starting", total=None, title=self.title)
        else:
            self._thread = threading.Thread(target=self._beat, name="progress", daemon=True)
            self._thread.start()
        return self

    def close(self, final: str | None = None) -> None:
        """Stop the live line or the heartbeat; `final` is printed as a last line."""
        self._stop.set()
        if self._rich is not None:
            self._rich.stop()
            self._rich = None
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None
        if final:
            self._line(final)

    # ------------------------------------------------------------------ reporting
    def phase(self, text: str, total: float | None = None) -> None:
        """A new phase; `total` gives it a bar (then `advance` moves it)."""
        with self._lock:
            self._phase = text
            self._phase_started = time.monotonic()
        if self._rich is not None:
            self._rich.reset(self._task, total=total, description=text, title=self.title)
        else:
            self._line(text)

    def advance(self, amount: float = 1.0) -> None:
        if self._rich is not None:
            self._rich.advance(self._task, amount)

    def log(self, text: str) -> None:
        """A line of the command's own output (above the live line on a terminal)."""
        if self._rich is not None:
            self._rich.console.print(text, markup=False, highlight=False)
        else:
            self._line(text, stamp=False)

    # ------------------------------------------------------------------ plain lines
    def _line(self, text: str, stamp: bool = True) -> None:
        now = time.monotonic()
        prefix = f"[{now - self.started:7.1f} s] " if stamp else ""
        with self._lock:
            self._last_line = now
        try:
            self.stream.write(prefix + text + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # stderr went away: progress is not worth a failure
            pass

    def _beat(self) -> None:
        while not self._stop.wait(min(HEARTBEAT_TICK, self.heartbeat)):
            with self._lock:
                phase, since, last = self._phase, self._phase_started, self._last_line
            now = time.monotonic()
            if phase and now - last >= self.heartbeat:
                self._line(f"... still {phase} ({now - since:.0f} s)")
