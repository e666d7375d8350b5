"""The `omen` overlay (paper 003, OMen): a topic-connected overlay mended under churn by
coordinators on an identifier circle, from local views built by gossip (docs/omen.md).

The package holds cores without I/O: the identifier circle (`circle`), the local views of a
node's predecessors (`views`, Alg. 2), T-Man over a peer-sampling core (`tman`, Alg. 3-4),
the churn queue, standby list, failover and garbage collection (`churn`, Alg. 5-6), the
shadow-based repair (`repair`, Alg. 1), and the simulator's baselines and workloads."""
