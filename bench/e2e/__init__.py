"""The end-to-end benchmark (`python -m bench endtoend`, entry in bench/endtoend.py): pubsub
against NATS core, NATS JetStream and Redis pub/sub, real processes on 127.0.0.1.

Modules of one job each:

    common          payloads, frame kinds, percentiles, CPU from /proc, the event loop
    servers         nats-server / redis-server as processes on free ports (find, start, stop)
    subscriber      the subscriber worker process (`python -m bench.e2e.subscriber`), one
                    adapter per system; records (publication id, receipt time)
    subscribers     the harness side: n worker processes, their readiness, completion, dumps
    drive           the publisher loops: paced (latency) and windowed (throughput)
    systems         pubsub, NATS core, JetStream and Redis behind one small interface
    run             one measured run of one system at one n (latency, throughput, CPU, frames)
    idle            the idle cost of a pubsub ring (one topic; one node in 50 topics)
    report          tables, ratios and what each system guarantees
"""
