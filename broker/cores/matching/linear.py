"""`LinearIndex`: the matching indexes' interface by scanning every subscription (the baseline).

The tests check `broker.cores.matching.vectorised.SubscriptionIndex` and
`broker.cores.matching.counting.CountingIndex` against it; ``python -m bench matching``
measures all three.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

from broker.cores.language.filters import Filter
from broker.cores.language.relations import overlaps
from broker.cores.language.values import Publication

K = TypeVar("K", bound=Hashable)


class LinearIndex(Generic[K]):
    """The same interface as `SubscriptionIndex`, by scanning every subscription (the baseline)."""

    def __init__(self) -> None:
        self._filters: dict[K, Filter] = {}

    def __len__(self) -> int:
        return len(self._filters)

    def __contains__(self, key: object) -> bool:
        return key in self._filters

    def add(self, key: K, f: Filter) -> None:
        self._filters[key] = f

    def remove(self, key: K) -> bool:
        return self._filters.pop(key, None) is not None

    def get(self, key: K) -> Filter | None:
        return self._filters.get(key)

    def match(self, pub: Publication) -> set[K]:
        return {key for key, f in self._filters.items() if f.matches(pub)}

    def overlapping(self, adv: Filter) -> set[K]:
        return {key for key, f in self._filters.items() if overlaps(adv, f)}
