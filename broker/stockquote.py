"""The stock-quote workload of OctopiA §10: 500 symbols, 7 attributes, 2% selectivity.

The paper used daily quotes of 500 stock symbols (Yahoo Finance) with 7 attributes and
synthetic advertisements and subscriptions of 2% selectivity; the data set itself is not
available here, so quotes are generated with the same shape, deterministically from a seed:

- ``symbol``: 500 three-letter tickers ``L1 L2 L3`` (10 x 10 x 5 letters), so a one-letter
  prefix selects 10% of the symbols and a two-letter prefix 1%;
- ``date``: one of 250 trading days of 2023, ``"2023-MM-DD"`` (strings, ordered);
- ``open``, ``high``, ``low``, ``close``: floats with 2 decimals around a per-symbol base price
  (log-uniform in 5..500), ``low <= open, close <= high``;
- ``volume``: an integer, log-uniform in 10^3..10^7.

A publication draws its symbol and day uniformly.  A subscription constrains all 7 attributes
and is built from conditions whose coverage of that distribution is known, so that each one
matches about 2% of the publications (`SELECTIVITY`); the benchmark reports the measured rate.
An advertisement (`StockQuotes.advertisement`) describes one symbol's quotes: its symbol, its
price band, and the other attributes as present.
"""

from __future__ import annotations

import datetime
import math
import random
from dataclasses import dataclass, field

from broker.cores.language.filters import Filter
from broker.cores.language.predicates import Predicate
from broker.cores.language.values import Value

SYMBOLS = 500
ATTRIBUTES = ("symbol", "open", "high", "low", "close", "volume", "date")
SELECTIVITY = 0.02

_FIRST = "ABCDEFGHKM"  # 10 first letters -> 10% of the symbols each
_SECOND = "AEILNORSTU"  # 10 second letters -> 1% each
_THIRD = "BCDPX"  # 5 third letters
_MIN_BASE, _MAX_BASE = 5.0, 500.0
_VOL_LO, _VOL_HI = 3, 7  # log10 of the volume range
# Price noise around the base: open in [0.9, 1.1] x base, close within 5% of open, high/low 2% out.
_PRICE_LO = 0.9 * 0.95 * 0.98
_PRICE_HI = 1.1 * 1.05 * 1.02


def _trading_days(count: int = 250) -> list[str]:
    days: list[str] = []
    day = datetime.date(2023, 1, 2)
    while len(days) < count:
        if day.weekday() < 5:
            days.append(day.isoformat())
        day += datetime.timedelta(days=1)
    return days


@dataclass
class StockQuotes:
    """The workload for one seed: symbols with base prices, and generators."""

    seed: int = 0
    symbols: list[str] = field(init=False)
    base: dict[str, float] = field(init=False)
    days: list[str] = field(init=False)

    def __post_init__(self) -> None:
        rng = random.Random(f"stockquote-{self.seed}")
        self.symbols = [a + b + c for a in _FIRST for b in _SECOND for c in _THIRD]
        assert len(self.symbols) == SYMBOLS
        self.base = {
            s: round(math.exp(rng.uniform(math.log(_MIN_BASE), math.log(_MAX_BASE))), 2)
            for s in self.symbols
        }
        self.days = _trading_days()

    # ------------------------------------------------------------------ publications

    def publication(self, rng: random.Random, symbol: str | None = None) -> dict[str, Value]:
        """One quote (of ``symbol`` if given, else of a uniformly drawn symbol)."""
        sym = symbol if symbol is not None else rng.choice(self.symbols)
        base = self.base[sym]
        open_ = base * rng.uniform(0.9, 1.1)
        close = open_ * rng.uniform(0.95, 1.05)
        high = max(open_, close) * rng.uniform(1.0, 1.02)
        low = min(open_, close) * rng.uniform(0.98, 1.0)
        return {
            "symbol": sym,
            "open": round(open_, 2),
            "high": round(high, 2),
            "low": round(low, 2),
            "close": round(close, 2),
            "volume": int(10 ** rng.uniform(_VOL_LO, _VOL_HI)),
            "date": rng.choice(self.days),
        }

    def publications(self, count: int, rng: random.Random) -> list[dict[str, Value]]:
        return [self.publication(rng) for _ in range(count)]

    # ------------------------------------------------------------------ advertisements

    def advertisement(self, symbol: str) -> Filter:
        """What a publisher of ``symbol``'s quotes announces (7 attributes)."""
        base = self.base[symbol]
        lo = math.floor(base * _PRICE_LO * 100) / 100
        hi = math.ceil(base * _PRICE_HI * 100) / 100
        preds = [Predicate("symbol", "=", symbol), Predicate("volume", ">=", 0)]
        for attr in ("open", "high", "low", "close"):
            preds += [Predicate(attr, ">=", lo), Predicate(attr, "<=", hi)]
        preds += [Predicate("date", ">=", self.days[0]), Predicate("date", "<=", self.days[-1])]
        return Filter(tuple(preds))

    # ------------------------------------------------------------------ subscriptions

    def _date_window(self, rng: random.Random, coverage: float) -> list[Predicate]:
        width = max(1, round(coverage * len(self.days)))
        start = rng.randrange(len(self.days) - width + 1)
        return [
            Predicate("date", ">=", self.days[start]),
            Predicate("date", "<=", self.days[start + width - 1]),
        ]

    def _volume_at_least(self, coverage: float) -> Predicate:
        # volume is log-uniform over [10^3, 10^7): P(volume >= v) = (7 - log10 v) / 4.
        return Predicate("volume", ">=", int(10 ** (_VOL_HI - coverage * (_VOL_HI - _VOL_LO))))

    def _loose_prices(self, rng: random.Random, skip: str = "") -> list[Predicate]:
        """Sanity bounds every quote satisfies (a subscription names all 7 attributes)."""
        floor = _MIN_BASE * _PRICE_LO
        ceiling = _MAX_BASE * _PRICE_HI
        preds = []
        for attr in ("open", "high", "low", "close"):
            if attr == skip:
                continue
            if rng.random() < 0.5:
                preds.append(Predicate(attr, ">", round(rng.uniform(0.0, floor), 2)))
            else:
                preds.append(Predicate(attr, "<", round(rng.uniform(ceiling, 2 * ceiling), 2)))
        return preds

    def subscription(self, rng: random.Random) -> Filter:
        """A subscription on all 7 attributes matching about 2% of the quotes.

        Four shapes, in proportions 35/25/25/15% (coverage of each condition in brackets):
        sector and period  -- symbol prefix L1 [10%], a 50-day window [20%];
        sector and volume  -- symbol prefix L1 [10%], volume above its 80th percentile [20%];
        price band, period -- close within a band of 0.2 decades [~10%], a 50-day window [20%];
        sector and price   -- symbol prefix L1 [10%], close within 0.4 decades [~20%].
        All other attributes get conditions every quote satisfies.
        """
        shape = rng.random()
        preds: list[Predicate] = []
        all_days = [Predicate("date", ">=", self.days[0]), Predicate("date", "<=", self.days[-1])]
        sector = Predicate("symbol", "prefix", rng.choice(_FIRST))
        if shape < 0.35:
            preds += [sector, *self._date_window(rng, 0.2), self._volume_at_least(1.0)]
            preds += self._loose_prices(rng)
        elif shape < 0.6:
            preds += [sector, self._volume_at_least(0.2), rng.choice(all_days)]
            preds += self._loose_prices(rng)
        elif shape < 0.85:
            preds += [Predicate("symbol", "exists"), *self._date_window(rng, 0.2)]
            preds += [*self._close_band(rng, 0.1), self._volume_at_least(1.0)]
            preds += self._loose_prices(rng, skip="close")
        else:
            preds += [sector, *self._close_band(rng, 0.2), rng.choice(all_days)]
            preds += [self._volume_at_least(1.0), *self._loose_prices(rng, skip="close")]
        return Filter(tuple(preds))

    def _close_band(self, rng: random.Random, coverage: float) -> list[Predicate]:
        # log10(base) is uniform over 2 decades; a band of 2 * coverage decades covers about
        # `coverage` of the quotes (edge effects and noise aside).
        decades = 2.0 * coverage
        start = rng.uniform(math.log10(_MIN_BASE), math.log10(_MAX_BASE) - decades)
        return [
            Predicate("close", ">=", round(10**start, 2)),
            Predicate("close", "<", round(10 ** (start + decades), 2)),
        ]

    def subscriptions(self, count: int, rng: random.Random) -> list[Filter]:
        return [self.subscription(rng) for _ in range(count)]
