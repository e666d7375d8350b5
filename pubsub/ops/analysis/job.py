"""The PySpark convergence analysis job (`pubsub analyze`, or `spark-submit` through
`pubsub.ops.analysis.submit`).

    spark-submit --py-files pubsub.zip pubsub/ops/analysis/submit.py RUN_DIR [options]
    pubsub analyze RUN_DIR [--stream] [--out DIR] [--until-idle S] [--trigger S] ...

Pipeline (one code path for both modes):

1. A Structured Streaming file source reads ``RUN_DIR/events/*.jsonl`` (the files the
   daemons rename into place, docs/events.md) with the explicit schema of
   `pubsub.ops.analysis.schema`.
2. ``foreachBatch`` appends each micro-batch to a Parquet copy of the events in the work
   directory.  Batch mode runs the query with the ``availableNow`` trigger (everything
   present, then stop); live mode (``--stream``) uses a processing-time trigger and stops
   after ``--until-idle`` seconds without a new micro-batch, or on Ctrl-C / SIGTERM.
3. After each micro-batch in live mode, and once at the end in both modes, `compute` runs
   batch queries over all events so far: per-topic legitimacy scans (grouped by topic, run
   in the Python workers, `pubsub.ops.analysis.timeline`), latency quantiles with Spark SQL's
   exact ``percentile``, message rates per bucket and per supervisor interval.
   Recomputing from all events keeps the results exact when files of different daemons
   arrive out of time order; the cost grows with the run (fine for runs of minutes; for
   longer ones raise ``--trigger``).
4. `write_outputs` writes Parquet tables, summary.json and report.html with PNG plots,
   every file atomically.

On a cluster, ``--out`` / ``--work-dir`` must be paths the driver can write (the tables and
report are written by the driver) and the work directory must be visible to executors.
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pubsub.kernel import registry
from pubsub.ops.analysis.output import TABLES, write_json, write_table
from pubsub.ops.analysis.timeline import SNAPSHOT_FIELDS, Grid, markers_from_rows, tracker_factory

#: At most this many time buckets; a wider span widens the buckets (with a warning).
MAX_BUCKETS = 20_000


@dataclass
class Options:
    """What `pubsub analyze` was asked to do (see its --help for each field)."""

    run_dir: Path
    out: Path
    events_dir: Path
    stream: bool = False
    until_idle: float = 30.0
    trigger: float = 1.0
    bucket: float = 0.5
    stable: float = 0.5
    work_dir: Path | None = None
    #: The overlay the run ran (``--overlay``): whose `TopicTracker` measures its topics.
    overlay: str = registry.DEFAULT_OVERLAY

    @property
    def work(self) -> Path:
        return self.work_dir if self.work_dir is not None else self.out / ".work"


@dataclass
class Results:
    """Every output table (rows as dicts, columns as in `output.TABLES`) and the summary."""

    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------ compute
def compute(spark: Any, events: Any, opts: Options) -> Results:
    """Every table and the summary from a DataFrame of all events so far."""
    from pyspark.sql import functions as F

    from pubsub.ops.analysis.schema import problem_column

    ev = events.withColumn("problem", problem_column()).cache()
    try:
        return _compute(spark, ev, opts, F)
    finally:
        ev.unpersist()


def _compute(spark: Any, ev: Any, opts: Options, F: Any) -> Results:
    tracker_factory(opts.overlay)  # NotMeasured before any work for an overlay it cannot measure
    counts = (
        ev.groupBy("kind", "problem")
        .agg(F.count(F.lit(1)).alias("n"), F.min("ts").alias("lo"), F.max("ts").alias("hi"))
        .collect()
    )
    by_kind: dict[str, int] = defaultdict(int)
    unusable: dict[str, int] = {"malformed": 0, "bad_ts": 0, "unknown_kind": 0, "incomplete": 0}
    lo, hi = math.inf, -math.inf
    for row in counts:
        if row["problem"] == "ok":
            by_kind[row["kind"]] += row["n"]
            lo, hi = min(lo, row["lo"]), max(hi, row["hi"])
        else:
            unusable[row["problem"]] += row["n"]
    results = Results({name: [] for name in TABLES})
    warnings: list[str] = []
    if sum(unusable.values()):
        warnings.append(
            "unusable input lines were skipped: "
            + ", ".join(f"{k} {v}" for k, v in unusable.items() if v)
        )
    summary: dict[str, Any] = {
        "settings": {"bucket_seconds": opts.bucket, "stable_seconds": opts.stable},
        "input": {
            "events_used": sum(by_kind.values()),
            "by_kind": dict(sorted(by_kind.items())),
            "unusable": unusable,
        },
        "time": {"t0": None, "t_end": None, "seconds": 0.0},
        "topics": {},
        "markers": [],
        "supervisor_messages": {"intervals": 0},
        "status_checks": {"count": 0, "agree": 0},
        "warnings": warnings,
    }
    results.summary = summary
    if not by_kind:
        return results

    width = opts.bucket
    if (hi - lo) / width > MAX_BUCKETS:
        width = (hi - lo) / MAX_BUCKETS
        warnings.append(
            f"events span {hi - lo:.0f} s: buckets widened from {opts.bucket} s to {width:.3f} s "
            f"(at most {MAX_BUCKETS} buckets)"
        )
    grid = Grid(t0=lo, t_end=hi, width=width)
    summary["settings"]["bucket_seconds"] = width
    summary["time"] = {"t0": lo, "t_end": hi, "seconds": hi - lo}
    good = ev.where(F.col("problem") == "ok")

    # markers and status checks are few: collect them for the per-topic tasks
    small = (
        good.where(F.col("kind").isin("marker", "status_check"))
        .select("kind", "id", "action", "ts", "topic", "targets", "legitimate", "members")
        .collect()
    )
    markers = markers_from_rows(r.asDict() for r in small if r["kind"] == "marker")
    status: dict[str, list[tuple[float, bool | None, int | None]]] = defaultdict(list)
    for r in small:
        if r["kind"] == "status_check":
            status[r["topic"]].append((r["ts"], r["legitimate"], _int_or_none(r["members"])))
    results.tables["markers"] = [
        {
            "id": m.id,
            "action": m.action,
            "topic": m.topic,
            "ts": m.ts,
            "t": m.ts - lo,
            "targets": list(m.targets),
        }
        for m in sorted(markers, key=lambda m: m.ts)
    ]
    summary["markers"] = results.tables["markers"]

    # per-topic legitimacy scans, in the Python workers
    from pubsub.ops.analysis.timeline import topic_task

    snapshots = good.where(F.col("kind") == "snapshot").select(
        "topic", "ts", "source", "member", *SNAPSHOT_FIELDS
    )
    task = partial(
        topic_task, markers=markers, status=dict(status), grid=grid, stable=opts.stable, overlay=opts.overlay
    )
    per_topic = sorted(
        snapshots.rdd.map(_keyed).groupByKey().map(task).collect(), key=lambda t: t["topic"]
    )
    for name, key in (
        ("convergence_timeline", "timeline"),
        ("legitimacy_changes", "steps"),
        ("convergence_times", "convergence"),
        ("degree_distribution", "degrees"),
        ("status_checks", "status_checks"),
    ):
        results.tables[name] = [row for t in per_topic for row in t[key]]
    known = {t["topic"] for t in per_topic}
    for m in markers:  # a marker naming a topic that never had a snapshot
        if m.topic is not None and m.topic not in known:
            results.tables["convergence_times"].append(
                {
                    "marker_id": m.id,
                    "action": m.action,
                    "topic": m.topic,
                    "marker_ts": m.ts,
                    "marker_t": m.ts - lo,
                    "reached": False,
                    "legitimate_ts": None,
                    "time_to_legitimacy": None,
                }
            )

    # delivery latency by class (live / history copied to late joiners) and via: exact
    # percentiles, linear interpolation between ranks (`pubsub.ops.analysis.latency`)
    from pubsub.ops.analysis.latency import latency_tables
    from pubsub.ops.analysis.timeline import REMOVING_ACTIONS

    crash_targets = [(t, m.ts) for m in markers if m.action in REMOVING_ACTIONS for t in m.targets]
    results.tables["latency_quantiles"], results.tables["latency_cdf"] = latency_tables(
        good, crash_targets, F
    )

    # message counts: per bucket, role, direction and kind; supervisor per interval
    msgs = good.where(F.col("kind") == "messages").select(
        "ts",
        F.coalesce(F.col("role"), F.lit("unknown")).alias("role"),
        "source",
        "interval",
        "sent",
        "received",
        "bytes_sent",
        "bytes_received",
        "errors",
    )
    bucket = (
        F.least(F.lit(grid.count - 1), F.greatest(F.lit(0), F.floor((F.col("ts") - lo) / width)))
        .cast("int")
        .alias("bucket")
    )
    exploded = msgs.select(
        bucket, "role", F.lit("sent").alias("direction"), F.explode("sent")
    ).unionByName(
        msgs.select(bucket, "role", F.lit("received").alias("direction"), F.explode("received"))
    )
    rates = (
        exploded.groupBy("bucket", "role", "direction", F.col("key").alias("kind"))
        .agg(F.sum(F.coalesce(F.col("value"), F.lit(0))).alias("frames"))
        .collect()
    )
    for r in sorted(rates, key=lambda r: (r["bucket"], r["role"], r["direction"], r["kind"] or "")):
        start, end = grid.bounds(r["bucket"])
        results.tables["message_rates"].append(
            {
                "bucket": r["bucket"],
                "t_start": start - lo,
                "t_end": end - lo,
                "role": r["role"],
                "direction": r["direction"],
                "kind": r["kind"],
                "frames": r["frames"],
                "frames_per_second": r["frames"] / width,
            }
        )
    total = (
        "aggregate(map_values({0}), cast(0 as bigint),"
        " (a, x) -> a + coalesce(x, cast(0 as bigint)))"
    )
    sup = (
        msgs.where(F.col("role") == "supervisor")
        .select(
            "ts",
            "source",
            "interval",
            F.coalesce(F.expr(total.format("sent")), F.lit(0)).alias("sent"),
            F.coalesce(F.expr(total.format("received")), F.lit(0)).alias("received"),
            "bytes_sent",
            "bytes_received",
            "errors",
        )
        .orderBy("ts")
        .collect()
    )
    results.tables["supervisor_intervals"] = [r.asDict() | {"t": r["ts"] - lo} for r in sup]
    repairs = (  # the tco supervisor's repairs (an audit's edge counts in the same columns)
        good.where(F.col("kind") == "repair")
        .select(
            "ts", "repair", "node", "shadow",
            F.coalesce("added", "edges_added", F.lit(0)).alias("added"),
            F.coalesce("removed", "edges_removed", F.lit(0)).alias("removed"),
            F.coalesce("widened", F.lit(False)).alias("widened"),
        )
        .orderBy("ts")
        .collect()
    )
    results.tables["repairs"] = [r.asDict() | {"t": r["ts"] - lo} for r in repairs]

    _summarise(results, per_topic)
    return results


def _keyed(row: Any) -> tuple[str, tuple[Any, ...]]:
    return (row[0], tuple(row[1:]))


def _int_or_none(text: Any) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _summarise(results: Results, per_topic: list[dict[str, Any]]) -> None:
    summary = results.summary
    latency: dict[str, dict[str, Any]] = defaultdict(dict)
    history: dict[str, dict[str, Any]] = defaultdict(dict)
    for row in results.tables["latency_quantiles"]:
        into = latency if row["delivery"] == "live" else history
        into[row["topic"]][row["via"]] = {
            k: row[k] for k in ("count", "mean", "p50", "p90", "p99", "max")
        }
    conv: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in results.tables["convergence_times"]:
        conv[row["topic"]].append(
            {
                k: row[k]
                for k in ("marker_id", "action", "marker_t", "reached", "time_to_legitimacy")
            }
        )
    topics: dict[str, Any] = {}
    for t in per_topic:
        name = t["topic"]
        degrees = {str(r["degree"]): r["nodes"] for r in t["degrees"] if r["nodes"]}
        ideal = {str(r["degree"]): r["ideal_nodes"] for r in t["degrees"] if r["ideal_nodes"]}
        count = sum(degrees.values())
        topics[name] = {
            **{k: v for k, v in t["summary"].items() if k != "first_ts"},
            "convergence": conv.get(name, []),
            "latency": latency.get(name, {}),
            "latency_history": history.get(name, {}),
            "degree": {
                "distribution": degrees,
                "ideal_distribution": ideal,  # the same members in their legitimate overlay
                "mean": (sum(int(d) * n for d, n in degrees.items()) / count) if count else None,
                "max": max((int(d) for d in degrees), default=None),
            },
        }
    for name in sorted(set(conv) | set(latency) | set(history)):  # seen only in markers/deliveries
        topics.setdefault(
            name,
            {
                "members_at_end": 0,
                "legitimate_at_end": False,
                "legitimate_fraction": 0.0,
                "convergence": conv.get(name, []),
                "latency": latency.get(name, {}),
                "latency_history": history.get(name, {}),
                "degree": {"distribution": {}},
            },
        )
    summary["topics"] = dict(sorted(topics.items()))
    sup = results.tables["supervisor_intervals"]
    sent = [r["sent"] for r in sup]
    summary["supervisor_messages"] = {
        "intervals": len(sup),
        "total_sent": sum(sent),
        "mean_sent_per_interval": (sum(sent) / len(sent)) if sent else None,
        "max_sent_per_interval": max(sent, default=None),
    }
    repairs = results.tables["repairs"]
    summary["repairs"] = {  # the tco supervisor's (none on the other overlays)
        "by_kind": dict(sorted(Counter(str(r["repair"]) for r in repairs).items())),
        "edges_added": sum(int(r["added"] or 0) for r in repairs),
        "edges_removed": sum(int(r["removed"] or 0) for r in repairs),
        "widened": sum(1 for r in repairs if r["widened"]),
    }
    checks = results.tables["status_checks"]
    summary["status_checks"] = {"count": len(checks), "agree": sum(1 for c in checks if c["agree"])}


# ------------------------------------------------------------------------------ outputs
def write_outputs(
    results: Results, opts: Options, *, final: bool, batches: int, data_changed: bool = True
) -> None:
    """Tables, then plots and report.html, then summary.json (each file atomically).

    With ``data_changed=False`` (the final pass of a live run that saw nothing new since
    its last refresh) only report.html and summary.json are rewritten, now marked final.
    """
    from pubsub.ops.analysis.report import write_report

    out = opts.out
    if data_changed:
        for name, rows in results.tables.items():
            write_table(out / "tables" / f"{name}.parquet", name, rows)
    summary = {
        "version": 1,
        "final": final,
        "generated_at": time.time(),
        "run_dir": str(opts.run_dir),
        "events_dir": str(opts.events_dir),
        "batches": batches,
        **results.summary,
    }
    plots = write_report(out, summary, results.tables, replot=data_changed)
    summary["outputs"] = {
        "report": "report.html",
        "tables": {name: f"tables/{name}.parquet" for name in results.tables},
        "plots": sorted(p for files in plots.values() for p in files.values()),
    }
    write_json(out / "summary.json", summary)


