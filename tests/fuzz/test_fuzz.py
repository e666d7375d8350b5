"""A short run of `make fuzz` inside `make test`: every target of `fuzz.targets` on a few
hundred to a few thousand inputs (seeded, so a failure repeats), and the atheris driver end
to end on one target.  Any crash or broken invariant fails the test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.__main__ import _have_atheris, _run_random

ROOT = Path(__file__).resolve().parents[2]

#: Inputs per target here (the cores' inputs are sequences of up to 48 steps).
SHORT = {"framing": 3000, "codec": 2000, "node": 300, "supervisor": 300, "octopia": 300, "padres": 300}


@pytest.mark.parametrize("name", sorted(SHORT))
def test_short_fuzz_run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded inputs and mutations of them: no crash, no broken invariant."""
    monkeypatch.chdir(tmp_path)  # a crashing input is written to ./fuzz-artifacts
    inputs, crashes = _run_random(name, SHORT[name], seconds=10_000, seed=13)
    assert (inputs, crashes) == (SHORT[name], 0)


@pytest.mark.skipif(not _have_atheris(), reason="atheris is not installed (pip install atheris)")
def test_atheris_driver_reports_inputs_and_no_crash(tmp_path: Path) -> None:
    """`python -m fuzz all` under atheris, one target, a small budget: its table says how many
    inputs ran and that none crashed."""
    proc = subprocess.run(
        [sys.executable, "-m", "fuzz", "all", "--only", "framing", "--scale", "0.005"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines()[1:]}
    assert int(rows["framing"][1].replace(",", "")) >= 1000
    assert rows["framing"][-1] == "0" and rows["total"][-1] == "0"
