"""Medians and spreads over the repeats, ratios pubsub/X, and the tables printed to stdout."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from bench.e2e.common import PUBLICATION_FRAME_KINDS, rnd, spread
from bench.e2e.systems import GUARANTEES


def _ok(run: dict[str, Any], part: str) -> dict[str, Any] | None:
    found = run.get(part)
    return found if isinstance(found, dict) else None


def _spread_of(rows: Iterable[dict[str, Any]], get: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    return {k: rnd(v, 3) if isinstance(v, float) else v for k, v in spread(get(r) for r in rows).items()}


def _roles_of(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per role, the spread over the repeats of each repeat's median process
    (`bench.e2e.run.paced_cpu_by_role`)."""
    roles = sorted({role for r in rows for role in r.get("cpu_us_per_pub_by_role") or {}})

    def median_of(role: str) -> Callable[[dict[str, Any]], Any]:
        return lambda r: ((r.get("cpu_us_per_pub_by_role") or {}).get(role) or {}).get("median")

    return {role: _spread_of(rows, median_of(role)) for role in roles}


def summarize(runs: list[dict[str, Any]], systems: list[str], sizes: list[int], tput_n: int) -> dict[str, Any]:
    latency: dict[str, dict[str, Any]] = {}
    throughput: dict[str, Any] = {}
    frames: dict[str, Any] = {}
    for system in systems:
        mine = [r for r in runs if r["system"] == system]
        latency[system] = {}
        for n in sizes:
            rows = [lat for r in mine if r["n"] == n and (lat := _ok(r, "latency"))]
            latency[system][str(n)] = {
                "repeats": len(rows),
                "failed_runs": sum(1 for r in mine if r["n"] == n and "error" in r),
                "p50_ms": _spread_of(rows, lambda r: r["p50_ms"]),
                "p99_ms": _spread_of(rows, lambda r: r["p99_ms"]),
                "max_ms": _spread_of(rows, lambda r: r["max_ms"]),
                "ack_p50_ms": _spread_of(rows, lambda r: r["ack_p50_ms"]),
                "cpu_ms_per_pub": _spread_of(rows, lambda r: r.get("cpu_ms_per_pub")),
                "cpu_us_per_pub_by_role": _roles_of(rows),
                "incomplete": [r["incomplete"] for r in rows],
                "failed_publishes": [r["failed"] for r in rows],
            }
            if system == "pubsub":
                frame_rows = [f for r in mine if r["n"] == n and (f := _ok(r, "frames"))]
                frames[str(n)] = {
                    "publication_frames_per_pub_per_node": _spread_of(
                        frame_rows, lambda r: r["publication_frames_per_pub_per_node"]
                    ),
                    "peer_frames_per_pub_per_node": _spread_of(frame_rows, lambda r: r["peer_frames_per_pub_per_node"]),
                    "all_frames_per_pub_per_node": _spread_of(frame_rows, lambda r: r["all_frames_per_pub_per_node"]),
                }
        rows = [t for r in mine if r["n"] == tput_n and (t := _ok(r, "throughput"))]
        throughput[system] = {
            "repeats": len(rows),
            "held_per_s": _spread_of(rows, lambda r: r["held_per_s"]),
            "acked_per_s": _spread_of(rows, lambda r: r["acked_per_s"]),
            "held_seconds": _spread_of(rows, lambda r: r["held_seconds"]),
            "held_seconds_polled": _spread_of(rows, lambda r: r.get("held_seconds_polled")),
            "held_from": sorted({r["held_from"] for r in rows}),
            "zero_loss": [r["zero_loss"] for r in rows],
            "duplicates": [r["duplicates"] for r in rows],
            "missing_total": [sum(r["missing_per_subscriber"]) for r in rows],
            "node_cpu_us_per_pub_median": _spread_of(
                rows, lambda r: (r.get("node_cpu_us_per_pub") or {}).get("median")
            ),
            "node_cpu_us_per_pub_max": _spread_of(rows, lambda r: (r.get("node_cpu_us_per_pub") or {}).get("max")),
            "server_cpu_us_per_pub": _spread_of(rows, lambda r: r.get("server_cpu_us_per_pub")),
            "supervisor_cpu_us_per_pub": _spread_of(rows, lambda r: r.get("supervisor_cpu_us_per_pub")),
            "subscriber_cpu_us_per_msg_median": _spread_of(
                rows, lambda r: (r.get("subscriber_cpu_us_per_msg") or {}).get("median")
            ),
            "subscriber_cpu_us_per_msg_max": _spread_of(
                rows, lambda r: (r.get("subscriber_cpu_us_per_msg") or {}).get("max")
            ),
            "harness_cpu_us_per_pub": _spread_of(rows, lambda r: r.get("harness_cpu_us_per_pub")),
            "exactly_k_per_node": [r["exactly_k_per_node"] for r in rows if "exactly_k_per_node" in r],
        }
    ratios: dict[str, Any] = _ratios_of("pubsub", systems, sizes, latency, throughput)
    if "pubsub-embedded" in systems:  # the node inside the subscriber process, against the same anchors
        ratios["embedded"] = _ratios_of("pubsub-embedded", systems, sizes, latency, throughput)
    if "relay-floor" in systems:  # the topology's floor, against the same anchors
        ratios["floor"] = _ratios_of("relay-floor", systems, sizes, latency, throughput)
    if "pubsub" in systems and "pubsub-tls" in systems:  # TLS and signing beside the plain path
        ratios["tls_vs_plain"] = {
            "latency_p50": {
                str(n): _ratio(latency["pubsub-tls"][str(n)]["p50_ms"], latency["pubsub"][str(n)]["p50_ms"])
                for n in sizes
            },
            **{key: _ratio(throughput["pubsub-tls"][key], throughput["pubsub"][key])
               for key in ("held_per_s", "acked_per_s")},
            "node_cpu_us_per_pub_median": _ratio(
                throughput["pubsub-tls"]["node_cpu_us_per_pub_median"],
                throughput["pubsub"]["node_cpu_us_per_pub_median"],
            ),
        }
    return {"latency": latency, "throughput": throughput, "frames": frames, "ratios": ratios}


def _ratios_of(
    mine: str, systems: list[str], sizes: list[int], latency: dict[str, Any], throughput: dict[str, Any]
) -> dict[str, Any]:
    """Ratios `mine`/X of the medians for every other system X that is not a pubsub
    variant but for plain pubsub itself (latency, paced CPU, held/s, acked/s)."""
    ratios: dict[str, Any] = {"latency_p50": {}, "paced_cpu": {}, "held_per_s": {}, "acked_per_s": {}}
    for other in systems:
        if mine not in systems or other == mine or (other.startswith("pubsub") and other != "pubsub"):
            continue
        for key, field in (("latency_p50", "p50_ms"), ("paced_cpu", "cpu_ms_per_pub")):
            ratios[key][other] = {
                str(n): _ratio(latency[mine][str(n)][field], latency[other][str(n)][field]) for n in sizes
            }
        for key in ("held_per_s", "acked_per_s"):
            ratios[key][other] = _ratio(throughput[mine][key], throughput[other][key])
    return ratios


def _ratio(mine: dict[str, Any], theirs: dict[str, Any]) -> float | None:
    a, b = mine.get("median"), theirs.get("median")
    return None if not a or not b else round(a / b, 3)


# --- printing --------------------------------------------------------------------------------
def cell(s: dict[str, Any], digits: int = 2) -> str:
    if not s or s.get("median") is None:
        return "-"
    text = f"{s['median']:.{digits}f}"
    if s.get("count", 0) > 1:
        text += f" [{s['min']:.{digits}f}-{s['max']:.{digits}f}]"
    return text


def ratio_cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def print_tables(summary: dict[str, Any], params: dict[str, Any], systems: list[str], notrun: dict[str, str]) -> None:
    sizes, tput_n, repeats = params["sizes"], params["throughput_n"], params["repeats"]
    each = f"median of {repeats} repeats [min-max]" if repeats > 1 else "1 repeat"
    print()
    print(
        f"== Latency: {params['count']} publications paced at {params['rate']:g}/s, "
        f"{params['payload_bytes']}-byte payloads, one publisher; time from the publish call until the LAST "
        f"of n subscriber processes received it (ms); {each}"
    )
    head = f"{'n':>3}  {'system':<16}{'p50':>24}{'p99':>24}{'max':>24}{'ack p50':>22}  incomplete"
    print(head)
    print("-" * len(head))
    for n in sizes:
        for system in systems:
            row = summary["latency"][system][str(n)]
            if not row["repeats"]:
                why = notrun.get(system) or f"all {row['failed_runs']} runs failed"
                print(f"{n:>3}  {system:<16}  not run: {why}")
                continue
            print(
                f"{n:>3}  {system:<16}  {cell(row['p50_ms']):>22}  {cell(row['p99_ms']):>22}  {cell(row['max_ms']):>22}"
                f"  {cell(row['ack_p50_ms']):>20}  {','.join(map(str, row['incomplete']))}"
            )
    print()
    print(
        "== CPU per publication of the whole deployment in the latency run, ms (/proc: every process of the "
        "system, the n subscriber processes and the harness; the paced phase and its drain); " + each
    )
    print(f"{'n':>3}  " + "".join(f"{system:>24}" for system in systems))
    for n in sizes:
        print(f"{n:>3}  " + "".join(
            f"{cell(summary['latency'][system][str(n)]['cpu_ms_per_pub']):>24}" for system in systems))
    print()
    print("== The same CPU by role, µs per paced publication (the median process of each role; " + each + ")")
    for n in sizes:
        for system in systems:
            roles = summary["latency"][system][str(n)]["cpu_us_per_pub_by_role"]
            if roles:
                print(f"{n:>3}  {system:<16}  " + "  ".join(f"{role} {cell(v, 0)}" for role, v in roles.items()))
    for mine, ratios in (
        ("pubsub", summary["ratios"]),
        ("pubsub-embedded", summary["ratios"].get("embedded")),
        ("relay-floor", summary["ratios"].get("floor")),
    ):
        others = list((ratios or {}).get("latency_p50", {}))
        if mine not in systems or not others or ratios is None:
            continue
        print()
        print(
            f"== Ratios {mine}/X of the medians "
            f"(latency p50: above 1 = {mine} slower; throughput: below 1 = {mine} slower)"
        )
        head = f"{'':<22}" + "".join(f"{'vs ' + o:>15}" for o in others)
        print(head)
        for n in sizes:
            print(f"{'latency p50, n=' + str(n):<22}" + "".join(
                f"{ratio_cell(ratios['latency_p50'][o][str(n)]):>15}" for o in others))
        for n in sizes:
            print(f"{'paced CPU/pub, n=' + str(n):<22}" + "".join(
                f"{ratio_cell(ratios['paced_cpu'][o][str(n)]):>15}" for o in others))
        print(f"{'held/s, n=' + str(tput_n):<22}" + "".join(
            f"{ratio_cell(ratios['held_per_s'][o]):>15}" for o in others))
        print(f"{'acked/s, n=' + str(tput_n):<22}" + "".join(
            f"{ratio_cell(ratios['acked_per_s'][o]):>15}" for o in others))

    print()
    print(
        f"== Throughput at n={tput_n}: one publisher, W={params['window']} in flight, K={params['total']} "
        f"publications of {params['payload_bytes']} bytes; held/s = K / (first publish call -> every "
        f"subscriber holds every publication); acked/s = publish calls acknowledged per second; {each}"
    )
    head = f"{'system':<16}{'held/s':>28}{'acked/s':>28}{'held s':>22}  {'zero loss':<10}{'dups':<6}holds"
    print(head)
    print("-" * len(head))
    for system in systems:
        row = summary["throughput"][system]
        if not row["repeats"]:
            print(f"{system:<16}  not run: {notrun.get(system) or 'every run failed'}")
            continue
        loss = "yes" if all(row["zero_loss"]) else "NO " + ",".join(map(str, row["missing_total"]))
        holds = (
            f"stored at every node (status; when: {', '.join(row['held_from'])}; polls alone: "
            f"{cell(row['held_seconds_polled'], 3)} s)"
            if system in ("pubsub", "pubsub-tls") else "received by the n subscriber processes"
        )
        print(
            f"{system:<16}  {cell(row['held_per_s'], 1):>26}  {cell(row['acked_per_s'], 1):>26}"
            f"  {cell(row['held_seconds'], 3):>20}  {loss:<10}{sum(row['duplicates']):<6}{holds}"
        )

    tls = summary["ratios"].get("tls_vs_plain")
    if tls:
        print()
        print("== TLS with signed publications beside the plain path: ratios pubsub-tls/pubsub of the medians "
              "(throughput: the issue's goal is at least 0.80)")
        print(f"{'held/s, n=' + str(tput_n):<24}{ratio_cell(tls['held_per_s']):>10}")
        print(f"{'acked/s, n=' + str(tput_n):<24}{ratio_cell(tls['acked_per_s']):>10}")
        print(f"{'node CPU/pub, n=' + str(tput_n):<24}{ratio_cell(tls['node_cpu_us_per_pub_median']):>10}")
        for n in sizes:
            print(f"{'latency p50, n=' + str(n):<24}{ratio_cell(tls['latency_p50'][str(n)]):>10}")

    print()
    print(
        "== CPU during the throughput run, us per publication (/proc utime+stime in 10 ms ticks, "
        "from the first publish call until every subscriber held everything)"
    )
    head = (
        f"{'system':<16}{'per node, median':>20}{'per node, max':>20}{'server':>16}"
        f"{'subscriber/msg med':>22}{'harness':>18}"
    )
    print(head)
    print("-" * len(head))
    for system in systems:
        row = summary["throughput"][system]
        if not row["repeats"]:
            continue
        server = row["supervisor_cpu_us_per_pub"] if system.startswith("pubsub") else row["server_cpu_us_per_pub"]
        print(
            f"{system:<16}  {cell(row['node_cpu_us_per_pub_median'], 0):>18}"
            f"  {cell(row['node_cpu_us_per_pub_max'], 0):>18}"
            f"  {cell(server, 0):>14}  {cell(row['subscriber_cpu_us_per_msg_median'], 0):>20}"
            f"  {cell(row['harness_cpu_us_per_pub'], 0):>16}"
        )
    print("  (pubsub: 'server' is the supervisor; its subscribers are the nodes, there are no subscriber processes;"
          " pubsub-embedded: the subscriber processes are the nodes; relay-floor: the relays are its nodes)")

    if summary["frames"]:
        print()
        print(
            "== pubsub frames per publication per node, latency run (status stats.frames_out, summed over "
            f"nodes / (publications x n)); carrying = kinds {', '.join(sorted(PUBLICATION_FRAME_KINDS))}; "
            "peer = all kinds but those to clients; all = every kind"
        )
        head = f"{'n':>3}{'carrying':>22}{'peer':>22}{'all':>22}"
        print(head)
        print("-" * len(head))
        for n in sizes:
            row = summary["frames"].get(str(n))
            if row:
                print(
                    f"{n:>3}  {cell(row['publication_frames_per_pub_per_node'], 3):>20}  "
                    f"{cell(row['peer_frames_per_pub_per_node'], 3):>20}  "
                    f"{cell(row['all_frames_per_pub_per_node'], 3):>20}"
                )


def print_idle(idle: list[dict[str, Any]]) -> None:
    if not idle:
        return
    print()
    print(
        "== pubsub idle: legitimate rings, no publications; per node: peer frames sent per second, "
        "per peer per Timeout interval, CPU % of one core; median [min-max] over nodes"
    )
    head = (
        f"{'scenario':<22}{'n':>4}{'topics':>7}{'window s':>9}{'frames/s':>22}{'peers':>8}"
        f"{'frames/peer/interval':>26}{'CPU %':>20}"
    )
    print(head)
    print("-" * len(head))
    for row in idle:
        if "error" in row:
            print(f"{row['scenario']:<22}{row['n']:>4}{row['topics']:>7}  FAILED: {row['error']}")
            continue
        print(
            f"{row['scenario']:<22}{row['n']:>4}{row['topics']:>7}{row['window_s']:>9.1f}"
            f"  {cell(row['frames_per_s_per_node'], 1):>20}{cell(row['peers_per_node'], 0).split(' ')[0]:>8}"
            f"  {cell(row['frames_per_peer_per_interval'], 2):>24}  {cell(row['cpu_pct_per_node'], 1):>18}"
        )
        kinds = ", ".join(f"{k} {v:g}" for k, v in row["by_kind_per_node_per_interval"].items())
        print(f"{'':<26}per node per interval: {kinds}; interval {row['interval_s']:g} s")


def print_guarantees(systems: list[str]) -> None:
    print()
    print("== What each system guarantees (the numbers above are not like-for-like):")
    for system in systems:
        print(f"  {system:<17}{GUARANTEES[system]}")


#: A measured phase during which other processes used more than this share of the machine
#: is flagged as contended.
CONTENDED = 0.10


def print_contention(runs: list[dict[str, Any]], idle: list[dict[str, Any]]) -> None:
    """How much of the machine other processes used while we measured (bench/e2e/common.py,
    `Contention`); flagged phases are kept in the medians but named here."""
    phases: list[tuple[str, float]] = []
    for run in runs:
        for part in ("latency", "throughput"):
            found = (run.get(part) or {}).get("contention")
            if found:
                name = f"{run['system']} n={run['n']} repeat {run['repeat'] + 1} {part}"
                phases.append((name, found["others_share"]))
    for row in idle:
        if row.get("contention"):
            phases.append((f"idle {row['scenario']}", row["contention"]["others_share"]))
    if not phases:
        return
    flagged = [(name, share) for name, share in phases if share > CONTENDED]
    worst = max(share for _, share in phases)
    print()
    print(
        f"== Other processes on the machine (CPU share while we measured; kernel threads included): "
        f"{len(flagged)} of {len(phases)} measured phases above {CONTENDED:.0%}, the highest {worst:.0%}"
    )
    for name, share in flagged:
        print(f"  contended: {name}: others used {share:.0%} of the machine")
