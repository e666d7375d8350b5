"""`pubsub experiment run`: play a scenario on a local cluster and collect its event stream.

The run directory gets::

    RUN_DIR/scenario.yaml     the scenario as played
    RUN_DIR/cluster/          the daemons' data, logs and cluster.json (`LocalCluster`)
    RUN_DIR/events/*.jsonl    every daemon's event stream plus the runner's own events
    RUN_DIR/experiment.json   what the runner did and saw (steps, markers, status checks)
    RUN_DIR/analysis/         the PySpark job's output (`pubsub analyze`), unless skipped

The runner is the experiment's clock.  It starts the cluster with an event stream and an
admin listener on every daemon, subscribes the initial members, writes a ``start`` marker
and then plays the steps at their times: joins, leaves and publications through the
client protocol (marker written by the runner), faults through the daemons' admin
addresses (`pubsub.runtime.admin`, marker written by the daemon that is hit).  Between steps it
polls every running node's ``status`` and writes what it saw as ``status_check`` events
(docs/events.md): that is the nodes' own view, which the analysis is checked against.
After the script it waits (at most ``settle`` seconds) until every topic is legitimate by
status, lets the event files rotate once more, stops every process, moves files that
crashed daemons left in ``events/.inprogress`` into place, and runs the analysis.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pubsub.kernel import registry
from pubsub.kernel.contracts import Overlay
from pubsub.ops.experiment.records import (
    ADMIN_TIMEOUT,
    POLL_SECONDS,
    REPORT_SECONDS,
    TAIL_SECONDS,
    ExperimentError,
    MarkerRecord,
    Progress,
    StatusCheck,
)
from pubsub.ops.experiment.results import move_leftovers, status_convergence
from pubsub.ops.experiment.scenario import Scenario, Step
from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.processes import ClusterError
from pubsub.runtime.admin import admin_request
from pubsub.runtime.adminparams import ChaosError, new_marker_id
from pubsub.runtime.client import RequestError
from pubsub.telemetry.events import EventWriter


def topic_checks(
    statuses: Mapping[str, Mapping[str, Any]],
    topics: Iterable[str],
    ts: float,
    overlay: Overlay | None = None,
) -> list[StatusCheck]:
    """Per topic, whether the running nodes' reported states form the overlay's legitimate
    state (default: the default overlay's).

    The members are the nodes that report the topic (as in the `snapshot` events); the test
    is the overlay's own, from those reports alone (`Overlay.reports_legitimate`; for the
    skip ring: labels l(0..n-1), ideal edges, equal roots).
    """
    judge = (overlay or registry.overlay()).reports_legitimate
    checks = []
    for topic in topics:
        entries: dict[str, Mapping[str, Any]] = {}
        for ref, body in statuses.items():
            entry = (body.get("topics") or {}).get(topic)
            if entry is not None:
                entries[ref] = entry
        checks.append(StatusCheck(ts, topic, judge(entries), len(entries)))
    return checks


class Experiment:
    """One run of a scenario (use `run`)."""

    def __init__(
        self,
        scenario: Scenario,
        run_dir: Path,
        *,
        progress: Progress = print,
        phase: Progress | None = None,
        python: str | None = None,
    ) -> None:
        self.scenario = scenario
        self.run_dir = run_dir.resolve()
        self.events_dir = self.run_dir / "events"
        self.progress = progress
        #: Told what the run does now (`pubsub.ops.progress.Progress.phase`).
        self.phase: Progress = phase or (lambda text: None)
        self.rng = random.Random(scenario.seed)
        self.cluster = LocalCluster(
            self.run_dir / "cluster",
            scenario.nodes,
            interval=scenario.interval,
            config_budget=scenario.config_budget,
            events_dir=self.events_dir,
            admin=True,
            flooding=scenario.flooding,
            python=python,
        )
        self.members: dict[str, set[int]] = {t: set() for t in scenario.topics}
        self.crashed: set[int] = set()
        self.markers: list[MarkerRecord] = []
        self.checks: list[StatusCheck] = []
        self.published = 0
        #: Every daemon process this run started (the test checks none outlives it).
        self.pids: set[int] = set()
        self.writer: EventWriter | None = None
        self.t0 = 0.0

    # --- the run ---------------------------------------------------------------------------------
    def play(self) -> dict[str, Any]:
        """Start the cluster, play the script, settle, stop; the record (also experiment.json)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.events_dir.exists() and any(self.events_dir.iterdir()):
            raise ExperimentError(
                f"{self.events_dir} already holds events; use a new run directory"
            )
        self.events_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "scenario.yaml").write_text(
            json.dumps(self.scenario.model_dump(mode="json"), indent=2), encoding="utf-8"
        )
        settled_after: float | None = None
        try:
            self.phase(f"starting a supervisor and {self.scenario.nodes} nodes in {self.run_dir / 'cluster'}")
            self.cluster.start()
            self._note_pids()
            self.phase("subscribing the initial members")
            self.writer = EventWriter(self.events_dir, role="experiment", source="experiment")
            self._initial_members()
            self.t0 = time.time()
            self._mark(
                "start", [d.ref for d in self.cluster.nodes], None, {"scenario": self.scenario.name}
            )
            self.phase(f"playing the script ({self.scenario.script_seconds:g} s, {len(self.scenario.steps)} steps)")
            self._script()
            self.phase(f"waiting for every topic to be legitimate (at most {self.scenario.settle:g} s)")
            settled_after = self._settle()
            self._poll_for(TAIL_SECONDS)
        finally:
            if self.writer is not None:
                self.writer.close()
            self.phase("stopping every process")
            self.cluster.stop()
            moved = move_leftovers(self.events_dir)
            if moved:
                self.progress(f"moved {moved} event file(s) left by crashed daemons into place")
        record = self._record(settled_after)
        (self.run_dir / "experiment.json").write_text(
            json.dumps(record, indent=2), encoding="utf-8"
        )
        return record

    def _initial_members(self) -> None:
        for topic, count in self.scenario.topics.items():
            for index in range(count):
                self.cluster.subscribe(index, topic)
                self.members[topic].add(index)
        joined = ", ".join(f"{t}: {len(m)} nodes" for t, m in self.members.items())
        self.progress(f"initial members subscribed ({joined})")

    def _script(self) -> None:
        """Play the steps at their times, polling the nodes' status in between and
        reporting it every `REPORT_SECONDS`, until the script's end."""
        total = self.scenario.script_seconds
        steps = list(self.scenario.steps)
        last_report = 0.0
        while steps or self._elapsed() < total:
            while steps and steps[0].at <= self._elapsed():
                self._play(steps.pop(0))
            now = self._elapsed()
            if now >= total and not steps:
                break
            self._poll_once()
            if now - last_report >= REPORT_SECONDS:
                self._report_progress()
                last_report = now
            due = steps[0].at if steps else total
            time.sleep(min(POLL_SECONDS, max(0.0, due - self._elapsed())))

    def _settle(self) -> float | None:
        """Poll until every topic is legitimate by status; seconds after the script, or None."""
        start = time.monotonic()
        deadline = start + self.scenario.settle
        while time.monotonic() < deadline:
            checks = self._poll_once()
            if checks and all(c.legitimate for c in checks):
                took = time.monotonic() - start
                self.progress(f"every topic legitimate {took:.1f} s after the script")
                return took
            time.sleep(POLL_SECONDS)
        self.progress("not every topic became legitimate before the settle deadline")
        return None

    def _poll_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._poll_once()
            time.sleep(POLL_SECONDS)

    def _poll_once(self) -> list[StatusCheck]:
        try:
            statuses = self.cluster.node_statuses()
        except ClusterError:
            return []  # a node died between two polls; the next poll sees the new set
        checks = topic_checks(statuses, self.scenario.topics, time.time(), self.cluster.overlay)
        for check in checks:
            self.checks.append(check)
            self._emit(
                "status_check",
                topic=check.topic,
                legitimate=check.legitimate,
                members=check.members,
            )
        return checks

    def _report_progress(self) -> None:
        latest = {c.topic: c for c in self.checks[-len(self.scenario.topics) :]}
        states = ", ".join(
            f"{t}: {c.members} members, {'legitimate' if c.legitimate else 'converging'}"
            for t, c in sorted(latest.items())
        )
        self._script_line(states)

    def _elapsed(self) -> float:
        return time.time() - self.t0

    # --- the steps -------------------------------------------------------------------------------
    def _play(self, step: Step) -> None:
        handler = getattr(self, f"_step_{step.action}")
        began = self._elapsed()
        detail = handler(step)
        self._script_line(f"{step.action}{' ' + step.topic if step.topic else ''}: {detail}", began)

    def _script_line(self, text: str, at: float | None = None) -> None:
        """A line about the script, stamped with the script's own clock (the steps' ``at``;
        a step's line with the moment it began), which the progress lines' run clock is
        not: ``  script   3.0 / 50 s: publish ...``."""
        at = self._elapsed() if at is None else at
        self.progress(f"  script {at:5.1f} / {self.scenario.script_seconds:g} s: {text}")

    def _choose(self, step: Step, eligible: Iterable[int]) -> list[int]:
        pool = sorted(eligible)
        if step.nodes is not None:
            chosen = [i for i in step.nodes if i in pool]
            skipped = sorted(set(step.nodes) - set(chosen))
            if skipped:
                self.progress(f"  nodes {skipped} are not eligible for {step.action}; skipped")
            return chosen
        if step.count == 0 or step.count >= len(pool):
            return pool
        return sorted(self.rng.sample(pool, step.count))

    def _running(self) -> set[int]:
        return set(range(self.scenario.nodes)) - self.crashed

    def _refs(self, indexes: Iterable[int]) -> list[str]:
        return [self.cluster.nodes[i].ref for i in indexes]

    def _step_join(self, step: Step) -> str:
        assert step.topic is not None
        chosen = self._choose(step, self._running() - self.members[step.topic])
        self._mark("join", self._refs(chosen), step.topic, {})
        for index in chosen:
            self.cluster.subscribe(index, step.topic)
            self.members[step.topic].add(index)
        return f"nodes {chosen}"

    def _step_leave(self, step: Step) -> str:
        assert step.topic is not None
        chosen = self._choose(step, self.members[step.topic] - self.crashed)
        self._mark("leave", self._refs(chosen), step.topic, {})
        for index in chosen:
            self.cluster.unsubscribe(index, step.topic)
            self.members[step.topic].discard(index)
        return f"nodes {chosen}"

    def _step_publish(self, step: Step) -> str:
        assert step.topic is not None
        publishers = sorted(self.members[step.topic] - self.crashed)
        if not publishers:
            return "no running member to publish through; skipped"
        count = step.count or 1
        for k in range(count):
            start = time.monotonic()
            index = self.rng.choice(publishers)
            self.cluster.publish(index, step.topic, f"{self.scenario.name} #{self.published}")
            self.published += 1
            if k % 5 == 4:
                self._poll_once()
            time.sleep(max(0.0, 1.0 / step.rate - (time.monotonic() - start)))
        # marked after the last acknowledgement: from here every trie must come to hold all
        self._mark("publish", self._refs(publishers), step.topic, {"count": count})
        return f"{count} publications"

    def _step_restart(self, step: Step) -> str:
        chosen = self._choose(step, self.crashed)
        self.cluster.restart_nodes(chosen)
        self.crashed.difference_update(chosen)
        self._note_pids()
        # marked once the processes answer: the perturbation is their return, not the launch
        self._mark("restart", self._refs(chosen), None, {})
        return f"nodes {chosen}"

    def _step_crash(self, step: Step) -> str:
        chosen = self._choose(step, self._running())
        marker = new_marker_id("crash")
        refs = self._refs(chosen)
        for k, index in enumerate(chosen):
            daemon = self.cluster.nodes[index]
            self._admin(
                daemon.admin_ref,
                "crash",
                # the last one writes the marker: no target's event is later than it
                {"marker_id": marker, "record": k == len(chosen) - 1, "targets": refs},
            )
        for index in chosen:
            self.cluster.wait_exited(index)
            self.crashed.add(index)
        self._remember(marker, "crash", refs, None, {})
        return f"nodes {chosen}"

    def _step_corrupt_node(self, step: Step) -> str:
        chosen = self._choose(step, self._running())
        marker = new_marker_id("corrupt_node")
        refs = self._refs(chosen)
        params: dict[str, Any] = {"seed": self.rng.randrange(1 << 30)}
        if step.topic is not None:
            params["topic"] = step.topic
        for k, index in enumerate(chosen):
            daemon = self.cluster.nodes[index]
            self._admin(
                daemon.admin_ref,
                "corrupt_node",
                {
                    **params,
                    "seed": params["seed"] + k,
                    "marker_id": marker,
                    "record": k == 0,
                    "targets": refs,
                },
            )
        self._remember(marker, "corrupt_node", refs, step.topic, params)
        return f"nodes {chosen}"

    def _step_corrupt_supervisor(self, step: Step) -> str:
        marker = new_marker_id("corrupt_supervisor")
        params: dict[str, Any] = {"seed": self.rng.randrange(1 << 30)}
        if step.topic is not None:
            params["topic"] = step.topic
        body = self._admin(
            self.cluster.supervisor.admin_ref, "corrupt_supervisor", {**params, "marker_id": marker}
        )
        self._remember(
            marker, "corrupt_supervisor", [self.cluster.supervisor.ref], step.topic, params
        )
        sizes = {
            t: v.get("n") for t, v in (body.get("topics") or {}).items() if isinstance(v, dict)
        }
        counts = ", ".join(f"{t} {n}" for t, n in sorted(sizes.items())) or "none"
        return f"database corrupted (tuples per topic now: {counts})"

    def _step_partition(self, step: Step) -> str:
        chosen = self._choose(step, self._running())
        marker = new_marker_id("partition")
        refs = self._refs(chosen)
        for k, index in enumerate(chosen):
            self._admin(
                self.cluster.nodes[index].admin_ref,
                "partition",
                {"members": refs, "duration": step.duration, "marker_id": marker, "record": k == 0},
            )
        self._remember(marker, "partition", refs, None, {"duration": step.duration})
        return f"nodes {chosen} cut off for {step.duration:g} s"

    def _step_drop(self, step: Step) -> str:
        chosen = self._choose(step, self._running())
        marker = new_marker_id("drop")
        refs = self._refs(chosen)
        for k, index in enumerate(chosen):
            self._admin(
                self.cluster.nodes[index].admin_ref,
                "drop",
                {
                    "fraction": step.fraction,
                    "duration": step.duration,
                    "marker_id": marker,
                    "record": k == 0,
                    "targets": refs,
                },
            )
        self._remember(
            marker, "drop", refs, None, {"fraction": step.fraction, "duration": step.duration}
        )
        return f"nodes {chosen} drop {step.fraction:g} of their frames for {step.duration:g} s"

    # --- helpers ---------------------------------------------------------------------------------
    def _note_pids(self) -> None:
        self.pids.update(d.pid for d in [self.cluster.supervisor, *self.cluster.nodes] if d.pid)

    def _admin(self, admin_ref: str | None, action: str, params: dict[str, Any]) -> dict[str, Any]:
        if admin_ref is None:
            raise ExperimentError("the cluster was started without admin listeners")
        try:
            return asyncio.run(admin_request(admin_ref, action, params, timeout=ADMIN_TIMEOUT))
        except (ChaosError, RequestError) as exc:
            raise ExperimentError(f"{action} at {admin_ref} failed: {exc}") from exc

    def _emit(self, kind: str, **fields: Any) -> None:
        if self.writer is not None:
            self.writer.emit(kind, **fields)

    def _mark(
        self, action: str, targets: list[str], topic: str | None, params: dict[str, Any]
    ) -> None:
        """A marker the runner writes itself (steps that are not injections)."""
        marker = new_marker_id(action)
        fields: dict[str, Any] = {
            "id": marker,
            "action": action,
            "targets": targets,
            "params": params,
        }
        if topic is not None:
            fields["topic"] = topic
        self._emit("marker", **fields)
        self._remember(marker, action, targets, topic, params)

    def _remember(
        self,
        marker: str,
        action: str,
        targets: list[str],
        topic: str | None,
        params: dict[str, Any],
    ) -> None:
        self.markers.append(MarkerRecord(marker, action, time.time(), targets, topic, params))

    def _record(self, settled_after: float | None) -> dict[str, Any]:
        return {
            "scenario": self.scenario.model_dump(mode="json"),
            "started_at": self.t0,
            "settled_after_script": settled_after,
            "published": self.published,
            "markers": [vars(m) for m in self.markers],
            "status_convergence": status_convergence(
                self.markers, self.checks, self.scenario.topics
            ),
            "status_checks": len(self.checks),
            "pids": sorted(self.pids),
        }


