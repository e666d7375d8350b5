"""The tco benchmark (`bench.tco`) measures what it prints: behaviour only, no timing.  A small
run writes its JSON with what was sampled, every churn round leaves a TCO (independent
checker), Low-ODA's samples are taken on the same nodes as the runs' rounds (fingerprints),
the reference Naive leave it times makes the run's repair, the backup tables' mean
primaries equal their mean backup-set size (each backup relation counted once from each
side), and the tasks give the same numbers in worker processes as in one."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from bench import tco
from pubsub.tco.dynamic import ShadowDynAlg
from pubsub.tco.fastnaive import FastNaiveDynAlg
from pubsub.tco.fastoda import low_oda_fast
from pubsub.tco.workload import Shape, Workload
from tests.tco.checker import split_topics

SMALL = ["--quick", "--nodes", "60", "--rounds", "12", "--every", "4", "--naive-every", "2"]


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int) -> dict[str, Any]:
    where = tmp_path / f"jobs{jobs}"
    where.mkdir()
    monkeypatch.chdir(where)
    tco.main([*SMALL, "--jobs", str(jobs)])
    doc: dict[str, Any] = json.loads((where / "bench-results" / "tco.json").read_text())
    return doc


def test_a_small_run_prints_every_figure_and_writes_its_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    doc = _run(tmp_path, monkeypatch, 1)
    printed = capsys.readouterr().out
    for figure in ("Fig. 2", "Fig. 3", "Fig. 4", "Fig. 5", "Fig. 6", "Fig. 7", "Fig. 8", "open parameter",
                   "checked against each other"):
        assert figure in printed
    assert doc["shape"]["nodes"] == 60 and doc["rounds"] == 12 and "machine" in doc
    for method in ("greedy", "primal-dual"):
        table = doc["backups"][method]
        assert table["mean_primaries"] == pytest.approx(table["mean_backups"])
    assert doc["sampled"]["low_oda_rounds"] == [4, 8, 12]
    shadow, naive = doc["summaries"]["shadow primal-dual λ=3"], doc["summaries"]["naive"]
    assert shadow["low_oda_changed_edges"] >= 0 and shadow["low_oda_samples"] == 3
    leaves = naive["leave_rounds"]
    assert naive["reference_leave_sampled"] == leaves // 2 and doc["sampled"]["naive_reference_leave_rounds"]
    assert naive["reference_leave_same"] == naive["reference_leave_sampled"]
    assert "FastBackupTable" in doc["implementations"]["other shadow runs, Figs. 2-3"]


def test_the_numbers_are_the_same_in_worker_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def timeless(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: timeless(v) for k, v in value.items() if "seconds" not in k and "time_percent" not in k}
        return value

    one, two = _run(tmp_path, monkeypatch, 1), _run(tmp_path, monkeypatch, 2)
    assert timeless(one["summaries"]) == timeless(two["summaries"])
    assert timeless(one["backups"]) == timeless(two["backups"])
    assert [timeless(s) for s in one["low_oda_samples"]] == [timeless(s) for s in two["low_oda_samples"]]


def test_every_round_of_a_churn_run_leaves_a_tco_and_the_baseline_is_sampled_on_its_nodes() -> None:
    shape = Shape(nodes=50, topics=15, min_topics=2, max_topics=6)
    run = tco.churn(shape, 3, 10, lambda o: ShadowDynAlg(o, rng=random.Random(3)), every=5)
    assert len(run["rounds"]) == 10
    samples = [tco.low_oda_sample(s) for s in tco.snapshots(shape, 3, 10, 5)]
    assert [s["round"] for s in samples] == [5, 10]
    assert [s["fingerprint"] for s in samples] == [run["rounds"][k - 1]["fingerprint"] for k in (5, 10)]
    assert tco.summary(run, samples)["low_oda_samples"] == 2
    other = tco.churn(shape, 4, 10, lambda o: ShadowDynAlg(o, rng=random.Random(3)), every=5)
    with pytest.raises(ValueError, match="not Low-ODA's"):
        tco.summary(other, samples)  # another seed's nodes
    work = Workload(shape, 3)
    overlay, _ = low_oda_fast(work.initial())
    dyn = ShadowDynAlg(overlay, rng=random.Random(3))
    dyn.build_backups()
    present = set(overlay.topics)
    for kind, node, topics in work.rounds(present, 10):
        if kind == "join":
            dyn.join(node, topics)
        else:
            dyn.leave(node)
        assert split_topics(overlay.topics, overlay.edges()) == {}


def test_the_timed_reference_naive_leave_is_the_runs_repair() -> None:
    shape = Shape(nodes=40, topics=15, min_topics=1, max_topics=6)
    run = tco.churn(shape, 2, 20, lambda o: FastNaiveDynAlg(o), naive_every=1)
    checked = [r for r in run["rounds"] if "reference_seconds" in r]
    assert checked and len(checked) == sum(1 for r in run["rounds"] if r["kind"] == "leave")
    assert all(r["reference_same"] for r in checked)
