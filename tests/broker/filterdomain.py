"""The small finite domain the property tests of the content-based language and of the
matching indexes draw from: attribute names, constants, and the candidate values that
contain a witness for every satisfiable constraint set over those constants.
"""

from __future__ import annotations

import itertools

NAMES = ("x", "y", "z")
NUMBERS: tuple[int | float, ...] = (-2, -1, 0, 1, 2, 0.5, 1.5, -0.0, 1.0)
STRINGS = ("", "a", "b", "aa", "ab", "ba", "bb")


def _midpoints(values: list[float]) -> list[float]:
    ordered = sorted(set(values))
    return [(a + b) / 2 for a, b in itertools.pairwise(ordered)]


NUMBER_WITNESSES = sorted(
    set(NUMBERS) | set(_midpoints(list(NUMBERS))) | {min(NUMBERS) - 1, max(NUMBERS) + 1}
)
# Strings over {NUL, a, b, c} up to length 4: with constants over {a, b} of length <= 2 and at
# most 8 predicates on an attribute, some such string lies in every non-empty constraint set
# (the set is an interval of the string order minus constant points; if it has a member, lo or
# lo + NUL or lo + NUL + NUL is one, where lo is a constant, possibly followed by one NUL).
STRING_WITNESSES = ["".join(t) for n in range(5) for t in itertools.product("\0abc", repeat=n)]
