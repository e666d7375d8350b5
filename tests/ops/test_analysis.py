"""The convergence analysis: the ideal ring and legitimacy against the oracle (pure Python),
and the PySpark job on a hand-built event stream with known answers (a real local Spark
session, one for the whole module: tests/conftest.py keeps this module on one worker).

The Spark part costs one JVM start plus two short runs: about half a minute on a lightly
loaded 2-core machine, a few minutes when it is saturated.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pubsub.ops.analysis.javacheck import parse_version
from pubsub.ops.analysis.output import read_table
from pubsub.ops.analysis.timeline import (
    SNAPSHOT_FIELDS,
    Grid,
    analyse_topic,
    changes_from_records,
    markers_from_rows,
)
from pubsub.skipring.ideal import NodeView, edge_score, ideal_ring, is_canonical, is_legitimate
from pubsub.skipring.labels import label_bits
from tests import analysis_events as ev
from tests import checker

STABLE = 0.5


# ---------------------------------------------------------------------------------- helpers
def views_of(reported: dict[str, dict[str, Any]], root: str = "r") -> dict[str, NodeView]:
    return {
        ref: NodeView.from_report(
            ref, s["label"], s["left"], s["right"], s["ring"], s["shortcuts"], root
        )
        for ref, s in reported.items()
    }


def as_checker_state(node: Any) -> dict[str, Any]:
    return {
        "label": node.label,
        "left": node.left,
        "right": node.right,
        "ring": node.ring,
        "shortcuts": dict(node.shortcuts),
    }


def assert_same_ideal(members: dict[str, str]) -> None:
    want = checker.ideal_skip_ring(members)
    got = ideal_ring(members)
    assert set(got) == set(want)
    for ref in members:
        assert as_checker_state(got[ref]) == want[ref], (len(members), ref)


def snapshot_records(rows: list[dict[str, Any]], topic: str) -> list[tuple[Any, ...]]:
    """The topic's snapshot events as the Spark job hands them to a worker."""
    return [
        (r["ts"], r["source"], r["member"], *(r.get(name) for name in SNAPSHOT_FIELDS))
        for r in rows
        if r["kind"] == "snapshot" and r["topic"] == topic
    ]


def scenario_topic(topic: str, stable: float = STABLE) -> dict[str, Any]:
    """The pure per-topic analysis of the hand-built scenario (what a Spark worker runs)."""
    rows = ev.events()
    records = snapshot_records(rows, topic)
    markers = markers_from_rows(r for r in rows if r["kind"] == "marker")
    lo = min(r["ts"] for r in rows)
    hi = max(r["ts"] for r in rows)
    return analyse_topic(
        topic, changes_from_records(records), markers, [], Grid(lo, hi, 0.5), stable
    )


# ------------------------------------------------------------------ ideal ring (pure Python)
@pytest.mark.parametrize("n", range(1, 41))
def test_ideal_ring_equals_the_oracle_and_is_legitimate(n: int) -> None:
    members = checker.sr_members(n)
    assert_same_ideal(members)
    reported = checker.to_reported(checker.ideal_skip_ring(members))
    views = views_of(reported)
    assert is_legitimate(views)
    ideal = ideal_ring(members)
    for ref, view in views.items():
        correct, compared = edge_score(ideal[ref], view)
        assert correct == compared
        assert view.neighbours() == ideal[ref].neighbours() - {ref}


def test_ideal_ring_equals_the_oracle_on_arbitrary_distinct_labels() -> None:
    rng = random.Random(5)
    for _ in range(200):
        n = rng.randint(1, 30)
        labels: set[str] = set()
        while len(labels) < n:
            labels.add("".join(rng.choice("01") for _ in range(rng.randint(1, 7))))
        members = {f"10.0.0.1:{1000 + i}": bits for i, bits in enumerate(sorted(labels))}
        assert_same_ideal(members)
        # a non-canonical label set is never legitimate, even with ideal edges
        reported = checker.to_reported(checker.ideal_skip_ring(members))
        assert is_legitimate(views_of(reported)) == (not checker.canonical_label_problems(members))


def _perturbations(state: dict[str, Any], others: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """Single faults in one node's reported state."""
    out: list[tuple[str, dict[str, Any]]] = []
    stranger = "10.9.9.9:1"
    for key in ("left", "right", "ring"):
        if state[key] is None:
            out.append((f"{key} set", state | {key: ["0", others[0]]}))
        else:
            out.append((f"{key} dropped", state | {key: None}))
            out.append((f"{key} wrong ref", state | {key: [state[key][0], stranger]}))
            out.append((f"{key} stale label", state | {key: [state[key][0] + "1", state[key][1]]}))
    for bits in state["shortcuts"]:
        table = dict(state["shortcuts"])
        table[bits] = None
        out.append((f"shortcut {bits} unknown", state | {"shortcuts": table}))
        out.append(
            (
                f"shortcut {bits} dropped",
                state | {"shortcuts": {k: v for k, v in table.items() if k != bits}},
            )
        )
    out.append(
        ("extra shortcut", state | {"shortcuts": dict(state["shortcuts"]) | {"0101": others[0]}})
    )
    out.append(("label lost", state | {"label": None}))
    return out


@pytest.mark.parametrize("n", range(1, 41))
def test_every_single_fault_breaks_legitimacy_as_the_oracle_says(n: int) -> None:
    members = checker.sr_members(n)
    reported = checker.to_reported(checker.ideal_skip_ring(members))
    ideal = ideal_ring(members)
    rng = random.Random(n)
    ref = rng.choice(sorted(members))
    others = [r for r in sorted(members) if r != ref] or [ref]
    for what, bad in _perturbations(reported[ref], others):
        states = reported | {ref: bad}
        assert checker.compare(members, states), what  # the oracle sees a difference ...
        labels = {r: s["label"] for r, s in states.items() if s["label"] is not None}
        views = views_of(states)
        assert not is_legitimate(views), what  # ... and so does the analysis
        if bad["label"] is not None:
            correct, compared = edge_score(ideal_ring(labels).get(ref), views[ref])
            assert correct < compared, what
    # a differing trie root alone breaks legitimacy (for n >= 2)
    views = views_of(reported)
    views[ref] = dataclasses.replace(views[ref], trie_root="other")
    assert is_legitimate(views) == (n == 1)
    assert ideal[ref].label == members[ref]


def test_canonical_labels_are_exactly_l_of_0_to_n_minus_1() -> None:
    assert is_canonical([])
    assert is_canonical(["0"]) and not is_canonical(["1"])
    assert is_canonical([label_bits(x) for x in range(9)][::-1])
    assert not is_canonical(["0", "1", "01", "01"])
    assert not is_canonical(["0", "1", None])


# --------------------------------------------------------------- the scan (pure Python)
def test_scan_gives_the_known_legitimacy_and_convergence_times() -> None:
    news = scenario_topic(ev.TOPIC)
    assert [r["legitimate"] for r in news["timeline"]] == ev.NEWS_LEGIT_BY_BUCKET
    times = {(c["topic"], c["marker_id"]): c["time_to_legitimacy"] for c in news["convergence"]}
    assert times == pytest.approx({k: v for k, v in ev.CONVERGENCE.items() if k[0] == ev.TOPIC})
    # the exact step function: legitimate runs
    runs = news["summary"]["legitimate_runs"]
    assert [x for run in runs for x in run] == pytest.approx([0.3, 2.05, 3.5, 4.5, 5.6, 6.0])


def test_without_a_stability_window_the_first_legitimate_instant_counts() -> None:
    news = scenario_topic(ev.TOPIC, stable=0.0)
    times = {c["marker_id"]: c["time_to_legitimacy"] for c in news["convergence"]}
    # corrupt-1 is written 0.05 s before its effect shows: literally converged at once
    assert times == pytest.approx({"start": 0.3, "corrupt-1": 0.0, "crash-1": 1.1})


def test_a_marker_that_is_never_followed_by_legitimacy_is_not_reached() -> None:
    rows = [r for r in ev.events() if not (r["kind"] == "snapshot" and r["ts"] >= ev.BASE + 3.0)]
    records = snapshot_records(rows, ev.TOPIC)
    markers = markers_from_rows(r for r in rows if r["kind"] == "marker")
    out = analyse_topic(
        ev.TOPIC,
        changes_from_records(records),
        markers,
        [],
        Grid(ev.BASE, ev.BASE + 6.0, 0.5),
        STABLE,
    )
    reached = {c["marker_id"]: c["reached"] for c in out["convergence"]}
    assert reached == {"start": True, "corrupt-1": False, "crash-1": False}
    assert out["summary"]["legitimate_at_end"] is False


def test_java_versions_are_parsed() -> None:
    assert parse_version('openjdk version "17.0.15" 2025-04-15') == (17, "17.0.15")
    assert parse_version('java version "1.8.0_351"') == (8, "1.8.0_351")
    assert parse_version('openjdk version "21" 2023-09-19') == (21, "21")
    assert parse_version("command not found") is None


# ------------------------------------------------------------------- the CLI's bad inputs
def _pubsub(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_analyze_rejects_a_missing_events_directory_and_bad_flags(tmp_path: Path) -> None:
    done = _pubsub("analyze", str(tmp_path / "nothing"))
    assert done.returncode == 1
    assert "no events directory" in done.stderr and "Traceback" not in done.stderr
    done = _pubsub("analyze", str(tmp_path), "--bucket", "0")
    assert done.returncode == 2 and "positive" in done.stderr


def test_analyze_fails_early_without_a_recent_java(tmp_path: Path) -> None:
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "x-000000.jsonl").write_text('{"kind": "marker"}\n')  # something to analyse
    fake = tmp_path / "oldjava"
    fake.mkdir()
    (fake / "java").write_text("#!/bin/sh\necho 'java version \"1.8.0_351\"' >&2\n")
    (fake / "java").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"} | {"PATH": str(fake)}
    done = _pubsub("analyze", str(tmp_path), env=env)
    assert done.returncode == 1
    assert "Java 17+" in done.stderr and "1.8.0_351" in done.stderr
    assert "Traceback" not in done.stderr


# ------------------------------------------------------------- the Spark job, batch mode
@pytest.fixture(scope="module")
def spark() -> Any:
    """One local Spark session for every Spark test (they all live in this module, which
    conftest keeps on one xdist worker); module scope stops the JVM as soon as the module
    is done instead of keeping it for the rest of the worker's tests."""
    from pubsub.ops.analysis.session import create_session

    session = create_session()
    yield session
    session.stop()


def test_the_session_we_start_compiles_with_c1_and_logs_quietly(spark: Any) -> None:
    """The driver JVM runs with the quick JIT (`pubsub.ops.analysis.session`, about a fifth
    off an analysis) and the log configuration."""
    from pubsub.ops.analysis.session import QUICK_JIT

    arguments = list(spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert QUICK_JIT in arguments, arguments
    assert any(a.startswith("-Dlog4j2.configurationFile=") for a in arguments), arguments


@pytest.fixture(scope="module")
def batch_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The job, in batch mode, over the hand-built events plus a few unusable lines."""
    from pubsub.ops.analysis.job import Options
    from pubsub.ops.analysis.live import run_analysis

    run = tmp_path_factory.mktemp("run")
    ev.write_events(run / "events", ev.events(), "all", ev.BAD_LINES)
    (run / "events" / ".inprogress").mkdir()  # unfinished files are never read
    (run / "events" / ".inprogress" / "node-x.jsonl").write_text("half a line")
    (run / "events" / "notes.txt").write_text("not an event file\n")
    opts = Options(
        run_dir=run, out=run / "analysis", events_dir=run / "events", bucket=0.5, stable=STABLE
    )
    run_analysis(spark, opts, log=lambda line: None)
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    return run / "analysis", summary


def table(out: Path, name: str) -> list[dict[str, Any]]:
    return read_table(out / "tables" / f"{name}.parquet")


def test_job_finds_the_legitimate_buckets(batch_run: tuple[Path, dict[str, Any]]) -> None:
    out, summary = batch_run
    rows = [r for r in table(out, "convergence_timeline") if r["topic"] == ev.TOPIC]
    assert [r["bucket"] for r in rows] == list(range(12))
    assert [r["legitimate"] for r in rows] == ev.NEWS_LEGIT_BY_BUCKET
    # share of each bucket spent legitimate: from 0.3 in bucket 0, until 2.05 in bucket 4
    assert rows[0]["legitimate_fraction"] == pytest.approx(0.4)
    assert rows[4]["legitimate_fraction"] == pytest.approx(0.1)
    assert rows[11]["legitimate_fraction"] == pytest.approx(0.8)
    assert [r["members"] for r in rows] == [4] * 8 + [3] * 4  # the crash at 4.5 ends bucket 8
    assert rows[5]["correct_fraction"] < 1.0 and rows[7]["correct_fraction"] == 1.0
    solo = [r for r in table(out, "convergence_timeline") if r["topic"] == ev.SOLO]
    assert solo[0]["bucket"] == 1 and all(r["legitimate"] for r in solo)
    assert summary["topics"][ev.TOPIC]["legitimate_fraction"] == pytest.approx(3.15 / 5.8)


def test_job_finds_the_convergence_time_after_each_marker(
    batch_run: tuple[Path, dict[str, Any]],
) -> None:
    out, summary = batch_run
    rows = table(out, "convergence_times")
    assert all(r["reached"] for r in rows)
    assert {(r["topic"], r["marker_id"]): r["time_to_legitimacy"] for r in rows} == pytest.approx(
        ev.CONVERGENCE
    )
    from_summary = {
        (topic, c["marker_id"]): c["time_to_legitimacy"]
        for topic, t in summary["topics"].items()
        for c in t["convergence"]
    }
    assert from_summary == pytest.approx(ev.CONVERGENCE)


def test_job_computes_the_latency_quantiles_by_via(batch_run: tuple[Path, dict[str, Any]]) -> None:
    out, summary = batch_run
    q = {r["via"]: r for r in table(out, "latency_quantiles") if r["topic"] == ev.TOPIC}
    assert set(q) == {"flood", "antientropy", "all"}
    # exact percentiles, linear between ranks: p90 of 10..50 ms is at rank 3.6
    assert (q["flood"]["count"], q["antientropy"]["count"], q["all"]["count"]) == (5, 2, 7)
    assert [q["flood"][k] for k in ("p50", "p90", "p99", "max")] == pytest.approx(
        [0.030, 0.046, 0.0496, 0.050], abs=1e-6
    )
    assert [q["antientropy"][k] for k in ("p50", "p90", "p99", "max")] == pytest.approx(
        [1.0, 1.4, 1.49, 1.5], abs=1e-6
    )
    assert q["all"]["p50"] == pytest.approx(0.040, abs=1e-6)
    assert summary["topics"][ev.TOPIC]["latency"]["flood"]["p90"] == pytest.approx(0.046, abs=1e-6)
    cdf = [r for r in table(out, "latency_cdf") if r["topic"] == ev.TOPIC and r["via"] == "flood"]
    assert len(cdf) == 101
    assert cdf[0]["latency"] == pytest.approx(0.010, abs=1e-6) and cdf[-1][
        "latency"
    ] == pytest.approx(0.050, abs=1e-6)
    assert [r["latency"] for r in cdf] == sorted(r["latency"] for r in cdf)


def test_job_computes_the_degree_histogram(batch_run: tuple[Path, dict[str, Any]]) -> None:
    out, summary = batch_run
    degrees = {
        (r["topic"], r["degree"]): (r["nodes"], r["ideal_nodes"])
        for r in table(out, "degree_distribution")
    }
    # at the end: SR(3) on news (every node has 2 distinct neighbours), one lone node on solo
    assert degrees == {(ev.TOPIC, 2): (3, 3), (ev.SOLO, 0): (1, 1)}
    assert summary["topics"][ev.TOPIC]["degree"]["distribution"] == {"2": 3}
    assert summary["topics"][ev.TOPIC]["degree"]["ideal_distribution"] == {"2": 3}
    html = (out / "report.html").read_text()
    assert "<th>nodes in the ideal ring</th>" in html  # the report shows the ideal next to what was seen
    changes = [r for r in table(out, "legitimacy_changes") if r["topic"] == ev.TOPIC]
    assert changes[0]["max_degree"] == 3  # SR(4): node 0 holds 01, 11 (ring) and 1


def test_job_counts_messages_per_interval(batch_run: tuple[Path, dict[str, Any]]) -> None:
    out, summary = batch_run
    sup = table(out, "supervisor_intervals")
    assert [r["interval"] for r in sup] == list(range(12))
    assert all(r["sent"] == 3 and r["received"] == 1 for r in sup)
    assert (
        summary["supervisor_messages"]["intervals"],
        summary["supervisor_messages"]["total_sent"],
    ) == (12, 36)
    assert summary["supervisor_messages"]["mean_sent_per_interval"] == 3.0
    rates = table(out, "message_rates")
    sent = {
        (r["bucket"], r["role"], r["kind"]): r["frames_per_second"]
        for r in rates
        if r["direction"] == "sent"
    }
    assert all(sent[(b, "supervisor", "SetData")] == 4.0 for b in range(12))
    assert all(sent[(b, "node", "Check")] == 8.0 for b in range(12))


def test_job_counts_and_skips_unusable_input(batch_run: tuple[Path, dict[str, Any]]) -> None:
    out, summary = batch_run
    assert summary["input"]["unusable"] == ev.BAD_COUNTS
    assert summary["input"]["events_used"] == len(ev.events())
    assert summary["status_checks"] == {"count": 2, "agree": 2}
    assert summary["final"] is True and summary["batches"] == 1


def test_report_has_real_png_plots(batch_run: tuple[Path, dict[str, Any]]) -> None:
    import matplotlib.image

    out, summary = batch_run
    html = (out / "report.html").read_text()
    plots = summary["outputs"]["plots"]
    assert len(plots) == 7  # 3 per topic + message rates
    for rel in plots:
        data = (out / rel).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", rel
        assert len(data) > 5_000, rel
        pixels = matplotlib.image.imread(out / rel)
        assert pixels.ndim == 3 and pixels.shape[0] > 200 and pixels.shape[1] > 300
        assert pixels.std() > 0.01  # not a blank image
        assert rel in html
    assert "corrupt-1" in html and "not reached" not in html
    leftovers = [p.name for p in out.rglob(".*")]
    assert leftovers == []  # every temporary file was renamed into place


def test_only_unusable_lines_leave_nothing_to_report(spark: Any, tmp_path: Path) -> None:
    """Every line unusable: the job counts them, and `pubsub analyze` turns that into its
    one-line error (exit 1) instead of presenting an empty report."""
    from pubsub.ops.analysis.cli import nothing_usable
    from pubsub.ops.analysis.job import Options
    from pubsub.ops.analysis.live import run_analysis

    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "x-000000.jsonl").write_text("garbage\n\x00\x01 more garbage\n", encoding="utf-8")
    opts = Options(run_dir=tmp_path, out=tmp_path / "analysis", events_dir=tmp_path / "events")
    summary = run_analysis(spark, opts, log=lambda line: None)
    assert summary["input"]["events_used"] == 0 and summary["input"]["unusable"]["malformed"] == 2
    assert nothing_usable(summary) == "all 2 lines read were unusable"
    assert nothing_usable({"input": {"events_used": 0, "unusable": {}}}) == "no event was found there"
    assert nothing_usable({"input": {"events_used": 3, "unusable": {"malformed": 1}}}) is None


def test_job_on_an_empty_run_writes_an_empty_report(spark: Any, tmp_path: Path) -> None:
    from pubsub.ops.analysis.job import Options
    from pubsub.ops.analysis.live import run_analysis

    (tmp_path / "events").mkdir()
    opts = Options(run_dir=tmp_path, out=tmp_path / "analysis", events_dir=tmp_path / "events")
    summary = run_analysis(spark, opts, log=lambda line: None)
    assert summary["topics"] == {} and summary["input"]["events_used"] == 0
    written = json.loads((tmp_path / "analysis" / "summary.json").read_text())
    assert written["final"] is True and written["batches"] == 0
    assert table(tmp_path / "analysis", "convergence_times") == []
    png = (tmp_path / "analysis" / "plots" / "messages.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Convergence report" in (tmp_path / "analysis" / "report.html").read_text()


# ------------------------------------------------- live deliveries apart from history
def _late_joiner_events() -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """A at 7001 is a member throughout, restarted cleanly at 10.0 (no marker: its Timeout
    counter starts again); B (7002) joins at 5.0, crashes at 7.0 and is back at 9.0; C (7003)
    leaves at 3.0 and rejoins at 4.0.  Expected latencies (s) by class."""
    a, b, c = ev.N[0], ev.N[1], ev.N[2]
    lone = {"label": "0", "left": None, "right": None, "ring": None, "shortcuts": {}}

    def snap(t: float, ref: str, member: bool = True) -> dict[str, Any]:
        row = ev.snapshot(t, ref, lone)
        if not member:
            row |= {"member": False, "label": None, "shortcuts": {}}
        return row

    def deliver(t: float, ref: str, published: float, via: str, seq: int) -> dict[str, Any]:
        return ev.delivery(t, ref, round((t - published) * 1000), via, seq)

    rows = [
        snap(0.1, a), snap(0.1, c), snap(3.0, c, member=False), snap(4.0, c), snap(5.0, b),
        ev.marker(7.0, "crash-b", "crash", [b]), snap(9.0, b),
        deliver(1.01, a, 1.0, "local", 1), deliver(2.02, a, 2.0, "tree", 2),
        deliver(5.5, b, 1.0, "antientropy", 1), deliver(5.6, b, 2.0, "antientropy", 2),
        deliver(6.01, a, 6.0, "tree", 3), deliver(6.02, b, 6.0, "tree", 3),
        deliver(8.01, a, 8.0, "tree", 4), deliver(9.5, b, 8.0, "antientropy", 4),
        deliver(4.5, c, 3.5, "antientropy", 5),
        snap(10.0, a) | {"interval": 0},  # the restarted process' first snapshot
        deliver(10.4, a, 9.8, "antientropy", 6),  # published while A was away: history
        deliver(10.51, a, 10.5, "tree", 7),
    ]
    expected = {"live": [0.01, 0.02, 0.01, 0.02, 0.01, 0.01], "history": [4.5, 3.6, 1.5, 1.0, 0.6]}
    return rows, expected


def test_latency_keeps_history_copied_to_late_joiners_apart(spark: Any, tmp_path: Path) -> None:
    from pubsub.ops.analysis.job import Options
    from pubsub.ops.analysis.live import run_analysis

    rows, expected = _late_joiner_events()
    ev.write_events(tmp_path / "events", rows, "late")
    opts = Options(run_dir=tmp_path, out=tmp_path / "analysis", events_dir=tmp_path / "events")
    summary = run_analysis(spark, opts, log=lambda line: None)
    q = {(r["delivery"], r["via"]): r for r in table(tmp_path / "analysis", "latency_quantiles")}
    assert q[("live", "all")]["count"] == len(expected["live"])
    assert q[("history", "all")]["count"] == len(expected["history"])
    assert q[("live", "all")]["max"] == pytest.approx(max(expected["live"]), abs=1e-3)
    assert q[("history", "all")]["min"] == pytest.approx(min(expected["history"]), abs=1e-3)
    assert ("history", "local") not in q and q[("history", "antientropy")]["count"] == 5
    assert not any(r["delivery"] is None for r in q.values())  # never a row mixing both
    news = summary["topics"][ev.TOPIC]
    assert news["latency"]["all"]["p99"] < 0.05  # live deliveries only
    assert news["latency_history"]["all"]["max"] == pytest.approx(4.5, abs=1e-3)
    html = (tmp_path / "analysis" / "report.html").read_text()
    assert "History copied to late joiners" in html
    cdf = table(tmp_path / "analysis", "latency_cdf")
    assert {r["delivery"] for r in cdf} == {"live", "history"}


# ------------------------------------------------------------------ the plots' readability
def _texts_overlapping_the_title(fig: Any) -> list[str]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    titles = [ax.title for ax in fig.axes if ax.title.get_text()]
    if fig._suptitle is not None:
        titles.append(fig._suptitle)
    clashes = []
    for title in titles:
        box = title.get_window_extent(renderer)
        for text in fig.findobj(Text):
            if text is title or not text.get_visible() or not text.get_text().strip():
                continue
            if text.get_window_extent(renderer).overlaps(box):
                clashes.append(f"{text.get_text()!r} over the title {title.get_text()!r}")
    return clashes


def drawn(monkeypatch: pytest.MonkeyPatch, plot: Any, *args: Any) -> Any:
    """The figure `plot` (a `report.plot_*` function) would save as a PNG."""
    from pubsub.ops.analysis import report

    figures: list[Any] = []
    monkeypatch.setattr(report, "_save", lambda fig, path: figures.append(fig))
    plot(Path("unused.png"), *args)
    assert len(figures) == 1
    return figures[0]


def test_marker_labels_never_cover_the_title(
    batch_run: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pubsub.ops.analysis import report

    out, _ = batch_run
    timeline = [r for r in table(out, "convergence_timeline") if r["topic"] == ev.TOPIC]
    steps = [r for r in table(out, "legitimacy_changes") if r["topic"] == ev.TOPIC]
    markers = table(out, "markers")
    assert len(markers) == 3
    # markers right under the title (the middle of the time axis), two of them close together
    middle = (timeline[0]["t_start"] + timeline[-1]["t_end"]) / 2
    crowded = [*markers, {"t": middle, "action": "partition"}, {"t": middle + 0.05, "action": "corrupt_supervisor"}]
    fig = drawn(monkeypatch, report.plot_convergence, ev.TOPIC, timeline, steps, crowded)
    assert _texts_overlapping_the_title(fig) == []
    labels = [t.get_text() for ax in fig.axes[0].child_axes for t in ax.get_xticklabels() if t.get_text()]
    assert {"start", "corrupt_node", "crash", "partition, corrupt_supervisor"} <= set(labels)
    members_axis = fig.axes[1]
    assert all(float(v).is_integer() for v in members_axis.get_yticks())
    fig = drawn(monkeypatch, report.plot_convergence, ev.TOPIC, timeline, steps, markers)
    assert _texts_overlapping_the_title(fig) == []


def test_the_latency_axis_shows_zero_milliseconds(monkeypatch: pytest.MonkeyPatch) -> None:
    from pubsub.ops.analysis import report

    cdf = [
        {"topic": "t", "delivery": "live", "via": "local", "fraction": i / 100, "latency": i * 0.0001}
        for i in range(101)
    ] + [
        {"topic": "t", "delivery": "history", "via": "antientropy", "fraction": i / 100, "latency": 5 + i}
        for i in range(101)
    ]
    fig = drawn(monkeypatch, report.plot_latency, "t", cdf)
    live = fig.axes[0]
    assert live.get_xscale() == "symlog" and live.get_xlim()[0] <= 0.0 < live.get_xlim()[1]
    assert [ax.get_title() for ax in fig.axes] == ["live deliveries", "history copied to late joiners"]
    assert _texts_overlapping_the_title(fig) == []


def test_degree_ticks_are_whole_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    from pubsub.ops.analysis import report

    rows = [{"topic": "t", "degree": 2, "nodes": 1, "ideal_nodes": 2}, {"topic": "t", "degree": 4, "nodes": 2, "ideal_nodes": 1}]
    fig = drawn(monkeypatch, report.plot_degrees, "t", rows)
    ax = fig.axes[0]
    _texts_overlapping_the_title(fig)  # draws it
    low, high = ax.get_ylim()
    assert all(float(v).is_integer() for v in ax.get_yticks() if low <= v <= high)
    assert list(ax.get_xticks()) == [2, 3, 4]


def test_message_rates_are_zero_in_buckets_without_frames_not_interpolated() -> None:
    """messages.png: the supervisor sent in buckets 0 and 5 only; the buckets between are
    0 frames/s (a line straight from 0 to 5 would show traffic that was not there)."""
    from pubsub.ops.analysis.report import message_series

    def row(bucket: int, role: str, kind: str, rate: float) -> dict[str, Any]:
        return {"bucket": bucket, "t_start": bucket * 0.5, "t_end": (bucket + 1) * 0.5, "role": role,
                "direction": "sent", "kind": kind, "frames": int(rate / 2), "frames_per_second": rate}

    sent = [row(0, "supervisor", "set_data", 8.0), row(5, "supervisor", "set_data", 4.0),
            row(2, "node", "spread", 10.0), row(2, "node", "check_trie", 2.0)]
    xs, per_role, per_kind = message_series(sent)
    assert xs == [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    assert per_role == {"supervisor": [8.0, 0, 0, 0, 0, 4.0], "node": [0, 0, 12.0, 0, 0, 0]}
    assert per_kind == {"set_data": [8.0, 0, 0, 0, 0, 4.0]}
