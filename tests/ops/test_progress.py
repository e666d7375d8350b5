"""The plain progress lines of long commands (`pubsub.ops.progress.Progress` off a terminal)."""

from __future__ import annotations

import io
import re
import time
from collections.abc import Callable

from pubsub.ops.progress import Progress

STAMP = re.compile(r"^\[\s*\d+\.\d s\] ")


def _wait_for(predicate: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_a_silent_phase_gets_a_still_line_naming_it() -> None:
    out = io.StringIO()
    with Progress("t", stream=out, live=False, heartbeat=0.2) as progress:
        progress.phase("reading the files")
        assert _wait_for(lambda: "... still reading the files" in out.getvalue(), 5.0), out.getvalue()
    lines = out.getvalue().splitlines()
    assert STAMP.match(lines[0]) and lines[0].endswith("reading the files")
    still = [line for line in lines if "... still" in line]
    assert still and all(STAMP.match(line) for line in still)


def test_no_still_line_while_the_command_keeps_reporting() -> None:
    """Lines of the command's own (steps, states) count as signs of life: the heartbeat
    speaks only after `heartbeat` seconds without any line."""
    out = io.StringIO()
    with Progress("t", stream=out, live=False, heartbeat=0.5) as progress:
        progress.phase("playing the script")
        for step in range(12):  # a line every 0.1 s for 1.2 s, more than two heartbeats
            progress.log(f"step {step}")
            time.sleep(0.1)
        progress.phase("stopping")
    assert "... still" not in out.getvalue(), out.getvalue()


def test_a_new_phase_restarts_the_silence() -> None:
    """A phase that has just begun is not reported as 'still' going on within the heartbeat."""
    out = io.StringIO()
    with Progress("t", stream=out, live=False, heartbeat=0.6) as progress:
        progress.phase("first")
        assert _wait_for(lambda: "... still first" in out.getvalue(), 5.0)
        progress.phase("second")
        began = time.monotonic()
        assert _wait_for(lambda: "... still second" in out.getvalue(), 5.0)
        waited = time.monotonic() - began
    assert waited >= 0.6 - 0.05, waited
