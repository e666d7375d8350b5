"""Entry point for ``spark-submit pubsub/ops/analysis/submit.py RUN_DIR ...`` (the same
options as ``pubsub analyze``; deploy/spark-submit.sh builds the command)."""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # spark-submit runs this file as a script: don't let this
    # directory's modules shadow anything, and import the package from the zip / install.
    _here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _here]

from pubsub.ops.analysis.cli import analyze  # noqa: E402 - after the path fix above


def main(argv: list[str] | None = None) -> None:
    """Run `pubsub analyze` with `argv` (default: the command line)."""
    analyze.main(args=argv, prog_name="submit.py")


if __name__ == "__main__":
    main()
