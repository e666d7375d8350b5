"""The supervisor's side of BuildSR (paper 000, §3; Alg. 3): pure state machines, no I/O.

* `core`        `SupervisorCore`: Subscribe, Unsubscribe, GetConfiguration, Timeout
                (CheckLabels and the configurations sent round-robin), crash handling (§3.3)
                and each topic's retention settings;
* `database`    a topic's database ⊂ {0,1}* × V kept sorted by label, with the repairs of
                §3.1 (`check_labels`, `check_multiple_copies`);
* `sharding`    `ShardedSupervisor`: one supervisor among several, for the topics it owns;
* `corruption`  a corrupted database (the four faults of §3.1), for self-stabilization
                experiments.

The daemon that runs them on the network runtime, with its durable store and web view, is
`pubsub.supervisor`; nothing here imports it.
"""
