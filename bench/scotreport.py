"""The report of the OctopiA-vs-PADRES benchmark (`bench.scot`, OctopiA §10): the comparison
with the paper's figures and the printed tables.

`summary` makes one row per §10 metric -- the sweep means of both systems, the measured
comparison, the paper's figure, and whether the direction agrees; `print_phase_tables` and
`print_summary` print the tables of every phase and that summary.
"""

from __future__ import annotations

from typing import Any

from bench.scotphases import mean
from bench.scotplan import NETWORKS, Config


def agreement(a: float, b: float, paper: str, tolerance: float = 0.01, floor: float = 0.0) -> str:
    """"yes" when a is `paper` ("lower" or "higher") than b; "NO (equal)" when they differ by
    at most `tolerance` of the larger or by at most `floor`; else "NO"."""
    if abs(a - b) <= max(tolerance * max(abs(a), abs(b)), floor):
        return "NO (equal)"
    return "yes" if (a < b) == (paper == "lower") else "NO"


def pct_less(a: float, b: float, word: str = "less") -> str:
    """a relative to b as "x% less" / "x% more"."""
    if b == 0:
        return "-"
    change = 100 * (1 - a / b)
    return f"{change:.1f}% {word}" if change >= 0 else f"{-change:.1f}% more"


def relative(a: float, b: float, up: str, down: str) -> str:
    """a against b as "x% <up>" (a larger) or "x% <down>"."""
    if b == 0:
        return "-"
    change = 100 * (a / b - 1)
    return f"{abs(change):.1f}% {up if change > 0 else down}"


def earlier(a: float, b: float) -> str:
    return f"{b - a:.2f} s earlier" if a <= b else f"{a - b:.2f} s later"


def summary(cfg: Config, results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per §10 metric: the sweep means of both systems, the comparison, the paper's
    figure, and whether the direction agrees (the first value lower/higher as the paper says)."""
    o, p = results["octopia"], results["padres"]
    rows: list[dict[str, Any]] = []

    def add(
        metric: str, unit: str, a: float, b: float, measured: str, paper: str, direction: str
    ) -> None:
        # stabilization times are sampled every t_w: closer than that is no difference
        floor = cfg.t_w if "stabilize" in metric else 0.0
        rows.append(
            {"metric": metric, "unit": unit, "octopia": a, "padres": b, "measured": measured,
             "paper": paper, "paper_direction": direction,
             "agrees": agreement(a, b, direction, floor=floor)}
        )

    def both(phase: str, key: str) -> tuple[float, float]:
        return mean([r[key] for r in o[phase]]), mean([r[key] for r in p[phase]])

    def bursts(res: dict[str, Any], network: str, mode: str, key: str) -> float:
        return mean([r[key] for r in res["bursts"] if r["mode"] == mode and r["network"] == network])

    a, b = both("publisher_scalability", "adv_table_mean")
    add("CLT vs SRT size", "entries", a, b, pct_less(a, b, "smaller"), "93% smaller", "lower")
    a, b = both("publisher_scalability", "adv_messages")
    add("advertisement messages", "", a, b, f"{b / a:.1f}x fewer" if a else "-", "88.5x fewer", "lower")
    a, b = both("publisher_scalability", "adv_delay_ms")
    measured = relative(b, a, "higher for PADRES", "lower for PADRES")
    add("advertisement delay", "ms", a, b, measured, "266% higher for PADRES", "lower")
    a, b = both("subscriber_scalability", "sub_delay_ms")
    add("subscription delay", "ms", a, b, pct_less(a, b), "34% less", "lower")
    a, b = both("subscriber_scalability", "sub_cpu_ms")
    add("subscription CPU, all brokers", "ms/sub", a, b, pct_less(a, b), "(cause of the 34%)", "lower")
    a, b = both("subscriber_scalability", "prt_mean")
    measured = relative(b, a, "larger for PADRES", "smaller for PADRES")
    add("PRT size", "entries", a, b, measured, "33% smaller for PADRES", "higher")
    a, b = both("subscriber_scalability", "sub_messages")
    add("subscription messages", "", a, b, relative(a, b, "more", "fewer"), "32.5% more", "higher")
    a, b = both("subscriber_scalability", "pub_messages_per_pub")
    add("publication messages", "per pub", a, b, pct_less(a, b, "fewer"), "4.5% fewer", "lower")
    a, b = both("subscriber_scalability", "pub_delay_ms")
    add("publication delay", "ms", a, b, pct_less(a, b), "25% less", "lower")
    a, b = both("subscriber_scalability", "matching_delay_us")
    measured = relative(a, b, "higher", "lower")
    add("matching delay (CPU per broker)", "us", a, b, measured, "11% higher", "higher")

    for net in NETWORKS:
        tag = f"IDR vs SPR, {net}:"
        i, s = bursts(o, net, "idr", "mean_q_target"), bursts(o, net, "spr", "mean_q_target")
        add(f"{tag} mean Q_l target links", "msgs", i, s, pct_less(i, s), "32% less", "lower")
        i, s = bursts(o, net, "idr", "peak_q"), bursts(o, net, "spr", "peak_q")
        add(f"{tag} peak Q_l", "msgs", i, s, pct_less(i, s), "-", "lower")
        i, s = bursts(o, net, "idr", "stabilize_s"), bursts(o, net, "spr", "stabilize_s")
        add(f"{tag} time to stabilize", "s", i, s, earlier(i, s), "35 s earlier", "lower")
        i, s = bursts(o, net, "idr", "stabilize_ilinks_s"), bursts(o, net, "spr", "stabilize_ilinks_s")
        add(f"{tag} stabilize, iLinks only", "s", i, s, earlier(i, s), "35 s earlier", "lower")
        i, s = bursts(o, net, "idr", "hrp_delay_mean_s"), bursts(o, net, "spr", "hrp_delay_mean_s")
        add(f"{tag} HRP delay", "s", i, s, pct_less(i, s), "lower (51% vs 48% < 1 s)", "lower")
        i, s = bursts(o, net, "idr", "hrp_messages"), bursts(o, net, "spr", "hrp_messages")
        rows.append(
            {"metric": f"{tag} HRP messages", "unit": "", "octopia": i, "padres": s,
             "measured": f"{100 * (i / s - 1):+.2f}%", "paper": "+0.04%",
             "paper_direction": "about equal",
             "agrees": "yes" if abs(i - s) <= 0.01 * s else "NO"}
        )
        a, b = bursts(o, net, "idr", "hrp_delay_mean_s"), bursts(p, net, "tid-s", "hrp_delay_mean_s")
        add(f"IDR vs TID-S, {net}: HRP delay", "s", a, b, pct_less(a, b), "54% less", "lower")
        a, b = bursts(o, net, "idr", "stabilize_s"), bursts(p, net, "tid-s", "stabilize_s")
        measured = earlier(a, b)
        add(f"IDR vs TID-S, {net}: time to stabilize", "s", a, b, measured, "200 s earlier", "lower")
        a, b = bursts(o, net, "idr", "hrp_delay_mean_s"), bursts(p, net, "tid-d", "hrp_delay_mean_s")
        add(f"IDR vs TID-D, {net}: HRP delay", "s", a, b, pct_less(a, b), "54% less (vs PADRES)", "lower")
        # TID-D against TID-S: both PADRES (first column TID-D, second TID-S)
        tag = f"TID-D vs TID-S, {net}:"
        d, t = bursts(p, net, "tid-d", "hrp_delay_mean_s"), bursts(p, net, "tid-s", "hrp_delay_mean_s")
        add(f"{tag} HRP delay", "s", d, t, relative(d, t, "higher", "lower"), "18% higher", "higher")
        d, t = bursts(p, net, "tid-d", "stabilize_s"), bursts(p, net, "tid-s", "stabilize_s")
        add(f"{tag} time to stabilize", "s", d, t, earlier(d, t), "15 s later", "higher")
        d, t = bursts(p, net, "tid-d", "mean_q_target"), bursts(p, net, "tid-s", "mean_q_target")
        add(f"{tag} mean Q_l target links", "msgs", d, t, pct_less(d, t), "-", "lower")
    rows.append(tidd_runs(p))
    return rows


def tidd_runs(p: dict[str, Any]) -> dict[str, Any]:
    """How often TID-D beat TID-S on the HRP's mean delay, run by run (network x rate); equal
    within 1%.  §10: TID-D better in 25% of 80 runs, worse in 65%, the same in 10%.  The row's
    two values are the runs TID-D was better and worse in."""
    by_run: dict[tuple[str, float], dict[str, float]] = {}
    for r in p["bursts"]:
        by_run.setdefault((r["network"], r["rate"]), {})[r["mode"]] = r["hrp_delay_mean_s"]
    pairs = [(v["tid-d"], v["tid-s"]) for v in by_run.values() if {"tid-d", "tid-s"} <= set(v)]
    same = [abs(d - t) <= 0.01 * max(d, t) for d, t in pairs]
    better = sum(1 for (d, t), eq in zip(pairs, same, strict=True) if d < t and not eq)
    worse = len(pairs) - sum(same) - better
    n = len(pairs) or 1
    return {
        "metric": "TID-D vs TID-S: runs TID-D better/worse/same", "unit": "", "octopia": better,
        "padres": worse, "measured": f"{better}/{worse}/{sum(same)} of {len(pairs)}",
        "paper": "20/52/8 of 80", "paper_direction": "TID-D mostly worse",
        "agrees": "yes" if worse > better else "NO", "share_better": better / n,
    }


# --- printing --------------------------------------------------------------------------------


def fmt(v: float) -> str:
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) >= 100):
        return f"{int(v)}"
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"


def print_phase_tables(results: dict[str, dict[str, Any]]) -> None:
    o, p = results["octopia"], results["padres"]
    print("Publisher scalability (advertisements only)")
    head = (
        f"{'pubs':>6}{'CLT':>8}{'SRT':>8}{'adv msgs O':>12}{'adv msgs P':>12}{'dups P':>9}"
        f"{'adv delay O ms':>16}{'adv delay P ms':>16}"
    )
    print(head)
    print("-" * len(head))
    for ro, rp in zip(o["publisher_scalability"], p["publisher_scalability"], strict=True):
        print(
            f"{ro['publishers']:>6}{ro['adv_table_mean']:>8.1f}{rp['adv_table_mean']:>8.1f}"
            f"{ro['adv_messages']:>12}{rp['adv_messages']:>12}{rp['duplicates_dropped']:>9}"
            f"{ro['adv_delay_ms']:>16.3f}{rp['adv_delay_ms']:>16.3f}"
        )
    print()
    print("Subscriber scalability (100 publishers); publications at each checkpoint")
    head = (
        f"{'subs':>6}{'PRT O':>8}{'PRT P':>8}{'sub msgs O':>11}{'sub msgs P':>11}"
        f"{'sub ms O':>9}{'sub ms P':>9}{'msg/pub O':>10}{'msg/pub P':>10}"
        f"{'pub ms O':>9}{'pub ms P':>9}{'match us O':>11}{'match us P':>11}{'trees/sub P':>12}"
    )
    print(head)
    print("-" * len(head))
    for ro, rp in zip(o["subscriber_scalability"], p["subscriber_scalability"], strict=True):
        print(
            f"{ro['subscribers']:>6}{ro['prt_mean']:>8.0f}{rp['prt_mean']:>8.0f}{ro['sub_messages']:>11}"
            f"{rp['sub_messages']:>11}{ro['sub_delay_ms']:>9.3f}{rp['sub_delay_ms']:>9.3f}"
            f"{ro['pub_messages_per_pub']:>10.1f}{rp['pub_messages_per_pub']:>10.1f}"
            f"{ro['pub_delay_ms']:>9.3f}{rp['pub_delay_ms']:>9.3f}"
            f"{ro['matching_delay_us']:>11.0f}{rp['matching_delay_us']:>11.0f}"
            f"{rp['adv_trees_per_sub']:>12.1f}"
        )
    print()
    print("Bursty publisher: OctopiA SPR / IDR and PADRES TID-S / TID-D (cases: IDR's I/II/III; TID-D's "
          "subscriptions re-stamped / left on a congested link)")
    head = (
        f"{'network':>12}{'rate/s':>7}{'mode':>7}{'meanQ tgt':>10}{'peakQ':>7}{'peakQ iL':>9}"
        f"{'backlog':>9}"
        f"{'stab s':>8}{'stab iL s':>10}{'delay s':>9}{'<1 s':>7}{'HRP msgs':>9}{'cases I/II/III':>16}"
    )
    print(head)
    print("-" * len(head))
    for r in sorted(o["bursts"] + p["bursts"], key=lambda r: (NETWORKS.index(r["network"]), -r["rate"])):
        cases = r["idr_cases"]
        c = "/".join(str(cases.get(f"idr_case_{k}", 0)) for k in (1, 2, 3))
        if r["mode"] == "tid-d":
            tidd = r.get("tidd", {})
            stuck = tidd.get("tidd_no_alternative", 0) + tidd.get("tidd_over_budget", 0)
            c = f"{tidd.get('tidd_restamped', 0)}/{stuck}"
        elif r["mode"] != "idr":
            c = "-"
        print(
            f"{r['network']:>12}{r['rate']:>7.0f}{r['mode']:>7}{r['mean_q_target']:>10.1f}"
            f"{r['peak_q']:>7}{r['peak_q_ilinks']:>9}"
            f"{r['mean_backlog']:>9.0f}{r['stabilize_s']:>8.2f}{r['stabilize_ilinks_s']:>10.2f}"
            f"{r['hrp_delay_mean_s']:>9.3f}{r['hrp_under_1s']:>7.0%}{r['hrp_messages']:>9}{c:>16}"
        )
    alt = next((r.get("hrp_alternatives") for r in p["bursts"] if r.get("hrp_alternatives")), None)
    if alt:
        print(
            f"TID-D: of the {alt['path_brokers']} brokers on the HRP's tree paths to its subscribers, "
            f"{alt['with_another_tree']} hold another tree of the subscription with another next hop "
            "(where a re-stamping is possible at all)"
        )


def print_summary(rows: list[dict[str, Any]]) -> None:
    print("OctopiA vs PADRES (means over the sweep), beside §10; first column OctopiA (IDR in the")
    print("IDR-vs-SPR rows, TID-D in the TID-D-vs-TID-S rows), second PADRES (SPR in the IDR-vs-SPR")
    print("rows, TID-S in the TID-D-vs-TID-S rows)")
    head = f"{'metric':<54}{'OctopiA':>10}{'PADRES':>10}  {'measured':<26}{'paper':<26}{'agrees':<10}"
    print(head)
    print("-" * len(head))
    for r in rows:
        unit = f" [{r['unit']}]" if r["unit"] else ""
        print(
            f"{(r['metric'] + unit):<54}{fmt(r['octopia']):>10}{fmt(r['padres']):>10}  "
            f"{r['measured']:<26}{r['paper']:<26}{r['agrees']:<10}"
        )
