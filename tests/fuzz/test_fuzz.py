"""A short run of `make fuzz` inside `make test`: every target of `fuzz.targets` on a few
hundred to a few thousand inputs (seeded, so a failure repeats), and the atheris driver end
to end on one target.  Any crash or broken invariant fails the test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.__main__ import _have_atheris, _run_random
from fuzz.targets import TARGETS
from pubsub.kernel import registry

ROOT = Path(__file__).resolve().parents[2]

#: Inputs per target here (the cores' inputs are sequences of up to 48 steps; every other
#: target, such as each registered overlay's, gets `CORE_INPUTS`).
SHORT = {"framing": 3000, "codec": 2000}
CORE_INPUTS = 300


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_short_fuzz_run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded inputs and mutations of them: no crash, no broken invariant."""
    monkeypatch.chdir(tmp_path)  # a crashing input is written to ./fuzz-artifacts
    count = SHORT.get(name, CORE_INPUTS)
    inputs, crashes = _run_random(name, count, seconds=10_000, seed=13)
    assert (inputs, crashes) == (count, 0)


def test_every_registered_overlay_is_fuzzed() -> None:
    """The overlays other than the skip ring each have a node and a supervisor target."""
    others = [name for name in registry.overlay_names() if name != registry.DEFAULT_OVERLAY]
    assert others and all({f"{o}-node", f"{o}-supervisor"} <= set(TARGETS) for o in others)


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
