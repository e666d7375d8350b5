"""SCOT broker mode: OctopiA content-based brokers on a structured cyclic overlay.

The specification is ``../shared/papers/002_*.txt`` (OctopiA).  Modules:

- `broker.cores.language`  the content-based language, one module per job: typed values and
  publications, predicates, filters (conjunctions of predicates) used as advertisements and
  subscriptions, satisfiability, overlap and covering, the text forms; filters' wire form.
- `broker.cores.matching`  which subscriptions match a publication: `SubscriptionIndex` (vectorised,
  the brokers' index), `CountingIndex` (the counting algorithm) and `LinearIndex` (a scan).
- `broker.stockquote` the stock-quote workload of §10 (500 symbols, 7 attributes, 2% selectivity).
- `broker.cores.topology`, `broker.topologyfile`, `broker.cores.octopia`, `broker.cores.padres`,
  `broker.sim`: the SCOT topology and its files, the routing cores and their simulator.
"""
