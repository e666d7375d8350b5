"""`python -m bench scot --quick`: the §10 comparison runs and its numbers obey the design.

The bench runs once (in-process, ``--jobs 1``) into a temporary directory; the tests read its
table and JSON.  They assert what the algorithms guarantee on S_e (56 brokers, 14 regions of
4, clusters of 14, 136 links), not speed and not the paper's percentages.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from bench import scot
from bench.scotplan import NETWORKS
from broker import topologyfile as TF

S_E = TF.s_e()
# PADRES floods: the host sends to every neighbour, every other broker to all but the sender.
FLOOD = 2 * len(S_E.links()) - (len(S_E) - 1)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    out_dir = tmp_path_factory.mktemp("bench-scot")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        scot.main(["--quick", "--jobs", "1", "--results", str(out_dir)])
    data = json.loads((out_dir / "scot-partial.json").read_text())
    return data, buf.getvalue()


def rows(data: dict[str, Any], protocol: str, phase: str) -> list[dict[str, Any]]:
    return data[protocol][phase]


def test_table_has_one_row_per_metric_with_the_papers_figures(run: tuple[dict[str, Any], str]) -> None:
    data, text = run
    metrics = [r["metric"] for r in data["summary"]]
    for name in (
        "CLT vs SRT size",
        "advertisement messages",
        "subscription delay",
        "PRT size",
        "subscription messages",
        "publication messages",
        "publication delay",
        "IDR vs SPR, uniform: mean Q_l target links",
        "IDR vs SPR, uniform: time to stabilize",
        "IDR vs SPR, slow-iLinks: mean Q_l target links",
        "IDR vs SPR, slow-iLinks: time to stabilize",
    ):
        assert name in metrics
        assert name in text
    papers = {r["metric"]: r["paper"] for r in data["summary"]}
    assert papers["CLT vs SRT size"] == "93% smaller"
    assert papers["advertisement messages"] == "88.5x fewer"
    assert all(r["agrees"] in ("yes", "NO", "NO (equal)") for r in data["summary"])
    assert {"python", "cpus", "platform"} <= set(data["machine"])
    assert data["checks"]["compared"] == sum(
        r["publications"] for r in rows(data, "octopia", "subscriber_scalability")
    )


def test_advertisements_clt_is_the_host_region_srt_is_every_broker(run: tuple[dict[str, Any], str]) -> None:
    """scotAFP stores an advertisement in its host region (m of 56 brokers) with m - 1 messages
    and no subscriptions to answer; PADRES stores it everywhere and floods every link."""
    data, _ = run
    m = S_E.m
    for o, p in zip(
        rows(data, "octopia", "publisher_scalability"), rows(data, "padres", "publisher_scalability"), strict=True
    ):
        n = o["publishers"]
        assert o["adv_table_mean"] == pytest.approx(n * m / len(S_E))
        assert p["adv_table_mean"] == n
        assert o["adv_messages"] == (m - 1) * n
        assert p["adv_messages"] == FLOOD * n
        assert p["duplicates_dropped"] == (FLOOD - (len(S_E) - 1)) * n
        assert o["adv_delay_ms"] < p["adv_delay_ms"]
    summary = {r["metric"]: r for r in data["summary"]}
    assert summary["CLT vs SRT size"]["agrees"] == "yes"
    assert summary["advertisement messages"]["agrees"] == "yes"


def test_subscriptions_fill_the_cluster_and_publications_arrive_once(run: tuple[dict[str, Any], str]) -> None:
    """scotSBP stores a subscription at every broker of its cluster (PRT = S / m on average)
    with at least |cluster| - 1 messages; no publication is delivered twice or visits a broker
    twice in either system."""
    data, _ = run
    cluster = len(S_E.cluster(0))
    for o, p in zip(
        rows(data, "octopia", "subscriber_scalability"), rows(data, "padres", "subscriber_scalability"), strict=True
    ):
        n = o["subscribers"]
        assert o["prt_mean"] == pytest.approx(n / S_E.m)
        assert o["sub_messages"] >= (cluster - 1) * n
        for r in (o, p):
            assert r["duplicate_deliveries"] == 0
            assert r["repeat_visits"] == 0
            assert r["pub_delay_ms"] > 0
            assert r["pub_messages_per_pub"] <= len(S_E) - 1  # at most one copy per broker
        assert o["deliveries"] == p["deliveries"] > 0


def test_burst_congests_and_idr_reroutes(run: tuple[dict[str, Any], str]) -> None:
    """The HRP publishes faster than one iLink carries, so under SPR the host's iLinks queue
    beyond tau; IDR then takes its cases (copies carry CIV_p).  Every HRP publication reached
    each HRP subscriber exactly once in every run (the bench aborts otherwise)."""
    data, _ = run
    cfg = data["config"]
    tau = cfg["tau"]
    min_frame = 100  # bytes: an HRP publication's frame is longer, so a link carries fewer per s
    assert min(cfg["burst_rates"]) > cfg["burst_bandwidth"] / min_frame
    runs = data["octopia"]["bursts"] + data["padres"]["bursts"]
    assert {(r["network"], r["mode"]) for r in runs} == {
        (net, mode) for net in NETWORKS for mode in ("spr", "idr", "tid-s", "tid-d")
    }
    for net in NETWORKS:
        by_mode = {r["mode"]: r for r in data["octopia"]["bursts"] if r["network"] == net}
        spr, idr = by_mode["spr"], by_mode["idr"]
        assert spr["peak_q_ilinks"] > tau
        assert spr["idr_cases"] == {}
        assert sum(idr["idr_cases"].values()) > 0
        assert idr["hrp_subscribers"] >= S_E.m
    for r in runs:
        assert r["hrp_pubs"] == cfg["hrp_pubs"]
        assert r["hrp_messages"] >= r["hrp_pubs"]
        assert r["stabilize_s"] >= 0


def test_results_land_in_the_named_directory(run: tuple[dict[str, Any], str]) -> None:
    data, text = run
    assert "written to" in text
    assert Path(text.rsplit("written to ", 1)[1].strip()).name == "scot-partial.json"
    assert "TID-D" in " ".join(data["notes"])
