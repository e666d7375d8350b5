"""Live mode: `pubsub analyze --stream` started before the events exist keeps its outputs
current while event files arrive, then stops by itself once idle.

A real subprocess (its own local Spark); the test writes the hand-built events of
tests/analysis_events.py in two steps, renaming whole files into place as the daemons do,
and watches summary.json and the convergence table change between the steps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pubsub.ops.analysis.output import read_table
from tests import analysis_events as ev

#: Bounds for each wait (a loaded 2-core machine starts a JVM slowly).
STEP_TIMEOUT = 300.0
UNTIL_IDLE = 10.0


def _wait_for(what: str, check: Callable[[], Any], proc: subprocess.Popen[bytes], log: Path) -> Any:
    deadline = time.monotonic() + STEP_TIMEOUT
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if proc.poll() is not None:
            raise AssertionError(
                f"analyze exited ({proc.returncode}) before {what}:\n{log.read_text()[-3000:]}"
            )
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-3000:]}")


def _summary(out: Path) -> dict[str, Any] | None:
    try:
        return json.loads((out / "summary.json").read_text())
    except FileNotFoundError:
        return None


def _seen(out: Path, count: int) -> dict[str, Any] | None:
    summary = _summary(out)
    if summary is not None and summary["input"]["events_used"] == count:
        return summary
    return None


def _convergence(summary: dict[str, Any], topic: str) -> dict[str, dict[str, Any]]:
    return {c["marker_id"]: c for c in summary["topics"][topic]["convergence"]}


def test_live_analysis_updates_while_events_arrive_and_stops_when_idle(tmp_path: Path) -> None:
    events, out, log = tmp_path / "events", tmp_path / "analysis", tmp_path / "analyze.log"
    everything = ev.events()
    # step 1: up to the corruption of n2 (ts <= 2.05); step 2: the repair and the rest
    cut = ev.BASE + 2.05
    first = [e for e in everything if e["ts"] <= cut]
    second = [e for e in everything if e["ts"] > cut]
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pubsub.cli.main",
                "analyze",
                str(tmp_path),
                "--stream",
                "--out",
                str(out),
                "--until-idle",
                str(UNTIL_IDLE),
                "--trigger",
                "0.5",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        ev.write_events(events, first, "step1")
        live = _wait_for("the first step's summary", lambda: _seen(out, len(first)), proc, log)
        assert live["final"] is False
        news = live["topics"][ev.TOPIC]
        assert news["legitimate_at_end"] is False  # n2 is corrupted at the end of step 1
        conv = _convergence(live, ev.TOPIC)
        assert conv["start"]["time_to_legitimacy"] == pytest.approx(0.3)
        assert conv["corrupt-1"]["reached"] is False
        rows = [
            r
            for r in read_table(out / "tables" / "convergence_timeline.parquet")
            if r["topic"] == ev.TOPIC
        ]
        assert [r["legitimate"] for r in rows] == ev.NEWS_LEGIT_BY_BUCKET[: len(rows)]
        assert rows[-1]["legitimate"] is False
        assert (out / "report.html").read_text().count("not reached") >= 1

        ev.write_events(events, second, "step2")
        later = _wait_for(
            "the second step's summary", lambda: _seen(out, len(everything)), proc, log
        )
        conv = _convergence(later, ev.TOPIC)
        assert conv["corrupt-1"]["time_to_legitimacy"] == pytest.approx(1.5)
        assert conv["crash-1"]["time_to_legitimacy"] == pytest.approx(1.1)
        rows = [
            r
            for r in read_table(out / "tables" / "convergence_timeline.parquet")
            if r["topic"] == ev.TOPIC
        ]
        assert [r["legitimate"] for r in rows] == ev.NEWS_LEGIT_BY_BUCKET

        # no new files for --until-idle seconds: it writes the final report and exits 0
        code = proc.wait(timeout=STEP_TIMEOUT)
        assert code == 0, log.read_text()[-3000:]
        final = _summary(out)
        assert final is not None and final["final"] is True
        assert final["batches"] >= 2
        assert {
            k: c["time_to_legitimacy"] for k, c in _convergence(final, ev.TOPIC).items()
        } == pytest.approx({"start": 0.3, "corrupt-1": 1.5, "crash-1": 1.1})
        assert "report:" in log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@pytest.mark.slow
def test_spark_submit_script_runs_the_job_with_the_package_as_py_files(tmp_path: Path) -> None:
    """deploy/spark-submit.sh: the same job through spark-submit (local[2]), known answers."""
    ev.write_events(tmp_path / "events", ev.events(), "all")
    script = Path(__file__).resolve().parents[2] / "deploy" / "spark-submit.sh"
    env = os.environ | {"PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(script), str(tmp_path), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        start_new_session=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = _summary(tmp_path / "out")
    assert summary is not None and summary["final"] is True
    times = {
        (t, c["marker_id"]): c["time_to_legitimacy"]
        for t, data in summary["topics"].items()
        for c in data["convergence"]
    }
    assert times == pytest.approx(ev.CONVERGENCE)
