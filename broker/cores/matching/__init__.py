"""Which subscriptions match a publication: an index, not a scan (issue 4, item 2).

Every subscription is first normalised into a few conditions, each on one attribute
(`broker.cores.matching.conditions`).  Two indexes evaluate these conditions without visiting
every subscription in Python, and a third scans; all three have the same interface (``add``,
``remove``, ``get``, ``match``, ``overlapping``), one module each (import the names from them;
this package re-exports nothing):

- `broker.cores.matching.vectorised`: `SubscriptionIndex`, the one the brokers use -- the
  conditions as numpy columns over subscription slots, order-preserving codes for the bounds
  (`broker.cores.matching.ordercodes`);
- `broker.cores.matching.counting`: `CountingIndex`, the classic counting algorithm of
  content-based brokers in pure Python;
- `broker.cores.matching.linear`: `LinearIndex`, the scan (the baseline).

The tests check all three agree; ``python -m bench matching`` measures them.
"""
