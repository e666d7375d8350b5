"""Delivery latency, with live deliveries apart from history copied to late joiners.

A ``delivery`` event (docs/events.md) is written when a node stores a publication for the
first time; its latency is ``delivered_ts - published_ts``.  A node that joins a topic
receives the topic's whole history through anti-entropy, and the "latency" of such a copy
is the age of the publication (seconds to hours), not how fast the system delivers: in one
row, 9 ms and 14 s mix into a meaningless p99.  So every delivery is classified:

* **history** -- the publication was published *before* the receiving node's current
  membership of the topic began;
* **live** -- everything else (published while the node was a member, or no membership
  start is known for it).

A node's membership of a topic begins at a ``snapshot`` with ``member: true`` whose
previous event for that node and topic is none, a ``snapshot`` with ``member: false`` (it
had left), or a ``crash`` marker naming the node (it had crashed: after a restart the node
rejoins and catches up on what it missed, which is history too), or a snapshot with a
smaller ``interval`` than the one before it (the Timeout counter starts again at 0 with
every process: the daemon was restarted, cleanly or not, and what it fetches on coming
back was published while it was away).  The membership start of a delivery is the latest
such instant at or before its ``delivered_ts``.

Quantiles (exact, Spark SQL's ``percentile``) and a 101-point CDF are computed per topic,
class (``delivery``: ``live`` / ``history``) and ``via``, plus ``via = all`` per topic and
class -- never across the two classes.
"""

from __future__ import annotations

from typing import Any

#: Cumulative fractions at which the latency CDF is sampled.
CDF_POINTS = [i / 100 for i in range(101)]
#: The two classes of deliveries.
LIVE, HISTORY = "live", "history"


def membership_starts(good: Any, crash_targets: list[tuple[str, float]], F: Any) -> Any:
    """DataFrame (source, topic, joined_ts): every instant a node's membership of a topic began."""
    from pyspark.sql import Window

    snaps = good.where(F.col("kind") == "snapshot").select(
        "source", "topic", "ts", F.coalesce(F.col("member"), F.lit(False)).alias("member"), F.lit(1).alias("order"),
        F.col("interval").cast("long").alias("interval"),
    )
    spark = good.sparkSession
    if crash_targets:
        crashes = spark.createDataFrame(crash_targets, "source string, ts double")
        pairs = snaps.select("source", "topic").distinct()
        ends = crashes.join(pairs, "source").select(
            "source", "topic", "ts", F.lit(False).alias("member"), F.lit(0).alias("order"),
            F.lit(None).cast("long").alias("interval"),
        )
        snaps = snaps.unionByName(ends)
    window = Window.partitionBy("source", "topic").orderBy("ts", "order")
    # the Timeout counter went back: a new process (a crash marker's row has no counter)
    restarted = F.coalesce(F.col("interval") < F.col("previous_interval"), F.lit(False))
    return (
        snaps.withColumn("previous", F.lag("member").over(window))
        .withColumn("previous_interval", F.lag("interval").over(window))
        .where(F.col("member") & (F.col("previous").isNull() | ~F.col("previous") | restarted))
        .select("source", "topic", F.col("ts").alias("joined_ts"))
    )


def classified_deliveries(good: Any, crash_targets: list[tuple[str, float]], F: Any) -> Any:
    """DataFrame (topic, delivery, via, latency) of every usable delivery event."""
    deliveries = (
        good.where(F.col("kind") == "delivery")
        .select(
            "source",
            "topic",
            F.coalesce(F.col("via"), F.lit("unknown")).alias("via"),
            F.coalesce(F.col("delivered_ts"), F.col("ts")).alias("delivered_ts"),
            "published_ts",
        )
        .withColumn("row", F.monotonically_increasing_id())
    )
    starts = membership_starts(good, crash_targets, F)
    d, s = deliveries.alias("d"), starts.alias("s")
    joined = (
        d.join(
            s,
            (F.col("d.source") == F.col("s.source"))
            & (F.col("d.topic") == F.col("s.topic"))
            & (F.col("s.joined_ts") <= F.col("d.delivered_ts")),
            "left",
        )
        .groupBy("d.row", "d.topic", "d.via", "d.delivered_ts", "d.published_ts")
        .agg(F.max("s.joined_ts").alias("joined_ts"))
    )
    history = F.col("published_ts").isNotNull() & F.col("joined_ts").isNotNull() & (
        F.col("published_ts") < F.col("joined_ts")
    )
    return joined.select(
        "topic",
        F.when(history, F.lit(HISTORY)).otherwise(F.lit(LIVE)).alias("delivery"),
        "via",
        (F.col("delivered_ts") - F.col("published_ts")).alias("latency"),
    )


def latency_tables(
    good: Any, crash_targets: list[tuple[str, float]], F: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(latency_quantiles rows, latency_cdf rows), see the module docstring."""
    cdf_array = ", ".join(f"{p:.2f}" for p in CDF_POINTS)
    rows = (
        classified_deliveries(good, crash_targets, F)
        .rollup("topic", "delivery", "via")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.avg("latency").alias("mean"),
            F.min("latency").alias("min"),
            F.max("latency").alias("max"),
            F.expr("percentile(latency, array(0.5, 0.9, 0.99))").alias("q"),
            F.expr(f"percentile(latency, array({cdf_array}))").alias("cdf"),
        )
        .where(F.col("topic").isNotNull() & F.col("delivery").isNotNull())
        .collect()
    )
    quantiles: list[dict[str, Any]] = []
    cdf: list[dict[str, Any]] = []
    order = {LIVE: 0, HISTORY: 1}
    for r in sorted(
        rows, key=lambda r: (r["topic"], order.get(r["delivery"], 2), r["via"] is None, r["via"] or "")
    ):
        via = r["via"] if r["via"] is not None else "all"
        q = r["q"] or [None, None, None]
        quantiles.append(
            {
                "topic": r["topic"],
                "delivery": r["delivery"],
                "via": via,
                "count": r["count"],
                "mean": r["mean"],
                "min": r["min"],
                "p50": q[0],
                "p90": q[1],
                "p99": q[2],
                "max": r["max"],
            }
        )
        for p, value in zip(CDF_POINTS, r["cdf"] or [], strict=False):
            cdf.append(
                {"topic": r["topic"], "delivery": r["delivery"], "via": via, "fraction": p, "latency": value}
            )
    return quantiles, cdf
