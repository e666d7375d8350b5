"""The stock-quote workload of OctopiA §10 (`broker.stockquote`): its shape, its selectivity,
and publications that stay inside their publisher's advertisement.
"""

from __future__ import annotations

import json
import random

from broker.cores.language.relations import overlaps
from broker.cores.language.values import validate_publication
from broker.cores.matching.vectorised import SubscriptionIndex
from broker.stockquote import ATTRIBUTES, SYMBOLS, StockQuotes


def test_stock_quote_workload_shape_and_selectivity() -> None:
    workload = StockQuotes(seed=3)
    rng = random.Random(3)
    assert len(set(workload.symbols)) == SYMBOLS
    pubs = workload.publications(400, rng)
    subs = workload.subscriptions(400, rng)
    assert all(tuple(sorted(p)) == tuple(sorted(ATTRIBUTES)) for p in pubs)
    assert all(validate_publication(p) == p for p in pubs)
    assert all(f.attributes == frozenset(ATTRIBUTES) for f in subs)
    index: SubscriptionIndex[int] = SubscriptionIndex()
    for key, f in enumerate(subs):
        index.add(key, f)
    matched = sum(len(index.match(p)) for p in pubs)
    assert 0.012 < matched / (len(pubs) * len(subs)) < 0.03  # about 2%
    # A publisher's quotes stay inside its advertisement, and it overlaps the subscriptions
    # that can match them.
    for symbol in workload.symbols[:20]:
        adv = workload.advertisement(symbol)
        quotes = [workload.publication(rng, symbol) for _ in range(30)]
        assert all(adv.matches(q) for q in quotes)
        for f in subs:
            if any(f.matches(q) for q in quotes):
                assert overlaps(adv, f)
    assert json.dumps(pubs[0])  # JSON-friendly
