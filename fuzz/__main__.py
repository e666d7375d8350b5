"""The fuzz driver: ``python -m fuzz all`` (what `make fuzz` runs) or ``python -m fuzz run NAME``.

``all`` runs every target in its own child process under atheris, one after the other, each
for its share of inputs (`BUDGET`, times ``--scale``), and prints one line per target --
inputs run, seconds, crashes -- and a total line; it exits 1 if any target crashed or broke an
invariant.  ``run NAME`` is one such child: ``--runs N`` inputs or ``--seconds S`` (whichever
ends first), starting from the target's seeds.  Crashing inputs are written to
``fuzz-artifacts/NAME-crash-*`` and replay with ``python -m fuzz replay NAME FILE``.

Without atheris (``pip install atheris``; part of the ``test`` extra) ``--engine random``
runs the same targets on seeded random inputs and byte-level mutations of earlier ones, without
coverage guidance.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

#: Inputs per target in `make fuzz` (total 1,000,000); the cheap targets take the most.
BUDGET = {
    "framing": 560_000,
    "codec": 320_000,
    "node": 30_000,
    "supervisor": 30_000,
    "octopia": 30_000,
    "padres": 30_000,
}
#: Inputs of every other target (each registered overlay's node and supervisor, `fuzz.targets`).
OTHER_BUDGET = 10_000
#: The targets, for --help (the overlays' are known only once `fuzz.targets` is imported).
NAMES = ", ".join(BUDGET) + ", and NAME-node, NAME-supervisor for every registered overlay but the skip ring"
#: Longest input (bytes) libFuzzer makes per target: a core input is a sequence of steps.
MAX_LEN = {"framing": 4096, "codec": 4096}
CORE_MAX_LEN = 1024
ARTIFACTS = Path("fuzz-artifacts")


def _have_atheris() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def _run_atheris(name: str, runs: int, seconds: int, extra: list[str]) -> None:
    """Fuzz one target in this process (libFuzzer exits the process when done)."""
    import atheris

    with atheris.instrument_imports(include=["pubsub", "broker", "fuzz"]):
        from fuzz.targets import TARGETS, seeds
    target = TARGETS[name]
    ARTIFACTS.mkdir(exist_ok=True)
    corpus = tempfile.mkdtemp(prefix=f"fuzz-{name}-")
    for i, seed in enumerate(seeds(name)):
        Path(corpus, f"seed-{i}").write_bytes(seed)

    def one(data: bytes) -> None:
        target(data)

    args = [
        sys.argv[0],
        f"-runs={runs}",
        f"-max_total_time={seconds}",
        f"-max_len={MAX_LEN.get(name, CORE_MAX_LEN)}",
        "-print_final_stats=1",
        f"-artifact_prefix={ARTIFACTS}/{name}-",
        *extra,
        corpus,
    ]
    atheris.Setup(args, one)
    atheris.Fuzz()


def _run_random(name: str, runs: int, seconds: float, seed: int = 0) -> tuple[int, int]:
    """Fuzz one target without coverage guidance: (inputs run, crashes); the first crash is
    raised after writing its input to the artifacts directory."""
    from fuzz.targets import TARGETS, seeds

    target = TARGETS[name]
    rng = random.Random(f"{name}-{seed}")
    pool = seeds(name)
    limit = MAX_LEN.get(name, CORE_MAX_LEN)
    deadline = time.monotonic() + seconds
    done = 0
    while done < runs and time.monotonic() < deadline:
        if done < len(pool):
            data = pool[done]
        elif rng.random() < 0.5:
            buf = bytearray(rng.choice(pool))
            for _ in range(rng.randrange(1, 8)):
                if buf and rng.random() < 0.7:
                    buf[rng.randrange(len(buf))] = rng.randrange(256)
                else:
                    buf.insert(rng.randrange(len(buf) + 1), rng.randrange(256))
            data = bytes(buf[:limit])
        else:
            data = rng.randbytes(rng.randrange(1, limit))
        try:
            target(data)
        except Exception:
            ARTIFACTS.mkdir(exist_ok=True)
            (ARTIFACTS / f"{name}-crash-random-{seed}-{done}").write_bytes(data)
            raise
        done += 1
        if done % 97 == 0 and len(pool) < 512:
            pool.append(data)
    return done, 0


_DONE = re.compile(rb"stat::number_of_executed_units:\s*(\d+)")


def _child(name: str, runs: int, seconds: int, engine: str) -> tuple[int, float, int, str]:
    """Run one target in a child process: (inputs, seconds, crashes, output tail)."""
    cmd = [sys.executable, "-m", "fuzz", "run", name, "--runs", str(runs), "--seconds", str(seconds),
           "--engine", engine]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, check=False)
    took = time.monotonic() - start
    out = proc.stdout + proc.stderr
    found = _DONE.findall(out)
    inputs = int(found[-1]) if found else 0
    crashes = 0 if proc.returncode == 0 else 1
    return inputs, took, crashes, out.decode(errors="replace")[-3000:]


def _all(scale: float, seconds: int, engine: str, only: list[str]) -> int:
    from fuzz.targets import TARGETS

    names = only or [*BUDGET, *(name for name in TARGETS if name not in BUDGET)]
    unknown = [name for name in names if name not in TARGETS]
    if unknown:
        print(f"no target {', '.join(unknown)}; the targets are {', '.join(TARGETS)}", file=sys.stderr)
        return 2
    print(f"{'target':<18}{'inputs':>12}{'seconds':>10}{'inputs/s':>10}{'crashes':>9}", flush=True)
    total_inputs = total_crashes = 0
    total_seconds = 0.0
    for name in names:
        runs = max(1, int(BUDGET.get(name, OTHER_BUDGET) * scale))
        inputs, took, crashes, tail = _child(name, runs, seconds, engine)
        if crashes:
            print(tail, file=sys.stderr)
        rate = inputs / took if took else 0.0
        print(f"{name:<18}{inputs:>12,}{took:>10.1f}{rate:>10.0f}{crashes:>9}", flush=True)
        total_inputs += inputs
        total_seconds += took
        total_crashes += crashes
    print(f"{'total':<18}{total_inputs:>12,}{total_seconds:>10.1f}{'':>10}{total_crashes:>9}", flush=True)
    return 1 if total_crashes else 0


def main(argv: list[str] | None = None) -> int:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    everything = sub.add_parser("all", help="every target, each for its share of inputs")
    everything.add_argument("--scale", type=float, default=1.0, help="multiply every target's inputs")
    everything.add_argument("--seconds", type=int, default=3600, help="time limit per target")
    everything.add_argument("--only", nargs="*", default=[], metavar="NAME", help=f"these targets only ({NAMES})")
    one = sub.add_parser("run", help="one target (extra arguments go to libFuzzer)")
    one.add_argument("name", help=NAMES)
    one.add_argument("--runs", type=int, default=10_000_000)
    one.add_argument("--seconds", type=int, default=3600)
    replay = sub.add_parser("replay", help="run one target on saved inputs")
    replay.add_argument("name", help=NAMES)
    replay.add_argument("files", nargs="+", type=Path)
    for p in (everything, one):
        p.add_argument("--engine", choices=("atheris", "random"), default="atheris" if _have_atheris() else "random")
    args, extra = parser.parse_known_args(argv)
    if args.command != "all" and args.name not in BUDGET:  # an overlay's target: known once imported
        from fuzz.targets import TARGETS

        if args.name not in TARGETS:
            parser.error(f"no target {args.name!r}; the targets are {', '.join(TARGETS)}")
    if args.command == "all":
        return _all(args.scale, args.seconds, args.engine, args.only)
    if args.command == "replay":
        from fuzz.targets import TARGETS

        target: Callable[[bytes], int] = TARGETS[args.name]
        for path in args.files:
            print(f"{path}: {target(path.read_bytes())} message(s) handled, no crash")
        return 0
    if args.engine == "atheris":
        _run_atheris(args.name, args.runs, args.seconds, extra)
        return 0  # not reached: libFuzzer exits the process
    inputs, _ = _run_random(args.name, args.runs, args.seconds)
    print(f"stat::number_of_executed_units: {inputs}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
