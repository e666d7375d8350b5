"""The skip ring's message counts for fixed seeds equal the golden file's.

`tests/sim/golden_counts.json` was captured from the code as it was before the overlay-seam
refactor of the cores and the effect executor (issue 43).  That refactor must not change
behaviour: with the same seed, every scenario of `tests.sim.goldenscenarios` must send
exactly the same messages (by kind, from and to the supervisor, in total), leave the same
publications at every member and give clients the same answers.  A difference means
behaviour changed; do not re-capture the file (``python -m tests.sim.goldenscenarios
--write``) unless the change is intended and understood.
"""

from __future__ import annotations

import pytest

from tests.sim.goldenscenarios import SCENARIOS, differences, load_golden, run


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_matches_the_golden_file(name: str) -> None:
    """The overlay-seam refactor (issue 43) must not change the skip ring's message counts
    for fixed seeds: scenario `name` produces exactly its golden entry."""
    golden = load_golden()
    assert name in golden, f"scenario {name!r} has no entry in the golden file"
    got = run(name)
    want = golden[name]
    assert got == want, f"scenario {name!r} differs from the golden file:\n  " + "\n  ".join(differences(got, want))


def test_the_golden_file_has_no_entry_without_a_scenario() -> None:
    assert sorted(load_golden()) == sorted(SCENARIOS)
