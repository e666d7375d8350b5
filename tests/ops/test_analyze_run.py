"""`pubsub analyze` and `pubsub experiment run` on events written by real processes.

One run, shared by the module (tests/conftest.py keeps the module on one worker): a
supervisor and three nodes started as the README's fault-injection example starts them,
with ``--events-dir RUN`` (the event files land in RUN itself, not in RUN/events); a
`pubsub chaos drop` injection; ten publications; a node that joins three seconds later
and receives them as history; five more publications.  Then `pubsub analyze RUN` runs as
its own process with stderr read line by line as it comes.

Each test fails on the code before this work: `analyze RUN` said "no events directory";
it printed nothing while Spark ran (a minute and more on a loaded machine); and its
latency table put the history copied to the late joiner (seconds old) in the same rows as
the live deliveries (milliseconds).  The last test plays a tiny scenario with
`pubsub experiment run`, which used to be silent for the whole analysis.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.progress import HEARTBEAT

pytestmark = pytest.mark.integration

#: Seconds `pubsub analyze` may take on a saturated 2-core machine.
ANALYZE_TIMEOUT = 600.0
#: The longest silence allowed on stderr: the heartbeat plus scheduling slack.
MAX_SILENCE = HEARTBEAT + 6.0
HISTORY_AGE = 3.0


def timed_lines(command: list[str], timeout: float) -> tuple[int, list[tuple[float, str]], str, float]:
    """Run `command`; (exit code, [(seconds since start, line)] of stderr and stdout as they
    came, stdout alone, total seconds)."""
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[tuple[float, str]] = []
    out: list[str] = []

    def read_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((time.monotonic() - started, line.rstrip("\n")))

    def read_out() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.append(line)
            lines.append((time.monotonic() - started, line.rstrip("\n")))

    readers = [threading.Thread(target=read_err), threading.Thread(target=read_out)]
    for reader in readers:
        reader.start()
    try:
        code = proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for reader in readers:
            reader.join(timeout=10)
    return code, lines, "".join(out), time.monotonic() - started


def longest_silence(lines: list[tuple[float, str]], total: float) -> float:
    stamps = [0.0, *sorted(t for t, _ in lines), total]
    return max(b - a for a, b in zip(stamps, stamps[1:], strict=False))


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("analyze-run")
    run = base / "run"
    with LocalCluster(base / "cluster", 3, interval=0.2, events_dir=run) as c:
        c.subscribe(0, "news")
        c.subscribe(1, "news")
        c.poll(lambda: [] if len(c.supervisor_status()["topics"].get("news", {}).get("members", [])) == 2
               else ["two members"], 60, "two members of news")
        drop = subprocess.run(
            [sys.executable, "-m", "pubsub.cli.main", "chaos", "drop", "--admin", c.admin_ref(1),
             "--fraction", "0.2", "--duration", "0.5"],
            capture_output=True, text=True, timeout=60,
        )
        assert drop.returncode == 0, drop.stderr
        for i in range(10):
            c.publish(0, "news", f"early-{i}")
        time.sleep(HISTORY_AGE)  # the early publications grow old before node 2 joins
        c.subscribe(2, "news")

        def missing(count: int) -> list[str]:
            held = [c.node_status(i)["topics"].get("news", {}).get("publications", {}).get("count", 0) for i in range(3)]
            return [f"node {i} holds {n}" for i, n in enumerate(held) if n < count]

        c.poll(lambda: missing(10), 120, "the late joiner to receive the history")
        for i in range(5):
            c.publish(0, "news", f"late-{i}")
        c.poll(lambda: missing(15), 120, "every node to hold all 15")
    assert not (run / "events").exists() and any(run.glob("*.jsonl"))
    # two unusable lines among the daemons' files: skipped, and said so on stderr
    (run / "zz-garbage-000000.jsonl").write_text('not json\n{"kind": "snapshot"\n', encoding="utf-8")
    code, lines, out, total = timed_lines(
        [sys.executable, "-m", "pubsub.cli.main", "analyze", str(run)], ANALYZE_TIMEOUT
    )
    summary_path = run / "analysis" / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    yield {"run": run, "code": code, "lines": lines, "stdout": out, "total": total, "summary": summary}


def test_analyze_reads_the_directory_the_daemons_wrote_into(analysed: dict[str, Any]) -> None:
    err = "\n".join(line for _, line in analysed["lines"])
    assert analysed["code"] == 0, err[-3000:]
    assert f"{analysed['run']} holds the event files itself: reading them there" in err
    summary = analysed["summary"]
    assert summary["final"] is True and summary["input"]["events_used"] > 100
    assert {m["action"] for m in summary["markers"]} >= {"drop", "heal"}
    assert summary["topics"]["news"]["members_at_end"] == 3
    assert "report:" in analysed["stdout"]
    assert "warning: unusable input lines were skipped: malformed 2" in err
    [news] = [line for line in analysed["stdout"].splitlines() if line.startswith("news: ")]
    assert news.startswith("news: 3 members, legitimate ") and "; convergence after markers: " in news, news
    assert " drop " in news and " heal " in news, news  # each time named by its marker's action


def test_analyze_refuses_a_directory_without_events_before_starting_spark(tmp_path: Path) -> None:
    """An events directory without a non-empty event file: one line and exit 1 at once,
    not an empty report after Spark's start (the all-unusable case: test_analysis)."""
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "x-000000.jsonl").write_text("", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", "analyze", str(tmp_path)],
        capture_output=True, text=True, timeout=ANALYZE_TIMEOUT,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr == (
        f"Error: nothing to analyse in {tmp_path / 'events'}: no event file (*.jsonl) with anything in it; "
        "use --stream to wait for a run that has not started yet\n"
    )
    assert not (tmp_path / "analysis" / "report.html").exists()


def test_analyze_shows_progress_while_spark_runs(analysed: dict[str, Any]) -> None:
    lines = analysed["lines"]
    text = [line for _, line in lines]
    for phase in ("checking Java and starting Spark", "reading the event files in",
                  "computing legitimacy, convergence times, latencies and rates",
                  "writing the tables, plots and report", "done in"):
        assert any(phase in line for line in text), (phase, text)
    silence = longest_silence(lines, analysed["total"])
    assert silence <= MAX_SILENCE, f"stderr was silent for {silence:.1f} s: {lines}"


def test_history_copied_to_the_late_joiner_is_apart_from_live_deliveries(analysed: dict[str, Any]) -> None:
    news = analysed["summary"]["topics"]["news"]
    live, history = news["latency"], news["latency_history"]
    assert history["all"]["count"] == 10, history  # node 2's copies of the early ten
    assert history["all"]["p50"] >= HISTORY_AGE
    # live: 10 x 2 early deliveries + 5 x 3 late ones
    assert live["all"]["count"] == 10 * 2 + 5 * 3, live
    assert live["all"]["max"] < HISTORY_AGE, live


SCENARIO = """\
name: tiny
description: three nodes, a late joiner, a few publications
nodes: 3
interval: 0.2
seed: 1
topics:
  news: 2
settle: 30
steps:
  - {at: 1, action: publish, topic: news, count: 5, rate: 20}
  - {at: 5, action: join, topic: news, nodes: [2]}
  - {at: 8, action: publish, topic: news, count: 3, rate: 20}
"""


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`pubsub experiment run` of a tiny scenario (a late joiner included), its stderr
    read line by line as it comes."""
    base = tmp_path_factory.mktemp("experiment")
    (base / "tiny.yaml").write_text(SCENARIO)
    code, lines, out, total = timed_lines(
        [sys.executable, "-m", "pubsub.cli.main", "experiment", "run", str(base / "tiny.yaml"),
         "--out", str(base / "run")],
        ANALYZE_TIMEOUT + 300,
    )
    summary_path = base / "run" / "analysis" / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    return {"code": code, "lines": lines, "stdout": out, "total": total, "summary": summary, "run": base / "run"}


def test_experiment_run_is_never_silent_for_long(experiment: dict[str, Any]) -> None:
    lines, total = experiment["lines"], experiment["total"]
    text = "\n".join(line for _, line in lines)
    silence = longest_silence(lines, total)
    assert silence <= MAX_SILENCE, f"silent for {silence:.1f} s:\n{text}"
    assert experiment["code"] == 0, text[-3000:] + experiment["stdout"][-2000:]
    assert "playing the script" in text and "computing legitimacy" in text
    assert "time to legitimacy after each step of the script" in experiment["stdout"]


def test_experiment_latency_keeps_the_late_joiners_history_apart(experiment: dict[str, Any]) -> None:
    news = experiment["summary"]["topics"]["news"]
    rows = news["latency"]
    assert "latency_history" in news, f"one latency table for everything: {rows}"
    assert news["latency_history"]["all"]["count"] == 5  # node 2's copies of the first five
    assert rows["all"]["count"] == 5 * 2 + 3 * 3  # the first five at nodes 0, 1; the last three everywhere
    from pubsub.ops.analysis.output import read_table

    table = read_table(experiment["run"] / "analysis" / "tables" / "latency_quantiles.parquet")
    both = {r["delivery"]: r for r in table if r["topic"] == "news" and r["via"] == "all"}
    assert both["history"]["min"] > both["live"]["max"]  # every copy older than any live delivery
