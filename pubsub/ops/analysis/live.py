"""Running the analysis (`pubsub.ops.analysis.job`) as a Structured Streaming query:
micro-batches appended to the Parquet copy, results recomputed after each batch in live
mode, a graceful stop on SIGINT/SIGTERM or when the stream stays idle."""

from __future__ import annotations

import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pubsub.ops.analysis.job import Options, Results, compute, write_outputs


# ------------------------------------------------------------------------------ running
class Analysis:
    """One run of the job: the streaming query, its micro-batches, the outputs."""

    def __init__(
        self,
        spark: Any,
        opts: Options,
        log: Callable[[str], None] | None = None,
        phase: Callable[[str], None] | None = None,
    ) -> None:
        self.spark = spark
        self.opts = opts
        self.log = log or (lambda text: print(text, file=sys.stderr, flush=True))
        #: Told what the run does now (`pubsub.ops.progress.Progress.phase`).
        self.phase = phase or (lambda text: None)
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
            if final:
                self.phase("computing legitimacy, convergence times, latencies and rates")
            self.last_results = compute(self.spark, self.all_events(), self.opts)
            self.refreshed_at = self.batches
        results = self.last_results
        assert results is not None
        if final:
            self.phase("writing the tables, plots and report")
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
        self.phase(
            f"{'watching' if opts.stream else 'reading'} the event files in {opts.events_dir} "
            f"({max(self._event_files(), 0)} now)"
        )
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
        used = summary["input"]["events_used"]
        self.log(
            f"final report: {opts.out / 'report.html'} ({self.batches} micro-batches, "
            f"{self.events_seen} lines read, {used} usable events, final pass {time.monotonic() - started:.1f} s)"
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
    spark: Any,
    opts: Options,
    log: Callable[[str], None] | None = None,
    phase: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the job with an existing session; SIGINT/SIGTERM end a live run gracefully.
    `log` gets the run's lines, `phase` what it does now (for a progress display)."""
    analysis = Analysis(spark, opts, log, phase)
    previous: dict[signal.Signals, Any] = {}
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
