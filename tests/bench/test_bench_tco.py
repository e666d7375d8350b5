"""The tco benchmark (`bench.tco`) measures what it prints: behaviour only, no timing.  A small
run writes its JSON, every churn round leaves a TCO (independent checker), the Low-ODA
baseline is sampled where asked, and the backup tables' mean primaries equal their mean
backup-set size (each backup relation counted once from each side)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from bench import tco
from pubsub.tco.dynamic import ShadowDynAlg
from pubsub.tco.fastoda import low_oda_fast
from pubsub.tco.workload import Shape, Workload
from tests.tco.checker import split_topics


def test_a_small_run_prints_every_figure_and_writes_its_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    tco.main(["--quick", "--nodes", "60", "--rounds", "12", "--every", "4"])
    printed = capsys.readouterr().out
    for figure in ("Fig. 2", "Fig. 3", "Fig. 4", "Fig. 5", "Fig. 6", "Fig. 7", "Fig. 8", "open parameter"):
        assert figure in printed
    doc = json.loads((tmp_path / "bench-results" / "tco.json").read_text())
    assert doc["shape"]["nodes"] == 60 and doc["rounds"] == 12 and "machine" in doc
    for method in ("greedy", "primal-dual"):
        table = doc["backups"][method]
        assert table["mean_primaries"] == pytest.approx(table["mean_backups"])
    assert doc["summaries"]["shadow primal-dual λ=3"]["low_oda_changed_edges"] >= 0


def test_every_round_of_a_churn_run_leaves_a_tco_and_the_baseline_is_sampled() -> None:
    shape = Shape(nodes=50, topics=15, min_topics=2, max_topics=6)
    run = tco.churn(shape, 3, 10, lambda o: ShadowDynAlg(o, rng=random.Random(3)), every=5)
    assert [r["round"] for r in run["low_oda"]] == [5, 10]
    assert len(run["rounds"]) == 10
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
