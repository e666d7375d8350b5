"""The pairing benchmark (`bench.pairing`) at a tiny size: it prints its parameters and tables,
writes its JSON with the machine and every parameter, and its numbers are sane -- fractions
in [0, 1], every run down to one node, contention within d(u) + 4 at every node, the
asynchronous phases over by time 5 and the unlimited synchronous ones by round 5, and
`python -m bench pairing` is registered apart from the default run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench import __main__ as bench_main
from bench import pairing


def test_a_tiny_quick_run_writes_sane_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    bench_main.main(["pairing", "--quick", "--sizes", "16", "32", "--runs", "2"])
    printed = capsys.readouterr().out
    for text in ("seed 1", "2 runs per n", "sync_unlimited", "delays uniform in (0, 1]", "not built",
                 "phase by phase", "c(u)-d(u)"):
        assert text in printed
    doc = json.loads((tmp_path / "bench-results" / "pairing-quick.json").read_text())
    assert {"machine", "parameters", "results", "legend", "seconds"} <= set(doc)
    assert {"python", "platform", "cpus", "date"} <= set(doc["machine"])
    assert doc["parameters"]["sizes"] == [16, 32] and doc["parameters"]["runs"] == 2
    assert set(doc["results"]) == set(pairing.VARIANTS)
    for name, rows in doc["results"].items():
        assert [row["n"] for row in rows] == [16, 32]
        for row in rows:
            assert row["all_finished"] and row["runs"] == 2
            assert 0 < row["paired_fraction_phase_1"] <= 1 and 0 <= row["paired_fraction_min"] <= 1
            assert 1 <= row["phases_min"] <= row["phases_mean"] <= row["phases_max"] <= 12 * math.log2(row["n"]) + 12
            assert row["phases_over_log2_n"] == pytest.approx(row["phases_mean"] / math.log2(row["n"]))
            assert row["messages_per_node_phase_1"] >= 2  # a probe and its answer at least, per edge
            assert 0 <= row["max_excess_over_own_degree"] <= 4
            assert 0 < row["contention_over_degree_max"] <= 5
            if name == "async":
                assert row["duration_max"] <= 5.0
            if name == "sync_unlimited":
                assert row["duration_max"] <= 5
            for run in row["run_details"]:
                left = row["n"]
                for phase in run["phase_rows"]:
                    assert phase["nodes"] == left and 0 <= phase["paired_fraction"] <= 1
                    assert sum(phase["messages_by_kind"].values()) == phase["messages"]
                    left -= phase["pairs"]
                assert left == 1


def test_pairing_is_registered_apart_from_the_default_run() -> None:
    assert bench_main.BENCHMARKS["pairing"] is pairing.main
    assert "pairing" in bench_main.SEPARATE
    assert "python -m bench pairing" in (bench_main.__doc__ or "")
