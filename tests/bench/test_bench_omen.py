"""The omen benchmark (`bench.omen`) at a tiny size: it prints its parameters and each measure
beside the paper's, writes its JSON with the machine, and its numbers are sane -- a TCO at the
end of every OMen run, the supervisor within 3L + 1 messages per event, at most 2L
predecessors' entries, and `python -m bench omen` registered apart from the default run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import __main__ as bench_main


@pytest.mark.parametrize("workload", ["facebook", "synthetic"])
def test_a_tiny_quick_run_writes_sane_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str], workload: str) -> None:
    monkeypatch.chdir(tmp_path)
    bench_main.main(["omen", "--quick", "--workload", workload, "--nodes", "30", "--events", "4", "--warm", "20",
                     "--lambdas", "1,3", "--seeds", "2"])
    printed = capsys.readouterr().out
    if workload == "facebook":  # how the stand-in was made is printed with the tables
        assert "BFS" in printed and "Poisson churn" in printed, printed[:2000]
    for text in ("open parameter", "§6.3", "Fig. 8", "OMen / OMen-G", "SpiderCast(3,1)", "Fig. 12",
                 "consecutive crashes at once"):
        assert text in printed
    doc = json.loads((tmp_path / "bench-results" / "omen-quick.json").read_text())
    assert doc["workload"] == workload
    assert {"machine", "shape", "settings", "open_parameters", "paper", "results", "seconds"} <= set(doc)
    assert doc["shape"]["nodes"] == 30 and doc["events"] == 4
    results = doc["results"]
    assert set(results["lambda"]) == {"1", "3"}
    L = doc["settings"]["resilience"]
    for run in (*results["lambda"].values(), results["omen_g"], results["global_connectivity"]):
        assert run["tco"], "an OMen run did not end in a TCO"
        assert run["supervisor_per_event"] <= 3 * L + 1
        assert run["most_views_held"] <= 2 * L
        assert run["max_degree"] >= 1 and 0 < run["view_mean"] <= 30
    for popularity in ("uniform", "zipf", "exponential"):
        for method in ("greedy", "primal-dual"):
            row = results["backups"][popularity][method]
            assert 0 <= row["under_5_pct"] <= 100 and row["min"] <= row["max"]
    assert len(results["beyond_assumption"]) == 2
    assert "omen" in bench_main.SEPARATE and "omen" in bench_main.BENCHMARKS
