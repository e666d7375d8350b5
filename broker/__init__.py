"""SCOT broker mode: OctopiA content-based brokers on a structured cyclic overlay.

The specification is ``../shared/papers/002_*.txt`` (OctopiA).  Modules:

- `broker.cores.language`  the content-based language: typed publications, filters (conjunctions of
  predicates) used as advertisements and subscriptions, parsing, matching, overlap, covering,
  the wire form of filters and publications.
- `broker.cores.matching`  `SubscriptionIndex`: which subscriptions match a publication, by an index
  (counting over per-attribute structures) rather than a scan.
- `broker.stockquote` the stock-quote workload of §10 (500 symbols, 7 attributes, 2% selectivity).
- `broker.cores.topology`, `broker.cores.octopia`, `broker.cores.padres`, `broker.sim`: the SCOT topology, the
  routing cores and their simulator.
"""
