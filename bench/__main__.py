"""`make bench`: every benchmark in turn, or one of them.

    python -m bench [--quick]                     every benchmark (skipring, scale, antientropy,
                                                  dissemination, endtoend, matching, scot)
    python -m bench skipring [options]            BuildSR convergence and churn only
    python -m bench scale [options]               issue 14: messages per leave / crash repair,
                                                  intervals from corrupted states, anti-entropy
                                                  spread with flooding off, mass join (--large:
                                                  n to 16,384; --huge: 65,536, join 100,000)
    python -m bench antientropy [options]         anti-entropy repair cost only
    python -m bench dissemination [options]       arc broadcast vs flooding: messages and hops per publication
    python -m bench endtoend [options]            pubsub vs NATS, JetStream, Redis: latency, throughput, CPU, idle
    python -m bench matching [options]            content-based matching: index vs scan
    python -m bench scot [options]                OctopiA vs PADRES on S_e in the simulator (§10)
    python -m bench topics [options]              issue 14: idle frames and CPU per node against
                                                  topics per node (1 .. 1,000), real processes;
                                                  not in the default run (5 to 10 minutes)
    python -m bench tco [options]                 paper 001 §VI (Figs. 2-8) on the tco cores, beside
                                                  the paper's numbers; not in the default run
                                                  (--quick: seconds; the paper's size: about 17 min)
    python -m bench overlays [options]            skip ring, clique and tco side by side on paper 001's
                                                  workload in the simulator: peers, edges, diameters,
                                                  publications, repairs, idle cost; not in the default
                                                  run (--quick: about a minute)
    python -m bench pairing [options]             paper 004's pairing (§3.1) in the simulator, synchronous
                                                  and asynchronous: fraction paired, messages, contention
                                                  against d and phases against log2 n, n = 64 .. 16,384;
                                                  not in the default run (about 5 min; --quick: n to
                                                  1,024, seconds)
    python -m bench omen [options]                paper 003 §6 (Figs. 8-12, §6.3) on the omen cores in
                                                  the simulator, beside the paper's numbers, on a
                                                  synthetic stand-in workload; not in the default run
                                                  (--quick: minutes)
    python -m bench broker-failures [options]     3x3 SCOT of broker processes, an inner one stopped / cut off /
                                                  killed: detection, loss, recovery; not in the default
                                                  run (--quick: 70 s; 20 trials: 4.5 min)
    python -m bench scot-processes [options]      S_e as 56 broker processes beside the simulator, same seed:
                                                  RSS and idle CPU per broker, table sizes and control
                                                  messages of phases 1-2, delays; not in the default run
    python -m bench scot-failures [options]       S_e in the simulator, an inner or edge broker crashing during
                                                  a stream: lost before / after detection, duplicates, extra
                                                  messages, resync, per variant; not in the default run

`--quick` works in every form.  Options other than --quick need a benchmark name
(`python -m bench skipring --help`, `python -m bench antientropy --help`).
"""

from __future__ import annotations

import sys

from bench import (
    antientropy,
    brokerfailures,
    dissemination,
    endtoend,
    matching,
    omen,
    overlays,
    pairing,
    scale,
    scot,
    scotfailures,
    scotprocs,
    skipring,
    tco,
    topics,
)

BENCHMARKS = {
    "skipring": skipring.main,
    "scale": scale.main,
    "antientropy": antientropy.main,
    "dissemination": dissemination.main,
    "endtoend": endtoend.main,
    "matching": matching.main,
    "scot": scot.main,
    "topics": topics.main,
    "tco": tco.main,
    "overlays": overlays.main,
    "pairing": pairing.main,
    "omen": omen.main,
    "broker-failures": brokerfailures.main,
    "scot-processes": scotprocs.main,
    "scot-failures": scotfailures.main,
}
#: Run only when named: `python -m bench topics` joins 4 nodes to 1,000 topics (4 to 10 minutes
#: on a shared 2-core machine).
#: `python -m bench tco` at the paper's size recomputes Low-ODA on 2,000 nodes many times.
#: `python -m bench overlays` simulates three overlays on paper 001's workload (--quick: minutes).
#: `python -m bench pairing` is paper 004's pairing alone, measured up to 16,384 nodes.
#: `python -m bench omen` simulates OMen under churn, several runs per λ.
#: `python -m bench broker-failures` starts nine broker processes and fails one of them, trial after trial.
#: `python -m bench scot-processes` starts S_e's 56 broker processes, once per protocol.
#: `python -m bench scot-failures` simulates S_e with a failing broker, per variant, victim and seed.
SEPARATE = {"topics", "tco", "overlays", "pairing", "omen", "broker-failures", "scot-processes", "scot-failures"}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in BENCHMARKS:
        BENCHMARKS[args[0]](args[1:])
        return
    if any(arg in ("-h", "--help") for arg in args):
        print(__doc__)
        return
    unknown = [arg for arg in args if arg != "--quick"]
    if unknown:
        raise SystemExit(
            f"python -m bench: unknown argument(s) {' '.join(unknown)}; name a benchmark "
            f"({', '.join(BENCHMARKS)}) to pass it options, e.g. "
            f"`python -m bench skipring {' '.join(args)}`"
        )
    for name, run in BENCHMARKS.items():
        if name in SEPARATE:
            continue
        if name != next(iter(BENCHMARKS)):
            print()
        run(args)


if __name__ == "__main__":
    main()
