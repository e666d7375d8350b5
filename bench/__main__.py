"""`make bench`: every benchmark in turn (python -m bench [--quick])."""

from __future__ import annotations

import sys

from bench import skipring


def main() -> None:
    skipring.main(sys.argv[1:])


if __name__ == "__main__":
    main()
