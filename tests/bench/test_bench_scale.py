"""The scale benchmark (`python -m bench scale`, issue 14) parses its size options and runs
every table at a tiny size: `--huge` and `--large` (which add 16,384 ... 100,000 to the
tables) are given, with explicit tiny sizes in their place, so the code paths and the JSON
are exercised in seconds.  No wall-time assertions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import scale


def test_tiny_run_of_every_table_with_the_large_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    scale.main([
        "--huge", "--large", "--tables", "a", "b", "c", "j",
        "--sizes-a", "8", "--sizes-b", "8", "--sizes-c", "8", "--sizes-j", "8", "16",
        "--legit-intervals", "2", "--wall-cap", "60", "--label", "tiny",
    ])
    result = json.loads((tmp_path / "bench-results" / "scale-tiny.json").read_text())
    assert result["seeds"] == 1  # --huge: one seed unless --seeds
    (row,) = result["repair"]
    assert row["n"] == 8 and row["events_per_seed"] == 1
    assert row["leave"]["reached"] == 1 and row["crash"]["reached"] == 1
    assert [r["n"] for r in result["corrupted"]] == [8]
    assert result["spread"][0]["reached"] == 1
    joins = result["join"]
    assert [r["n"] for r in joins] == [8, 16]
    for r in joins:
        assert r["reached"] and r["intervals"] > 0
        assert r["sim_cpu_per_interval"] >= 0 and r["check_cpu_per_interval"] >= 0
        assert r["peak_rss_mb"] is None or r["peak_rss_mb"] > 0


def test_size_options_cover_what_they_say() -> None:
    assert scale.HUGE == [32768, 65536] and 100000 in scale.HUGE_J
    assert max(scale.LARGE) == 16384
