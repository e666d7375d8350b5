"""How the CLI prints retention limits and horizons: in the units `retention set` reads."""

from __future__ import annotations

import pytest

from pubsub.cli.formats import duration_text, format_node_status, size_text, utc_ms_text
from pubsub.cli.retention import describe, parse_duration_ms, parse_size


@pytest.mark.parametrize(
    ("size", "text"),
    [(10 * 1024**2, "10MiB"), (64_000, "64kB"), (1500, "1500B"), (1024**4, "1TiB"), (3 * 1000**3, "3GB"), (1, "1B")],
)
def test_sizes_are_printed_exactly_in_the_largest_unit_and_read_back(size: int, text: str) -> None:
    assert size_text(size) == text
    assert parse_size(text) == size


@pytest.mark.parametrize(("ms", "text"), [(86_400_000, "1d"), (90_000, "90s"), (1500, "1500ms"), (604_800_000, "1w")])
def test_durations_are_printed_exactly_and_read_back(ms: int, text: str) -> None:
    assert duration_text(ms) == text
    assert parse_duration_ms(text) == ms


def test_limits_and_purges_read_as_set_takes_them() -> None:
    settings = {"max_age_ms": 86_400_000, "max_count": 2, "max_bytes": 10 * 1024**2, "purged_ms": 1_795_897_331_764}
    assert describe("news", settings) == (
        "news: max-age 1d, max-count 2, max-bytes 10MiB, purged at 2026-11-28 20:22:11.764 UTC"
    )
    assert describe("news", {}) == "news: max-age none, max-count none, max-bytes none"
    assert utc_ms_text(0) == "1970-01-01 00:00:00.000 UTC"


def test_a_nodes_status_text_shows_retention_as_limits_and_a_horizon_not_json() -> None:
    body = {
        "ref": "127.0.0.1:1",
        "supervisor": "127.0.0.1:2",
        "topics": {
            "news": {
                "label": "0",
                "retention": {
                    "max_age_ms": 0, "max_count": 2, "max_bytes": 0, "purged_ms": 0,
                    "through_ms": 1_795_897_331_764, "through_key": "afea17163d7e54742343627780145478",
                },
            }
        },
        "stats": {},
    }
    [row] = [line for line in format_node_status(body).splitlines() if line.strip().startswith("retention")]
    assert row.split(None, 1)[1] == (
        "max-age none, max-count 2, max-bytes none; removed through 2026-11-28 20:22:11.764 UTC (key afea1716...)"
    )
    assert "{" not in row
