"""The PySpark convergence analysis job (`pubsub analyze`, or `spark-submit` on this file).

    spark-submit --py-files pubsub.zip pubsub/ops/analysis/job.py RUN_DIR [options]
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
import shutil
import signal
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # spark-submit runs this file as a script: don't let this
    # directory's modules shadow anything, and import the package from the zip / install.
    _here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _here]

from pubsub.ops.analysis.output import TABLES, write_json, write_table
from pubsub.ops.analysis.timeline import Grid, markers_from_rows

#: At most this many time buckets; a wider span widens the buckets (with a warning).
MAX_BUCKETS = 20_000
#: Cumulative fractions at which the latency CDF is sampled.
CDF_POINTS = [i / 100 for i in range(101)]


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
        "topic",
        "ts",
        "source",
        "member",
        "label",
        "left",
        "right",
        "ring",
        "shortcuts",
        "trie_root",
    )
    task = partial(topic_task, markers=markers, status=dict(status), grid=grid, stable=opts.stable)
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

    # delivery latency by via (exact percentiles, linear interpolation between ranks)
    deliveries = good.where(F.col("kind") == "delivery").select(
        "topic",
        F.coalesce(F.col("via"), F.lit("unknown")).alias("via"),
        (F.col("delivered_ts") - F.col("published_ts")).alias("latency"),
    )
    cdf_array = ", ".join(f"{p:.2f}" for p in CDF_POINTS)
    latency = (
        deliveries.rollup("topic", "via")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.avg("latency").alias("mean"),
            F.min("latency").alias("min"),
            F.max("latency").alias("max"),
            F.expr("percentile(latency, array(0.5, 0.9, 0.99))").alias("q"),
            F.expr(f"percentile(latency, array({cdf_array}))").alias("cdf"),
        )
        .where(F.col("topic").isNotNull())
        .collect()
    )
    for r in sorted(latency, key=lambda r: (r["topic"], r["via"] is None, r["via"] or "")):
        via = r["via"] if r["via"] is not None else "all"
        q = r["q"] or [None, None, None]
        results.tables["latency_quantiles"].append(
            {
                "topic": r["topic"],
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
            results.tables["latency_cdf"].append(
                {"topic": r["topic"], "via": via, "fraction": p, "latency": value}
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
    for row in results.tables["latency_quantiles"]:
        latency[row["topic"]][row["via"]] = {
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
        count = sum(degrees.values())
        topics[name] = {
            **{k: v for k, v in t["summary"].items() if k != "first_ts"},
            "convergence": conv.get(name, []),
            "latency": latency.get(name, {}),
            "degree": {
                "distribution": degrees,
                "mean": (sum(int(d) * n for d, n in degrees.items()) / count) if count else None,
                "max": max((int(d) for d in degrees), default=None),
            },
        }
    for name in sorted(set(conv) | set(latency)):  # topics seen only in markers/deliveries
        topics.setdefault(
            name,
            {
                "members_at_end": 0,
                "legitimate_at_end": False,
                "legitimate_fraction": 0.0,
                "convergence": conv.get(name, []),
                "latency": latency.get(name, {}),
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


# ------------------------------------------------------------------------------ running
class Analysis:
    """One run of the job: the streaming query, its micro-batches, the outputs."""

    def __init__(self, spark: Any, opts: Options, log: Callable[[str], None] | None = None) -> None:
        self.spark = spark
        self.opts = opts
        self.log = log or (lambda text: print(text, file=sys.stderr, flush=True))
        self.batches = 0
        self.events_seen = 0
        self.last_results: Results | None = None
        self.refreshed_at = -1  # value of `batches` at the last compute
        self.busy = False
        self.last_activity = time.monotonic()
        self.stop_requested = threading.Event()
        self.last_summary: dict[str, Any] = {}

    # -- the pieces -------------------------------------------------------------------
    def _events_store(self) -> Path:
        return self.opts.work / "events"

    def all_events(self) -> Any:
        from pubsub.ops.analysis.schema import event_schema

        store = self._events_store()
        if not any(store.glob("*.parquet")):
            return self.spark.createDataFrame([], event_schema())
        return self.spark.read.schema(event_schema()).parquet(str(store))

    def on_batch(self, batch: Any, batch_id: int) -> None:
        """foreachBatch: keep the micro-batch; in live mode, refresh every output."""
        self.busy = True
        try:
            # One job per micro-batch: no separate count (an empty batch writes an empty file).
            batch.write.mode("append").parquet(str(self._events_store()))
            self.batches += 1
            if self.opts.stream:
                started = time.monotonic()
                self.refresh(final=False)
                self.log(
                    f"batch {batch_id}: {self._brief()} "
                    f"({self.events_seen} events, refreshed in {time.monotonic() - started:.1f} s)"
                )
        finally:
            self.busy = False
            self.last_activity = time.monotonic()

    def refresh(self, final: bool) -> dict[str, Any]:
        """Recompute from all events so far (unless nothing arrived since the last time)
        and write every output."""
        fresh = self.last_results is None or self.refreshed_at != self.batches
        if fresh:
            self.last_results = compute(self.spark, self.all_events(), self.opts)
            self.refreshed_at = self.batches
        results = self.last_results
        assert results is not None
        write_outputs(results, self.opts, final=final, batches=self.batches, data_changed=fresh)
        self.last_summary = results.summary
        inp = results.summary["input"]
        self.events_seen = inp["events_used"] + sum(inp["unusable"].values())
        return results.summary

    def _brief(self) -> str:
        parts = []
        for name, t in self.last_summary.get("topics", {}).items():
            conv = [c for c in t.get("convergence", []) if c["reached"]]
            last = f", last convergence {conv[-1]['time_to_legitimacy']:.2f} s" if conv else ""
            parts.append(
                f"{name}: {t.get('members_at_end', 0)} members, "
                f"{'legitimate' if t.get('legitimate_at_end') else 'not legitimate'}{last}"
            )
        return "; ".join(parts) or "no topics yet"

    # -- the whole run ----------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Run the query to its end, then write the final outputs; returns the summary."""
        from pubsub.ops.analysis.schema import CORRUPT, event_schema

        opts = self.opts
        work = opts.work
        for ours in (work / "events", work / "checkpoint"):  # never anything else in there
            shutil.rmtree(ours, ignore_errors=True)
        work.mkdir(parents=True, exist_ok=True)
        source = (
            self.spark.readStream.schema(event_schema())
            .option("pathGlobFilter", "*.jsonl")
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT)
            .json(str(opts.events_dir))
        )
        writer = (
            source.writeStream.foreachBatch(self.on_batch)
            .option("checkpointLocation", str(work / "checkpoint"))
            .queryName(f"pubsub-analyze-{id(self)}")
        )
        if opts.stream:
            writer = writer.trigger(processingTime=f"{int(opts.trigger * 1000)} milliseconds")
        else:
            writer = writer.trigger(availableNow=True)
        query = writer.start()
        self.last_activity = time.monotonic()
        try:
            if opts.stream:
                self.log(
                    f"watching {opts.events_dir} (stops after {opts.until_idle:g} s without new "
                    f"files, or on Ctrl-C); outputs in {opts.out}"
                )
                self._watch(query)
            else:
                query.awaitTermination()
            if query.exception() is not None:
                raise RuntimeError(f"the streaming query failed: {query.exception()}")
        finally:
            if query.isActive:
                query.stop()
        started = time.monotonic()
        summary = self.refresh(final=True)
        self.log(
            f"final report: {opts.out / 'report.html'} ({self.batches} micro-batches, "
            f"{self.events_seen} events, final pass {time.monotonic() - started:.1f} s)"
        )
        for ours in (work / "events", work / "checkpoint"):
            shutil.rmtree(ours, ignore_errors=True)
        if opts.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
        return summary

    def _event_files(self) -> int:
        """How many finished event files the events directory holds (-1 if unknown)."""
        try:
            return sum(1 for _ in self.opts.events_dir.glob("*.jsonl"))
        except OSError:
            return -1

    def _watch(self, query: Any) -> None:
        """Live mode: poll until idle long enough (or asked to stop), then drain and stop.

        Idle means: no new event file appeared in the directory, and Spark neither had new
        data pending nor ran a micro-batch, for ``until_idle`` seconds (a slow first batch
        on a loaded machine is activity, not idleness).
        """
        files = self._event_files()
        while query.isActive and not self.stop_requested.is_set():
            self.stop_requested.wait(0.25)
            now = time.monotonic()
            current = self._event_files()
            if current != files:
                files = current
                self.last_activity = now
            status = query.status
            waiting = str(status.get("message", "")).startswith("Waiting for")
            if self.busy or status.get("isDataAvailable") or not waiting:
                self.last_activity = now  # initializing, planning or processing a batch
            idle = now - self.last_activity
            if idle >= self.opts.until_idle:
                self.log(f"no new events for {idle:.1f} s: finishing")
                break
        if query.isActive:
            if not self.stop_requested.is_set():
                query.processAllAvailable()
            query.stop()


def run_analysis(
    spark: Any, opts: Options, log: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Run the job with an existing session; SIGINT/SIGTERM end a live run gracefully."""
    analysis = Analysis(spark, opts, log)
    previous: dict[int, Any] = {}
    if opts.stream and threading.current_thread() is threading.main_thread():

        def stop(signum: int, frame: Any) -> None:
            analysis.log("stop requested: writing the final report")
            analysis.stop_requested.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, stop)
    try:
        return analysis.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> None:
    """Entry point for ``spark-submit pubsub/ops/analysis/job.py RUN_DIR ...`` (same options as
    ``pubsub analyze``)."""
    from pubsub.ops.analysis.cli import analyze

    analyze.main(args=argv, prog_name="job.py")


if __name__ == "__main__":
    main()
