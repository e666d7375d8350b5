"""`pubsub experiment`: scenario validation, the runner's bookkeeping, and shipped scenarios
played for real (local processes, event stream, PySpark analysis, report)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pubsub.ops.experiment.records import MarkerRecord, StatusCheck
from pubsub.ops.experiment.results import compare, move_leftovers, status_convergence
from pubsub.ops.experiment.scenario import (
    ScenarioError,
    load_scenario,
    resolve_scenario,
    shipped_scenarios,
)
from pubsub.ops.processes import terminate

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    return path


BASE = "name: t\nnodes: 3\ntopics: {news: 2}\n"


def test_shipped_scenarios_are_the_three_promised_and_valid() -> None:
    shipped = shipped_scenarios()
    assert set(shipped) == {"steady-churn", "mass-crash", "corruption"}
    actions = {name: {s.action for s in load_scenario(p).steps} for name, p in shipped.items()}
    assert {"join", "leave", "publish"} <= actions["steady-churn"]
    assert "crash" in actions["mass-crash"]
    assert {"corrupt_node", "corrupt_supervisor"} <= actions["corruption"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: t\nnodes: 3\n", "topics"),
        (BASE + "steps: [{at: 1, action: explode}]", "steps.0.action"),
        (BASE + "steps: [{at: 1, action: join, topic: other}]", "not in topics"),
        (BASE + "steps: [{at: 1, action: crash, nodes: [7]}]", "node 7 does not exist"),
        (BASE + "steps: [{at: 2, action: crash}, {at: 1, action: crash}]", "order"),
        (BASE + "steps: [{at: 1, action: drop, duration: 2}]", "fraction"),
        (BASE + "steps: [{at: 1, action: partition}]", "duration"),
        (BASE + "steps: [{at: 1, action: publish}]", "needs a topic"),
        ("name: t\nnodes: 2\ntopics: {news: 5}\n", "5 initial members"),
        ("name: t\nnodes: 0\ntopics: {news: 0}\n", "nodes"),
        ("- just a list", "mapping"),
        ("name: [unclosed", "not valid YAML"),
        (BASE + "surprise: 1", "surprise"),
    ],
)
def test_bad_scenarios_are_refused_with_the_reason(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        load_scenario(write(tmp_path, text))


def test_unknown_scenario_name_lists_the_shipped_ones() -> None:
    with pytest.raises(ScenarioError, match="mass-crash"):
        resolve_scenario("no-such-scenario")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a step's key indented one space too little
        (BASE + "steps:\n  - at: 1\n    action: join\n   topic: news\n",
         "s.yaml is not valid YAML (line 7, column 4): expected <block end>, but found '<block mapping start>'"),
        (BASE + "steps: [{at: 1, action: explode}]", "s.yaml: steps.0.action: "),
    ],
)
def test_run_with_a_scenario_that_does_not_load_is_one_line_and_exit_2(
    tmp_path: Path, text: str, expected: str
) -> None:
    """Bad usage, as the README's exit codes say; YAML errors used to be several lines of
    PyYAML's text (exit 1).  Nothing is started, the run directory is not created."""
    done = subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", "experiment", "run", str(write(tmp_path, text)),
         "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and expected in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()


def test_status_convergence_needs_a_stable_legitimate_stretch() -> None:
    marker = MarkerRecord("m1", "crash", 10.0, ["a"], "news")
    verdicts = [
        (10.2, False),
        (10.6, True),
        (11.0, False),
        (11.4, True),
        (11.8, True),
        (12.2, True),
    ]
    checks = [StatusCheck(ts, "news", ok, 3) for ts, ok in verdicts]
    [row] = status_convergence([marker], checks, ["news"], stable=0.5)
    assert row["time_to_legitimacy"] == pytest.approx(1.4)  # 10.6 flips back at 11.0
    never = status_convergence([marker], [StatusCheck(10.5, "news", False, 3)], ["news"])
    assert never[0]["time_to_legitimacy"] is None


def test_a_marker_without_topic_is_measured_on_every_topic() -> None:
    marker = MarkerRecord("m", "crash", 0.0, [], None)
    checks = [StatusCheck(1.0, "a", True, 2), StatusCheck(2.0, "b", True, 2)]
    rows = status_convergence([marker], checks, ["a", "b"], stable=0.0)
    assert {r["topic"]: r["time_to_legitimacy"] for r in rows} == {"a": 1.0, "b": 2.0}


def test_compare_flags_disagreement_beyond_the_tolerance() -> None:
    record = {
        "status_convergence": [
            {"marker_id": "x", "topic": "news", "time_to_legitimacy": 1.0},
            {"marker_id": "y", "topic": "news", "time_to_legitimacy": 1.0},
            {"marker_id": "z", "topic": "news", "time_to_legitimacy": None},
        ]
    }
    summary = {
        "topics": {
            "news": {
                "convergence": [
                    {
                        "marker_id": "x",
                        "action": "crash",
                        "reached": True,
                        "time_to_legitimacy": 1.3,
                    },
                    {
                        "marker_id": "y",
                        "action": "crash",
                        "reached": True,
                        "time_to_legitimacy": 4.0,
                    },
                    {
                        "marker_id": "z",
                        "action": "crash",
                        "reached": False,
                        "time_to_legitimacy": None,
                    },
                ]
            }
        }
    }
    rows = {r["marker_id"]: r["agree"] for r in compare(record, summary, tolerance=0.5)}
    assert rows == {"x": True, "y": False, "z": True}


def test_leftover_files_of_crashed_daemons_are_moved_into_place(tmp_path: Path) -> None:
    (tmp_path / ".inprogress").mkdir()
    (tmp_path / ".inprogress" / "node-a-1-000003.jsonl").write_text('{"kind": "marker"}\n')
    (tmp_path / ".inprogress" / "node-b-2-000000.jsonl").write_text("")
    assert move_leftovers(tmp_path) == 1
    assert (tmp_path / "node-a-1-000003.jsonl").exists()
    assert not list((tmp_path / ".inprogress").iterdir())


def _pids(run_dir: Path) -> list[int]:
    pids = json.loads((run_dir / "experiment.json").read_text())["pids"]
    assert pids, "the runner recorded no processes"
    return [int(p) for p in pids]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purposes
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def play(name: str, run_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", "experiment", "run", name, "--out", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=900,
    )


def check_run(run_dir: Path, done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((run_dir / "analysis" / "summary.json").read_text())
    comparison = json.loads((run_dir / "comparison.json").read_text())
    assert comparison, "no marker was measured"
    for row in comparison:
        assert row["analysis"] is not None and row["status"] is not None, row
        assert row["agree"], row
    for topic, data in summary["topics"].items():
        for conv in data["convergence"]:
            assert conv["reached"], (topic, conv)
    plots = list((run_dir / "analysis" / "plots").glob("*.png"))
    assert len(plots) >= 3
    for plot in plots:
        data = plot.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 2000, plot
    assert "<img" in (run_dir / "analysis" / "report.html").read_text()
    assert not [pid for pid in _pids(run_dir) if _alive(pid)], "a daemon outlived the run"


def check_output(run_dir: Path, done: subprocess.CompletedProcess[str]) -> None:
    """What the command prints: stdout is the table, the analysis' line per topic and the
    report's path, once; stderr has phases on the run's clock, steps on the script's, and
    none of Spark's own chatter about its log level."""
    out = done.stdout.splitlines()
    reports = [line for line in out if line.startswith("report: ")]
    assert reports == [f"report: {(run_dir / 'analysis' / 'report.html').resolve()}"], done.stdout
    assert out[0] == "time to legitimacy after each step of the script:" and out[-1] == reports[0], done.stdout
    summary = json.loads((run_dir / "analysis" / "summary.json").read_text())
    for topic in summary["topics"]:
        assert any(line.startswith(f"{topic}: ") and "legitimate" in line for line in out), done.stdout
    err = done.stderr.splitlines()
    assert not [line for line in err if "default log level" in line or "setLogLevel" in line], done.stderr
    assert any(re.match(r"^\[\s*\d+\.\d s\] playing the script", line) for line in err), done.stderr
    steps = [line for line in err if line.startswith("  script ")]
    assert any(re.match(r"^  script\s+\d+\.\d / \d+ s: crash: ", line) for line in steps), done.stderr
    # one start line (a "... still starting" line may follow on a loaded machine, after 10 s)
    assert sum(bool(re.match(r"^\[\s*\d+\.\d s\] starting a supervisor", line)) for line in err) == 1, done.stderr


@pytest.mark.integration
def test_mass_crash_scenario_end_to_end(tmp_path: Path) -> None:
    """One command: cluster, crash of a third, restart, analysis, report; times agree."""
    run_dir = tmp_path / "run"
    done = play("mass-crash", run_dir)
    check_run(run_dir, done)
    check_output(run_dir, done)


@pytest.mark.integration
def test_sigterm_stops_the_experiments_cluster_as_ctrl_c_does(tmp_path: Path) -> None:
    """`pubsub experiment run` ended by SIGTERM (a `timeout`, CI, a service manager) stops
    every daemon it started before it exits 143; none is left to init."""
    scenario = write(tmp_path, BASE + "steps: [{at: 60, action: publish, topic: news, count: 1}]\n")
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pubsub.cli.main", "experiment", "run", str(scenario), "--out", str(run_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )
    pids: list[int] = []
    try:
        assert proc.stderr is not None
        for _ in range(50):  # bounded: a handful of lines come before the script plays
            line = proc.stderr.readline()
            if not line or "playing the script" in line:
                break
        assert "playing the script" in line, line
        manifest = json.loads((run_dir / "cluster" / "cluster.json").read_text())
        pids = [int(d["pid"]) for d in [*manifest["supervisors"], *manifest["nodes"]]]
        assert len(pids) == 4 and all(_alive(pid) for pid in pids)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        terminate(proc)
        for pid in pids:  # never leave one behind, even when the test fails
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "stopping every process" in err
    assert not [pid for pid in pids if _alive(pid)], "a daemon outlived the experiment"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["steady-churn", "corruption"])
def test_other_shipped_scenarios_end_to_end(tmp_path: Path, name: str) -> None:
    run_dir = tmp_path / "run"
    check_run(run_dir, play(name, run_dir))
